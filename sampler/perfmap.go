package sampler

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"time"

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
		p.path = "/proc/" + strconv.Itoa(p.pid) + "/root/tmp/perf-" + strconv.Itoa(nsPID(p.pid)) + ".map"
	}
	fi, err := os.Stat(p.path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if p.m != nil && fi.Size() == p.size && fi.ModTime().Equal(p.mtime) {
		return false
	}
	f, err := os.Open(p.path)
	if err != nil {
		return false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPerfMapSize))
	if err != nil {
		return false
	}
	// A bad line costs only itself (ParsePerfMap keeps the others).
	m, _ := symbols.ParsePerfMap(data)
	p.m, p.size, p.mtime = m, fi.Size(), fi.ModTime()
	return true
}

// nsPID returns the PID process pid has in its own PID namespace (the last
// field of NSpid in /proc/PID/status), or pid itself.
func nsPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return pid
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("NSpid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return pid
		}
		if n, err := strconv.Atoi(string(f[len(f)-1])); err == nil && n > 0 {
			return n
		}
		return pid
	}
	return pid
}
