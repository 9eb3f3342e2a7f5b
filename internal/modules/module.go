package modules

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"sync"

	"codeberg.org/stacktop/stacktop/cfi"
	"codeberg.org/stacktop/stacktop/debuginfo/buildid"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// Module is one ELF object (executable, shared library, vDSO image) opened
// for unwinding and symbolisation. A Module is shared by every process and
// thread that maps the same object, so it holds nothing per-process: the load
// bias lives in ExecMapping. Its fields are set once and then only read.
type Module struct {
	Path    string    // the path of the first mapping it was opened for (maps' view)
	BuildID string    // GNU build ID, lowercase hex; "" if none
	Arch    regs.Arch // from e_machine; ArchUnknown for other machines
	Type    elf.Type  // ET_EXEC (fixed addresses) or ET_DYN (PIE, shared library)
	// File stays open until the ModuleCache (or Close, for modules made by
	// ModuleFromImage) is closed; later stages read symbols from it.
	File *elf.File
	// SFrame is the decoded .sframe section, nil when the object has none
	// or it could not be decoded; SFrameErr then says why (nil when the
	// object simply has no .sframe). A corrupt section is not fatal: the
	// unwinder falls back to frame pointers for this module.
	SFrame    *sframe.Section
	SFrameErr error
	Source    procmaps.Source // how the file was opened
	Key       FileKey         // zero for in-memory images

	closer io.Closer
	cfi    LazyCFI
}

// CFI is the module's DWARF CFI table (.eh_frame, .debug_frame), built at
// its first lookup: most modules of a process, and every module whose
// frames SFrame covers, never need one, and building one costs a parse of
// the whole .eh_frame. It lives as long as the module, so it is shared by
// every process and address-space snapshot that maps the module, under
// the ModuleCache's one policy, like the module's SFrame section.
func (m *Module) CFI() *LazyCFI {
	m.cfi.init.Do(func() { m.cfi.file = m.File })
	return &m.cfi
}

// LazyCFI is a module's CFI table, loaded on first use (Module.CFI).
type LazyCFI struct {
	init sync.Once
	file *elf.File
	once sync.Once
	tab  *cfi.Table
	err  error // why the module has no table; lookups then miss
}

// Lookup finds the CFI row for pc (an address of the object file). A
// module without usable CFI gives cfi.ErrNoFDE, as a PC without an FDE
// does: the walker falls back to frame pointers, not to an error.
func (l *LazyCFI) Lookup(pc uint64) (cfi.Row, error) {
	l.once.Do(func() {
		if l.file == nil {
			l.err = cfi.ErrUnsupported
			return
		}
		l.tab, l.err = cfi.Load(l.file)
	})
	if l.tab == nil {
		return cfi.Row{}, cfi.ErrNoFDE
	}
	return l.tab.Lookup(pc)
}

// Load builds the table now, if not yet built: a lookup then finds it
// ready (a prefetch, on a goroutine of its own).
func (l *LazyCFI) Load() { l.Lookup(0) }

// Err says why the module has no CFI table (nil before the first lookup,
// or when it has one).
func (l *LazyCFI) Err() error { return l.err }

// FileKey identifies a file's contents well enough to share a Module between
// processes, and to key what caches keep of it across runs: device and
// inode name the file, and its change time (which no user can set) moves
// with every write, so no other file, and no later content, has the key.
type FileKey struct {
	Dev     uint64
	Ino     uint64
	Size    int64
	MtimeNS int64
	CtimeNS int64
	UID     uint32 // the owner: modules are shared by build ID only between files of one owner
}

func (m *Module) String() string {
	return fmt.Sprintf("%s (%s, build-id %s)", m.Path, m.Arch, m.BuildID)
}

// Close releases the module's file. Modules from a ModuleCache are closed by
// the cache; call this only on modules from ModuleFromImage (a no-op there).
func (m *Module) Close() error {
	if m.closer == nil {
		return nil
	}
	err := m.closer.Close()
	m.closer = nil
	return err
}

// newModule reads the ELF headers, build ID and .sframe of r. It does not
// take ownership of r on error.
func newModule(r io.ReaderAt, path string) (*Module, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("modules: %s: %w", path, err)
	}
	m := &Module{Path: path, Arch: procmaps.ArchOf(f), Type: f.Type, File: f}
	// A build ID we cannot read only costs sharing across inodes.
	m.BuildID, _ = buildid.Read(f)
	m.SFrame, m.SFrameErr = loadSFrame(f)
	return m, nil
}

