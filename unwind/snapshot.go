package unwind

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"codeberg.org/stacktop/stacktop/regs"
	"codeberg.org/stacktop/stacktop/sframe"
)

// A Snapshot is one captured thread, complete enough to replay its walk
// offline: registers, the stack window copied at the sample, the thread's
// stack bounds and the module table with each module's raw .sframe bytes.
// Integration tests save live captures as JSON under testdata and replay
// them in unit tests on any host.
type Snapshot struct {
	Comment string           `json:"comment,omitempty"`
	Regs    regs.Set         `json:"regs"`
	Window  SnapshotWindow   `json:"window"`
	Stack   StackBounds      `json:"stack"`
	PACMask uint64           `json:"pac_mask,omitempty"`
	Modules []SnapshotModule `json:"modules"`
	// Expect, when present, is the walk's known-good result (checked by
	// hand or against gdb at capture time); replay tests compare with it.
	Expect *SnapshotExpect `json:"expect,omitempty"`
}

// SnapshotWindow is the captured stack bytes at Base.
type SnapshotWindow struct {
	Base  uint64 `json:"base"`
	Bytes []byte `json:"bytes"`
}

// SnapshotModule is a Module with its .sframe section as bytes.
type SnapshotModule struct {
	Start       uint64 `json:"start"`
	End         uint64 `json:"end"`
	Bias        uint64 `json:"bias"`
	Path        string `json:"path,omitempty"`
	IsVDSO      bool   `json:"vdso,omitempty"`
	SFrame      []byte `json:"sframe,omitempty"`
	SFrameVaddr uint64 `json:"sframe_vaddr,omitempty"`
}

// SnapshotExpect is the expected walk: frames as PC and method names.
type SnapshotExpect struct {
	PCs      []uint64 `json:"pcs"`
	Methods  []string `json:"methods"`
	Complete bool     `json:"complete"`
}

// Limits on snapshot contents, so a corrupt file cannot make the reader
// allocate without bound.
const (
	maxSnapshotWindow  = 64 << 20
	maxSnapshotModules = 1 << 16
)

// ErrSnapshot marks an invalid snapshot.
var ErrSnapshot = errors.New("unwind: invalid snapshot")

// WriteTo writes the snapshot as indented JSON.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "\t")
	if err := enc.Encode(s); err != nil {
		return 0, err
	}
	return b.WriteTo(w)
}

// ReadSnapshot decodes and checks a snapshot written by WriteTo.
func ReadSnapshot(r io.Reader) (*Snapshot, error) {
	var s Snapshot
	if err := json.NewDecoder(io.LimitReader(r, 4*maxSnapshotWindow)).Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if s.Regs.Arch.SPReg() < 0 {
		return nil, fmt.Errorf("%w: arch %v", ErrSnapshot, s.Regs.Arch)
	}
	if len(s.Window.Bytes) > maxSnapshotWindow || len(s.Modules) > maxSnapshotModules {
		return nil, fmt.Errorf("%w: %d window bytes, %d modules", ErrSnapshot, len(s.Window.Bytes), len(s.Modules))
	}
	for i, m := range s.Modules {
		if m.Start >= m.End {
			return nil, fmt.Errorf("%w: module %d (%s): empty range [%#x, %#x)", ErrSnapshot, i, m.Path, m.Start, m.End)
		}
	}
	if e := s.Expect; e != nil && len(e.PCs) != len(e.Methods) {
		return nil, fmt.Errorf("%w: expect has %d pcs and %d methods", ErrSnapshot, len(e.PCs), len(e.Methods))
	}
	return &s, nil
}

// ModuleList parses the modules' .sframe sections. A section that does
// not parse is an error: a snapshot is test input and should be exact.
func (s *Snapshot) ModuleList() (ModuleList, error) {
	mods := make([]Module, len(s.Modules))
	for i, m := range s.Modules {
		mods[i] = Module{Start: m.Start, End: m.End, Bias: m.Bias, Path: m.Path, IsVDSO: m.IsVDSO}
		if m.SFrame == nil {
			continue
		}
		sec, err := sframe.Parse(m.SFrame, m.SFrameVaddr)
		if err != nil {
			return nil, fmt.Errorf("%w: module %d (%s): %w", ErrSnapshot, i, m.Path, err)
		}
		mods[i].SFrame = sec
	}
	l := NewModuleList(mods...)
	for i := 1; i < len(l); i++ {
		if l[i].Start < l[i-1].End {
			return nil, fmt.Errorf("%w: modules %s and %s overlap", ErrSnapshot, l[i-1].Path, l[i].Path)
		}
	}
	return l, nil
}

// Walk replays the snapshot's walk with opts; the snapshot's stack
// bounds and PAC mask are used unless opts sets its own.
func (s *Snapshot) Walk(opts Options) (Stack, error) {
	mods, err := s.ModuleList()
	if err != nil {
		return Stack{}, err
	}
	if opts.Stack.High == 0 {
		opts.Stack = s.Stack
	}
	if opts.PACMask == 0 {
		opts.PACMask = s.PACMask
	}
	return Walk(s.Regs, &StackWindow{Base: s.Window.Base, Bytes: s.Window.Bytes}, mods, opts), nil
}

// Check compares a walk with s.Expect; nil when there is nothing to
// compare or they agree.
func (s *Snapshot) Check(st Stack) error {
	e := s.Expect
	if e == nil {
		return nil
	}
	if st.Complete != e.Complete {
		return fmt.Errorf("complete = %v, want %v (err %v)", st.Complete, e.Complete, st.Err)
	}
	if len(st.Frames) != len(e.PCs) {
		return fmt.Errorf("%d frames, want %d (err %v)", len(st.Frames), len(e.PCs), st.Err)
	}
	for i, f := range st.Frames {
		if f.PC != e.PCs[i] || f.Method.String() != e.Methods[i] {
			return fmt.Errorf("frame %d = %#x %v, want %#x %s", i, f.PC, f.Method, e.PCs[i], e.Methods[i])
		}
	}
	return nil
}
