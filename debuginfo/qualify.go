package debuginfo

import (
	"debug/dwarf"
	"sort"
	"strings"
)

// C++ names without a linkage name (functions with internal linkage:
// anything in an anonymous namespace, static functions, and the members of
// classes declared there) carry only their own DW_AT_name: "step" where
// gdb prints "(anonymous namespace)::Mixer<unsigned long>::step". The
// enclosing namespaces and classes are the DIE's ancestors, which
// debug/dwarf does not link; qualify finds them by descending from the
// unit's first entry, skipping every subtree that ends before the DIE.

// maxQualifyDepth bounds the descent (DWARF trees are shallow; corrupt
// input is not).
const maxQualifyDepth = 64

// qualify returns name, the DW_AT_name of the DIE at off, prefixed with
// the names of the namespaces, classes, structures and unions around it;
// d holds the DIE and cu is the offset of its unit's entry. A DIE inside a
// function (a local class, a lambda's members: gdb's "{lambda()#1}" has
// no DWARF name) or an unnamed class keeps its plain name, as does one in
// a unit Lines does not index (d nil).
func qualify(d *dwarf.Data, cu, off dwarf.Offset, name string) string {
	if name == "" || d == nil || qualified(name) {
		return name
	}
	return qualifiedName(d, cu, off, name)
}

// unitOf is the offset of the indexed unit that holds the DIE at off: the
// last unit starting at or before it.
func (l *Lines) unitOf(off dwarf.Offset) (dwarf.Offset, bool) {
	l.unitOffsOnce.Do(func() {
		seen := map[dwarf.Offset]bool{}
		for _, u := range l.units {
			if !seen[u.cu] {
				seen[u.cu] = true
				l.unitOffs = append(l.unitOffs, u.cu)
			}
		}
		sort.Slice(l.unitOffs, func(i, j int) bool { return l.unitOffs[i] < l.unitOffs[j] })
	})
	i := sort.Search(len(l.unitOffs), func(i int) bool { return l.unitOffs[i] > off }) - 1
	if i < 0 {
		return 0, false
	}
	return l.unitOffs[i], true
}

// qualifiedName descends from the unit at cu to the DIE at off.
func qualifiedName(d *dwarf.Data, cu, off dwarf.Offset, name string) (out string) {
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

// scopeless reports whether units in the DWARF language lang (a DW_LANG_
// code) can have no namespace or class around a function: C in its
// editions, and assembly. Any other language, known or not, is descended.
func scopeless(lang int64) bool {
	switch lang {
	case 0x0001, 0x0002, 0x000c, 0x001d, 0x002c, // DW_LANG_C89, C, C99, C11, C17
		0x8001: // DW_LANG_Mips_Assembler, which GCC writes for .S files
		return true
	}
	return false
}

// qualified reports whether name has a scope outside its template
// arguments ("a::b", not "f<a::b>").
func qualified(name string) bool {
	depth := 0
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '<', '(':
			depth++
		case '>', ')':
			depth--
		case ':':
			if depth == 0 && i+1 < len(name) && name[i+1] == ':' {
				return true
			}
		}
	}
	return false
}

// gdbTypeNames spells the fundamental types of a class's template
// arguments as gdb prints them (GCC's DWARF says "long unsigned int",
// gdb "unsigned long"). Only the enclosing classes are respelled: the
// function's own DW_AT_name stays as addr2line prints it.
var gdbTypeNames = strings.NewReplacer(
	"long long unsigned int", "unsigned long long",
	"long unsigned int", "unsigned long",
	"short unsigned int", "unsigned short",
	"long long int", "long long",
	"long int", "long",
	"short int", "short",
)