// loadSFrame finds and decodes the module's .sframe. The decoder is meant
// never to panic on bad bytes; the recover is a second line of defence, since
// a sampler attached to a production process must not die on one odd file.
func loadSFrame(f *elf.File) (sec *sframe.Section, err error) {
	defer func() {
		if r := recover(); r != nil {
			sec, err = nil, fmt.Errorf("modules: sframe decoder panicked: %v", r)
		}
	}()
	sec, err = sframe.FromELF(f)
	if errors.Is(err, sframe.ErrNoSFrame) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return sec, nil
}

// ModuleFromImage builds a Module from an ELF image held in memory, such as
// the vDSO read out of a process. name becomes its Path ("[vdso]").
func ModuleFromImage(name string, image []byte) (*Module, error) {
	m, err := newModule(bytes.NewReader(image), name)
	if err != nil {
		return nil, err
	}
	m.Source = procmaps.SourceImage
	return m, nil
}

// ErrCacheClosed is returned by a ModuleCache after Close.
var ErrCacheClosed = errors.New("modules: module cache closed")

// ModuleCache opens each ELF object once and shares the Module between all
// processes, threads and samples that map it. It is keyed by build ID, else
// by (device, inode, size, mtime), so two processes of one binary get the
// same *Module, and so do two containers with copies of it. It is safe for
// concurrent use. Close it when sampling ends: it owns the open files.
type ModuleCache struct {
	mu      sync.Mutex
	byID    map[buildIDOwner]*Module
	byFile  map[FileKey]*Module
	modules []*Module
	closed  bool
}

// NewModuleCache returns an empty cache.
func NewModuleCache() *ModuleCache {
	return &ModuleCache{byID: map[buildIDOwner]*Module{}, byFile: map[FileKey]*Module{}}
}

// Len is the number of distinct modules held.
func (c *ModuleCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.modules)
}

// Modules returns the modules held, in the order they were opened.
func (c *ModuleCache) Modules() []*Module {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Module(nil), c.modules...)
}

// ForMapping returns the Module for the file behind mapping m of process
// pid, opening it (see procmaps.OpenMapping) the first time it is seen.
func (c *ModuleCache) ForMapping(pid int, m *procmaps.Mapping) (*Module, error) {
	f, src, err := procmaps.OpenMapping(pid, m)
	if err != nil {
		return nil, err
	}
	st := &f.Stat
	key := FileKey{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(), UID: st.Uid}

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		f.Close()
		return nil, ErrCacheClosed
	}
	if mod, ok := c.byFile[key]; ok {
		c.mu.Unlock()
		f.Close()
		return mod, nil
	}
	c.mu.Unlock()

	// Parse outside the lock: reading headers and .sframe does I/O.
	mod, err := newModule(f, m.Path)
	if err != nil {
		f.Close()
		return nil, err
	}
	mod.Source, mod.Key, mod.closer = src, key, f

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		f.Close()
		return nil, ErrCacheClosed
	}
	if old, ok := c.byFile[key]; ok { // another goroutine won the race
		f.Close()
		return old, nil
	}
	if mod.BuildID != "" {
		// The same object at another inode (a container's copy of a
		// library) shares one Module. A build ID is the file's word only:
		// a user's file may claim any, so it is believed only between
		// files of one owner, never to stand for root's library.
		id := buildIDOwner{mod.BuildID, key.UID}
		if old, ok := c.byID[id]; ok {
			f.Close()
			c.byFile[key] = old
			return old, nil
		}
		c.byID[id] = mod
	}
	c.byFile[key] = mod
	c.modules = append(c.modules, mod)
	return mod, nil
}

// buildIDOwner keys the modules shared by build ID.
type buildIDOwner struct {
	id  string
	uid uint32
}

// Close closes every module's file. Modules handed out stay readable as
// structs, but their File must not be used afterwards.
func (c *ModuleCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, m := range c.modules {
		if err := m.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.modules, c.byID, c.byFile = nil, nil, nil
	return errors.Join(errs...)
}
