package resolve

import (
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"stacktop/procmaps"
	"stacktop/profile"
	"stacktop/symbols"
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
	path    string // "" until the first lookup
	uid     int    // the target's effective UID: the file's owner (or root)
	checked time.Time
	size    int64
	mtime   time.Time
	m       *symbols.PerfMap
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
	if !p.checked.IsZero() && now.Sub(p.checked) < perfMapRecheck {
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
		p.path = procmaps.RootDir(p.pid) + "/tmp/perf-" + strconv.Itoa(ns) + ".map"
		p.uid = st.UIDs[1] // effective: the user the JIT writes the file as
	}
	// The map lives in a world-writable directory and stacktop runs as
	// root: no symlinks, no FIFO to block on, and only a regular file
	// owned by the target's user (or root), as perf requires.
	fd, err := unix.Open(p.path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), p.path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || (st.Uid != 0 && int(st.Uid) != p.uid) {
		return false
	}
	if p.m != nil && fi.Size() == p.size && fi.ModTime().Equal(p.mtime) {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPerfMapSize))
	if err != nil {
		return false
	}
	// A bad line costs only itself (ParsePerfMap keeps the others).
	m, _ := symbols.ParsePerfMap(data)
	p.m, p.size, p.mtime = m, fi.Size(), fi.ModTime()
	return true
}
