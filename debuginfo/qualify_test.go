package debuginfo

import (
	"debug/dwarf"
	"debug/elf"
	"strings"
	"testing"
)

// Inlined C++ functions without a linkage name (static templates, members
// of class templates instantiated for a lambda) get their namespaces and
// classes, as gdb prints them: demo::twice<long int>, not twice<long int>.
// A lambda's operator() stays as DWARF names it.
func TestQualifiedInlineNames(t *testing.T) {
	t.Parallel()
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

// The scope index answers what a descent from the unit's entry to each
// DIE answers, for every named function DIE of the C++ test program (its
// own units and the libstdc++ templates instantiated in them), and a Go
// unit is not indexed at all.
func TestScopeIndexMatchesDescent(t *testing.T) {
	t.Parallel()
	bin := buildCXX(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	l := &Lines{}
	r := d.Reader()
	var cu dwarf.Offset
	checked, scoped := 0, 0
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit {
			cu = e.Offset
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		if e.Tag != dwarf.TagSubprogram || name == "" || qualified(name) {
			continue
		}
		got, want := l.qualify(d, cu, e.Offset, name), descendQualified(d, cu, e.Offset, name)
		if got != want {
			t.Errorf("DIE %#x %q: index %q, descent %q", e.Offset, name, got, want)
		}
		checked++
		if got != name {
			scoped++
		}
	}
	if checked < 100 || scoped < 10 {
		t.Fatalf("only %d function DIEs checked, %d of them in a scope: the test binary lacks C++ scopes", checked, scoped)
	}
	t.Logf("%d function DIEs, %d in namespaces or classes", checked, scoped)
	if !scopeless(0x0016) {
		t.Error("Go units are indexed: their names carry their package")
	}
}

// descendQualified is how qualify once found a name's scopes: a descent
// from the unit's entry to the DIE, for every name. The test's oracle.
func descendQualified(d *dwarf.Data, cu, off dwarf.Offset, name string) (out string) {
	defer func() {
		if recover() != nil {
			out = name
		}
	}()
	r := d.Reader()
	r.Seek(cu)
	e, err := r.Next()
	if err != nil || e == nil || e.Offset != cu || !e.Children {
		return name
	}
	if lang, ok := e.Val(dwarf.AttrLanguage).(int64); ok && scopeless(lang) {
		// C has no namespaces or classes: a C unit's names stand as
		// they are, and the descent (a walk over the unit's top-level
		// DIEs, for each of its functions) is skipped.
		return name
	}
	var parts []string
	for depth := 0; depth < maxQualifyDepth; depth++ {
		// Among the children of the current entry, the last one starting
		// at or before off holds it.
		var holder *dwarf.Entry
		for {
			c, err := r.Next()
			if err != nil {
				return name
			}
			if c == nil || c.Tag == 0 || c.Offset > off {
				break
			}
			if c.Offset == off {
				if len(parts) == 0 {
					return name
				}
				return strings.Join(parts, "::") + "::" + name
			}
			holder = c
			if c.Children {
				r.SkipChildren()
			}
		}
		if holder == nil || !holder.Children {
			return name
		}
		switch holder.Tag {
		case dwarf.TagNamespace:
			n, _ := holder.Val(dwarf.AttrName).(string)
			if n == "" {
				n = "(anonymous namespace)"
			}
			parts = append(parts, n)
		case dwarf.TagClassType, dwarf.TagStructType, dwarf.TagUnionType:
			n, _ := holder.Val(dwarf.AttrName).(string)
			if n == "" {
				return name
			}
			parts = append(parts, gdbTypeNames.Replace(n))
		default:
			return name // inside a function or anything else: no C++ scope
		}
		r.Seek(holder.Offset)
		if _, err := r.Next(); err != nil {
			return name
		}
	}
	return name
}
