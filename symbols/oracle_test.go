package symbols

import (
	"bufio"
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The oracle: binutils' view of a test binary, parsed from readelf and
// objdump output at test time so expectations are never copied by hand.

type oracleSection struct {
	addr, size uint64
	exec       bool
}

type oracleSym struct {
	table      string // ".symtab" or ".dynsym"
	value      uint64
	size       uint64
	typ, bind  string
	ndx        int // -1 for UND/ABS/COM
	name       string
	sectionEnd uint64
}

type oracle struct {
	sections map[int]oracleSection
	syms     []oracleSym
	plt      map[uint64]string // objdump -d labels "<name@plt>"
}

func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
}

func run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	needTool(t, name)
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}

var (
	sectionLine = regexp.MustCompile(`^\s*\[\s*(\d+)\]\s+\S+\s+\S+\s+([0-9a-f]{8,16})\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([A-Za-z]*)\s+\d+`)
	symtabHead  = regexp.MustCompile(`^Symbol table '([^']+)'`)
	pltLabel    = regexp.MustCompile(`^([0-9a-f]+) <(.+@plt)>:$`)
)

func loadOracle(t testing.TB, path string) *oracle {
	t.Helper()
	o := &oracle{sections: map[int]oracleSection{}, plt: map[uint64]string{}}
	sc := bufio.NewScanner(bytes.NewReader(run(t, "readelf", "-SW", path)))
	for sc.Scan() {
		m := sectionLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		idx, _ := strconv.Atoi(m[1])
		addr, _ := strconv.ParseUint(m[2], 16, 64)
		size, _ := strconv.ParseUint(m[3], 16, 64)
		o.sections[idx] = oracleSection{addr: addr, size: size, exec: strings.Contains(m[4], "X")}
	}
	if len(o.sections) == 0 {
		t.Fatalf("readelf -SW %s: no sections parsed", path)
	}

	table := ""
	sc = bufio.NewScanner(bytes.NewReader(run(t, "readelf", "-sW", path)))
	for sc.Scan() {
		line := sc.Text()
		if m := symtabHead.FindStringSubmatch(line); m != nil {
			table = m[1]
			continue
		}
		f := strings.Fields(line)
		if len(f) < 8 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		value, err := strconv.ParseUint(f[1], 16, 64)
		if err != nil {
			continue
		}
		size, err := strconv.ParseUint(f[2], 0, 64)
		if err != nil {
			t.Fatalf("readelf size %q: %v", f[2], err)
		}
		ndx, err := strconv.Atoi(f[6])
		if err != nil {
			ndx = -1
		}
		name, _, _ := strings.Cut(f[7], "@") // drop dynsym versions
		s := oracleSym{table: table, value: value, size: size, typ: f[3], bind: f[4], ndx: ndx, name: name}
		if sec, ok := o.sections[ndx]; ok {
			s.sectionEnd = sec.addr + sec.size
		}
		o.syms = append(o.syms, s)
	}

	sc = bufio.NewScanner(bytes.NewReader(run(t, "objdump", "-d", path)))
	for sc.Scan() {
		if m := pltLabel.FindStringSubmatch(sc.Text()); m != nil {
			addr, _ := strconv.ParseUint(m[1], 16, 64)
			o.plt[addr] = m[2]
		}
	}
	return o
}

// functions returns the symbols the package documents it keeps, grouped
// by address.
func (o *oracle) functions() map[uint64][]oracleSym {
	out := map[uint64][]oracleSym{}
	for _, s := range o.syms {
		sec, ok := o.sections[s.ndx]
		if !ok || !sec.exec || s.ndx == 0 || s.name == "" {
			continue
		}
		switch s.typ {
		case "FUNC", "IFUNC":
		case "NOTYPE":
			if s.size == 0 && s.bind == "LOCAL" {
				continue
			}
		default:
			continue
		}
		out[s.value] = append(out[s.value], s)
	}
	return out
}

var bindOrder = map[string]int{"GLOBAL": 0, "UNIQUE": 0, "WEAK": 1, "LOCAL": 2}
