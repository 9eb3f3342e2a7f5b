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
// debug/dwarf does not link. So each unit's scopes are indexed once, at
// the first name that needs them: one walk of the unit's tree that skips
// every function body and records, for each function DIE outside
// functions, the namespaces and classes around it. A name then costs a
// map lookup. (Descending from the unit's first entry for every name, as
// this file once did, walked the unit's top-level entries once per
// function: quadratic on Go's runtime unit, 69% of a first dump's 12 s.)

// maxQualifyDepth bounds the nesting of scopes the index follows (DWARF
// trees are shallow; corrupt input is not).
const maxQualifyDepth = 64

// scopeKey names one unit: the dwarf.Data that holds it (a lazily read
// module has one per unit) and its entry's offset.
type scopeKey struct {
	d  *dwarf.Data
	cu dwarf.Offset
}

// unitScopes is a unit's index: the scope prefix ("a::b", "" at the top)
// of each function DIE that no function encloses.
type unitScopes map[dwarf.Offset]string

// qualify returns name, the DW_AT_name of the DIE at off, prefixed with
// the names of the namespaces, classes, structures and unions around it;
// d holds the DIE and cu is the offset of its unit's entry. A DIE inside a
// function (a local class, a lambda's members: gdb's "{lambda()#1}" has
// no DWARF name) or an unnamed class keeps its plain name, as does one in
// a unit Lines does not index (d nil). Called with l.decodeMu held.
func (l *Lines) qualify(d *dwarf.Data, cu, off dwarf.Offset, name string) string {
	if name == "" || d == nil || qualified(name) {
		return name
	}
	key := scopeKey{d, cu}
	idx, ok := l.scopes[key]
	if !ok {
		idx = indexScopes(d, cu)
		if l.scopes == nil {
			l.scopes = map[scopeKey]unitScopes{}
		}
		l.scopes[key] = idx
	}
	if prefix := idx[off]; prefix != "" {
		return prefix + "::" + name
	}
	return name
}

// indexScopes walks the unit at cu once (see the top of this file). A
// unit in a language without scopes (C, assembly, Go: its names carry
// their package) or one that cannot be read gets an empty index.
func indexScopes(d *dwarf.Data, cu dwarf.Offset) (idx unitScopes) {
	defer func() {
		if recover() != nil {
			idx = nil // corrupt input: plain names
		}
	}()
	r := d.Reader()
	r.Seek(cu)
	e, err := r.Next()
	if err != nil || e == nil || e.Offset != cu || !e.Children {
		return nil
	}
	if lang, ok := e.Val(dwarf.AttrLanguage).(int64); ok && scopeless(lang) {
		return nil
	}
	idx = unitScopes{}
	prefixes := []string{""} // the open scopes' prefixes, innermost last
	for len(prefixes) > 0 {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 {
			prefixes = prefixes[:len(prefixes)-1]
			continue
		}
		prefix := prefixes[len(prefixes)-1]
		if e.Tag == dwarf.TagSubprogram && prefix != "" {
			idx[e.Offset] = prefix
		}
		if !e.Children {
			continue
		}
		if scope, ok := scopeName(e); ok && len(prefixes) < maxQualifyDepth {
			if prefix != "" {
				scope = prefix + "::" + scope
			}
			prefixes = append(prefixes, scope)
			continue
		}
		// A function, an unnamed class or anything else: what it holds
		// keeps its plain name.
		r.SkipChildren()
	}
	return idx
}

// scopeName is the name a namespace, class, structure or union gives the
// names inside it, as gdb prints it; false for any other DIE and for an
// unnamed class.
func scopeName(e *dwarf.Entry) (string, bool) {
	n, _ := e.Val(dwarf.AttrName).(string)
	switch e.Tag {
	case dwarf.TagNamespace:
		if n == "" {
			n = "(anonymous namespace)"
		}
		return n, true
	case dwarf.TagClassType, dwarf.TagStructType, dwarf.TagUnionType:
		return gdbTypeNames.Replace(n), n != ""
	}
	return "", false
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

// scopeless reports whether units in the DWARF language lang (a DW_LANG_
// code) can have no namespace or class around a function: C in its
// editions, assembly, and Go. Any other language, known or not, is
// indexed.
func scopeless(lang int64) bool {
	switch lang {
	case 0x0001, 0x0002, 0x000c, 0x001d, 0x002c, // DW_LANG_C89, C, C99, C11, C17
		langGo, // names carry their package ("runtime.futex")
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
