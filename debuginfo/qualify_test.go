package debuginfo

import (
	"debug/elf"
	"strings"
	"testing"
)

// Inlined C++ functions without a linkage name (static templates, members
// of class templates instantiated for a lambda) get their namespaces and
// classes, as gdb prints them: demo::twice<long int>, not twice<long int>.
// A lambda's operator() stays as DWARF names it.
func TestQualifiedInlineNames(t *testing.T) {
	bin := buildCXX(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := NewLines(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, pc := range funcAddrs(t, f, "_ZN4demo3runERKSt6vectorIlSaIlEEl") {
		fr, _ := l.Frames(pc, nil)
		for _, x := range fr {
			seen[x.Function] = true
		}
	}
	has := func(prefix string) bool {
		for n := range seen {
			if strings.HasPrefix(n, prefix) {
				return true
			}
		}
		return false
	}
	for _, want := range []string{"demo::twice<long int>", "demo::Acc<long>::apply<"} {
		if !has(want) {
			t.Errorf("no inline frame named %s...; names: %v", want, seen)
		}
	}
	if has("twice<") || has("apply<") {
		t.Errorf("an unqualified name is left: %v", seen)
	}
	for _, c := range []struct {
		name string
		want bool
	}{{"a::b", true}, {"f<a::b>", false}, {"g(a::b)", false}, {"x<y>::z", true}, {"plain", false}} {
		if qualified(c.name) != c.want {
			t.Errorf("qualified(%q) = %v", c.name, !c.want)
		}
	}
}
