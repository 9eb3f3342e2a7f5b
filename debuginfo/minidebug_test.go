package debuginfo

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"codeberg.org/stacktop/stacktop/symbols"
)

// TestMiniDebugInfo builds a stripped binary carrying .gnu_debugdata the
// way Fedora does (an xz-compressed ELF with the .symtab of function
// symbols), and checks that a static function the stripped binary no
// longer names is named again through it.
func TestMiniDebugInfo(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"gcc", "objcopy", "strip", "xz", "nm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	os.WriteFile(src, []byte(`
__attribute__((noinline)) static int hidden_helper(int x) { return x * 7 + 1; }
int main(int argc, char **argv) { (void)argv; return hidden_helper(argc); }
`), 0o644)
	sh := `set -e
gcc -O2 -o p p.c
nm p --format=posix --defined-only | awk '$2 == "T" || $2 == "t" { print $1 }' | sort > funcsyms
objcopy --only-keep-debug p p.debug
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=funcsyms p.debug mini
xz -f mini
strip --strip-all p -o p.stripped
objcopy --add-section .gnu_debugdata=mini.xz p.stripped`
	cmd := exec.Command("/bin/sh", "-c", sh)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the MiniDebugInfo binary: %v\n%s", err, out)
	}
	f, err := elf.Open(filepath.Join(dir, "p.stripped"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	full, err := elf.Open(filepath.Join(dir, "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	syms, _ := full.Symbols()
	var want elf.Symbol
	for _, s := range syms {
		if s.Name == "hidden_helper" || (len(s.Name) > 13 && s.Name[:13] == "hidden_helper") {
			want = s
		}
	}
	if want.Name == "" {
		t.Fatal("the unstripped binary has no hidden_helper symbol")
	}

	stripped, err := symbols.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := stripped.Lookup(want.Value); ok && s.Name == want.Name {
		t.Fatalf("the stripped binary still names %s: the test proves nothing", want.Name)
	}
	mini, err := MiniDebugInfo(f)
	if err != nil {
		t.Fatalf("MiniDebugInfo: %v", err)
	}
	tab, err := symbols.LoadWithDebug(f, mini)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := tab.Lookup(want.Value + 1); !ok || s.Name != want.Name {
		t.Fatalf("with MiniDebugInfo, %#x is %+v (ok %v), want %s", want.Value+1, s, ok, want.Name)
	}
}
