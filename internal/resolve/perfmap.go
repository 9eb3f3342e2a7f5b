package resolve

import (
	"errors"
	"io"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/symbols"
	"codeberg.org/stacktop/stacktop/targetfile"
)

// perfMap names JIT code: the functions a runtime generated into anonymous
// executable memory, as it lists them in /tmp/perf-PID.map (see
// symbols.PerfMap). The file is the target's: read through
// /proc/PID/root (its mount namespace, so a container's /tmp) under the
// PID the target knows itself by (the last NSpid, not the host's PID).
// A runtime appends to it as it compiles, so a lookup that finds nothing
// looks at the file again, at most every perfMapRecheck, and reads it
// again when it changed. Used from the Target's goroutine only.
type perfMap struct {
	pid     int
	path    string           // "" until the first lookup: /tmp/perf-NSPID.map
	user    *targetfile.User // the target's: the file's owner (or root)
	checked time.Time
	size    int64
	mtime   unix.Timespec
	m       *symbols.PerfMap
	stuck   bool // the file did not answer within its deadline: not tried again
}

const (
	perfMapRecheck = 250 * time.Millisecond
	maxPerfMapSize = 64 << 20 // bytes read of an untrusted file
)

// name names f, a frame in anonymous executable memory, from the perf map.
func (p *perfMap) name(f *profile.Frame) {
	e, ok := p.m.Lookup(f.PC)
	if !ok && p.refresh() {
		e, ok = p.m.Lookup(f.PC)
	}
	if ok {
		f.Function, f.Offset = e.Name, f.PC-e.Start
	}
}

// refresh reads the file again if it changed since it was last read and
// the last check is old enough; it reports whether the map changed.
func (p *perfMap) refresh() bool {
	now := time.Now()
	if p.stuck || !p.checked.IsZero() && now.Sub(p.checked) < perfMapRecheck {
		return false
	}
	p.checked = now
	if p.path == "" {
		st, err := procmaps.ReadStatus(p.pid, 0)
		if err != nil {
			return false
		}
		ns := st.NSPID
		if ns == 0 {
			ns = p.pid
		}
		p.path = "/tmp/perf-" + strconv.Itoa(ns) + ".map"
		p.user = fileUser(p.pid)
	}
	// The map lives in a world-writable directory and stacktop runs as
	// root: only a regular file of the target's user (or root), as perf
	// requires, found inside the target's root, under a deadline.
	f, err := targetfile.Opener{Root: procmaps.RootDir(p.pid), Reader: p.user, NoSymlinks: true}.Open(p.path)
	if err != nil {
		p.stuck = errors.Is(err, targetfile.ErrStalled)
		return false
	}
	defer f.Close()
	if p.m != nil && f.Stat.Size == p.size && f.Stat.Mtim == p.mtime {
		return false
	}
	// Read whole, in one buffer the map keeps; past maxPerfMapSize the
	// cut line is dropped as one being written.
	data := make([]byte, min(f.Stat.Size, maxPerfMapSize))
	n, err := f.ReadAt(data, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		p.stuck = errors.Is(err, targetfile.ErrStalled)
		return false
	}
	// A bad line costs only itself (ParsePerfMap keeps the others).
	m, _ := symbols.ParsePerfMap(data[:n])
	p.m, p.size, p.mtime = m, f.Stat.Size, f.Stat.Mtim
	return true
}
