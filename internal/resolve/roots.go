package resolve

import (
	"strings"

	"codeberg.org/stacktop/stacktop/profile"
)

// goRoots are the functions where a Go runtime stack begins: goroutines
// start in goexit (their entry returns into it), an M's g0 stack in mstart
// (and rt0_go for the first), a new OS thread's in clone, and mcall runs
// its function on g0 with nothing above it. Their callers, if the unwind
// tables claim any, are not frames: clone's child starts with no return
// address, mcall's function never returns. Assembly functions carry the
// ABI0 suffix in the symbol table.
var goRoots = map[string]bool{
	"runtime.goexit": true,
	"runtime.mstart": true,
	"runtime.clone":  true,
	"runtime.mcall":  true,
	"runtime.rt0_go": true,
}

// isGoRoot reports whether f is one of the Go runtime's stack roots.
func isGoRoot(f *profile.Frame) bool {
	if f.Inlined {
		return false
	}
	return goRoots[strings.TrimSuffix(f.Function, ".abi0")]
}

// endAtGoRoot makes a stack that reached a Go runtime root complete, and
// drops what the walk made of the words beyond it. Roots can sit on each
// other (a new thread's mstart is called by clone, the first one's by
// rt0_go): the stack ends at the last of a run of them. A root whose
// caller the Go stack switcher found (mcall's, on a locked goroutine's
// stack: method gostack) is not the end.
func endAtGoRoot(ts *Stack) {
	for i := range ts.Frames {
		if isGoRoot(&ts.Frames[i]) && (i+1 == len(ts.Frames) || ts.Frames[i+1].Method != "gostack") {
			for i+1 < len(ts.Frames) && isGoRoot(&ts.Frames[i+1]) {
				i++
			}
			ts.Frames = ts.Frames[:i+1]
			ts.Complete, ts.Err = true, nil
			return
		}
	}
}

// finishStack applies what only a whole symbolised stack tells: which
// frames are signal trampolines, and where a Go stack ends.
func finishStack(ts *Stack) {
	nameSignalFrames(ts.Frames)
	endAtGoRoot(ts)
}

// nameSignalFrames names the trampolines: the frames whose caller the
// unwinder restored from a kernel signal frame.
func nameSignalFrames(frames []profile.Frame) {
	for i := 0; i+1 < len(frames); i++ {
		if frames[i+1].Method == "signal" && !frames[i].Inlined {
			f := &frames[i]
			f.Function, f.Offset, f.After = profile.SignalFrame, 0, ""
		}
	}
}
