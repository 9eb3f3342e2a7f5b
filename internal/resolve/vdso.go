package resolve

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"sync"

	"codeberg.org/stacktop/stacktop/internal/modules"
)

// maxVDSOSize bounds the [vdso] mapping read: kernels map two to four
// pages, so anything larger is not a vDSO image.
const maxVDSOSize = 1 << 20

// vdsoModules shares one Module per distinct vDSO image: every process on
// a host maps the same kernel-provided image, so it is read and parsed
// once. Keyed by the image bytes (a few KiB), which is exact.
var vdsoModules struct {
	sync.Mutex
	byImage map[string]*modules.Module
}

// attachVDSO reads the [vdso] image out of the target's memory and sets
// Module and Bias on its ExecMapping, so that its symbols
// (__vdso_clock_gettime, ...) and its .eh_frame/.sframe become visible to
// symbolisation and to the unwinder's module index. Call it on every new
// AddressSpace snapshot before building the unwinder's module index;
// Refresh keeps the result for unchanged mappings. A process without a
// vDSO is not an error.
func attachVDSO(space *modules.AddressSpace, mem io.ReaderAt) error {
	for i := range space.Exec {
		em := &space.Exec[i]
		if !em.IsVDSO || em.Module != nil {
			continue
		}
		mod, bias, err := readVDSO(mem, em.Start, em.End)
		if err != nil {
			em.Err = err
			return err
		}
		em.Module, em.Bias, em.Err = mod, bias, nil
	}
	return nil
}

// readVDSO reads and parses the vDSO image mapped at [start, end).
func readVDSO(mem io.ReaderAt, start, end uint64) (*modules.Module, uint64, error) {
	if end <= start || end-start > maxVDSOSize {
		return nil, 0, fmt.Errorf("vdso: mapping %#x-%#x is not a plausible vDSO", start, end)
	}
	img := make([]byte, end-start)
	n, err := mem.ReadAt(img, int64(start))
	if n < len(img) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, fmt.Errorf("vdso: reading %#x-%#x: %w", start, end, err)
	}
	vdsoModules.Lock()
	defer vdsoModules.Unlock()
	mod, ok := vdsoModules.byImage[string(img)]
	if !ok {
		mod, err = modules.ModuleFromImage("[vdso]", img)
		if err != nil {
			return nil, 0, fmt.Errorf("vdso: %w", err)
		}
		if vdsoModules.byImage == nil {
			vdsoModules.byImage = map[string]*modules.Module{}
		}
		vdsoModules.byImage[string(img)] = mod
	}
	bias, err := imageBias(mod.File, start)
	if err != nil {
		return nil, 0, err
	}
	return mod, bias, nil
}

// imageBias is the load bias of an ELF image mapped whole at start: file
// offset x sits at start+x, and the PT_LOAD segment holding offset Off at
// virtual address Vaddr gives bias = start + Off - Vaddr.
func imageBias(f *elf.File, start uint64) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			return start + p.Off - p.Vaddr, nil
		}
	}
	return 0, errors.New("vdso: image has no PT_LOAD segment")
}
