package symbols

import "testing"

func TestDescribe(t *testing.T) {
	main := Symbol{Name: "main", Raw: "main", Start: 0x1140, Size: 0x40}
	for _, tc := range []struct {
		sym    Symbol
		ok     bool
		vaddr  uint64
		module string
		want   string
	}{
		{main, true, 0x1140, "/usr/bin/prog", "main+0x0"},
		{main, true, 0x117f, "/usr/bin/prog", "main+0x3f"},
		// A symbol that does not cover the address is not trusted.
		{main, true, 0x1180, "/usr/bin/prog", "prog+0x1180"},
		{Symbol{}, false, 0x2a1ca, "/usr/lib/libc.so.6", "libc.so.6+0x2a1ca"},
		{Symbol{}, false, 0x10, "", "??+0x10"},
		{Symbol{}, false, 0x10, "[vdso]", "[vdso]+0x10"},
	} {
		if got := FormatFrame(tc.sym, tc.ok, tc.vaddr, tc.module); got != tc.want {
			t.Errorf("FormatFrame(%v, %v, %#x, %q) = %q, want %q", tc.sym, tc.ok, tc.vaddr, tc.module, got, tc.want)
		}
	}
	if got := ModuleOffsetName("/a/b/libfoo.so", 0xdead); got != "libfoo.so+0xdead" {
		t.Errorf("ModuleOffsetName = %q", got)
	}
}

// TestDescribeOverTable: every address of the test binary's .text gets a
// name, a symbol's or the module's, never an empty one.
func TestDescribeOverTable(t *testing.T) {
	tab := loadTestTable(t, "cprog-stripped")
	for a := uint64(0x1000); a < 0x1300; a++ {
		sym, ok := tab.Lookup(a)
		fn, off := Describe(sym, ok, a, "testdata/cprog-stripped")
		if fn == "" {
			t.Fatalf("%#x: empty name", a)
		}
		if !ok && (fn != "cprog-stripped" || off != a) {
			t.Errorf("%#x: unnamed address described as %s+%#x", a, fn, off)
		}
	}
}
