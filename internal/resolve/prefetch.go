package resolve

import (
	"path/filepath"
	"slices"
	"strings"

	"codeberg.org/stacktop/stacktop/internal/modules"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/unwind"
)

// PrefetchLines starts loading the symbol and line tables of the modules
// frames are in, each module on goroutines of its own (as Name would on
// first use), and returns without waiting for them. A dump walks each
// thread as it samples it and names the frames only once every thread was
// sampled: prefetched, the tables load during the sampling instead of
// after it, and never hold up the walks. With NoLines, the symbols only.
func (r *Resolver) PrefetchLines(frames []unwind.Frame) {
	var last *modules.Module
	for _, f := range frames {
		em, ok := r.space.Find(f.PC)
		if !ok || em.Module == nil {
			continue
		}
		if em.Module == last {
			continue
		}
		last = em.Module
		r.syms.prefetch(r, em.Module, !r.opts.Symbols.NoLines)
	}
}

// PrefetchCommon starts loading, in the background, what nearly every
// native stack needs: the CFI, symbol and line tables of the program's
// executable and of its C library (the outermost frames of every thread:
// _start and main, or start_thread and clone). A dump calls it while it
// attaches, before it has any stack to go by, so that the first walk and
// the naming do not wait for them; a module it guessed wrong costs only
// the time to load it. Nothing is loaded twice: walks and naming use what
// it loaded, or wait for a load under way.
func (r *Resolver) PrefetchCommon() {
	dev, ino, err := procmaps.ExecutableID(r.PID)
	seen := map[*modules.Module]bool{}
	for i := range r.space.Exec {
		m := r.space.Exec[i].Module
		if m == nil || seen[m] {
			continue
		}
		seen[m] = true
		exe := err == nil && m.Key.Dev == dev && m.Key.Ino == ino
		if !exe && !isCLibrary(m.Path) {
			continue
		}
		r.syms.prefetch(r, m, !r.opts.Symbols.NoLines)
		if m.SFrame == nil && slices.Contains(r.Unwinders(), unwind.MethodCFI) {
			go m.CFI().Load()
		}
	}
}

// isCLibrary reports whether path names a C library: glibc's libc.so.6
// (or an old libc-2.NN.so), or musl's, which is also its dynamic linker.
// A guess that names another library costs only its load.
func isCLibrary(path string) bool {
	base := filepath.Base(path)
	return strings.HasPrefix(base, "libc.so") || strings.HasPrefix(base, "libc-2.") ||
		strings.HasPrefix(base, "ld-musl-") || strings.HasPrefix(base, "libc.musl-")
}
