package symbols

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cxxfilt demangles names with binutils' c++filt, one per line.
func cxxfilt(t testing.TB, names []string) []string {
	t.Helper()
	needTool(t, "c++filt")
	cmd := exec.Command("c++filt")
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("c++filt: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(names) {
		t.Fatalf("c++filt returned %d lines for %d names", len(lines), len(names))
	}
	return lines
}

func TestDemangleNeverFails(t *testing.T) {
	for _, raw := range []string{
		"", "main", "_Z", "_Zgarbage", "_ZN3foo", "_R", "_RNv", "_ZN3foo17h0123E",
		"__libc_start_main", "runtime.main", "puts@plt", "_ZZ",
		strings.Repeat("_Z", 1000),
	} {
		if got := Demangle(raw); got != raw {
			t.Errorf("Demangle(%q) = %q; a name that is not valid mangling must stay raw", raw, got)
		}
	}
}

func TestDemangleCxxMatchesCxxfilt(t *testing.T) {
	// Shapes a profile meets: nested names, templates, operators,
	// lambdas, ABI tags, clones, const methods, std:: abbreviations.
	raws := []string{
		"_ZN3foo3barEi",
		"_ZNK5outer5inner6Widget5scaleEi",
		"_ZZ4mainENKUliE_clEi",
		"_ZN5outer5inner5twiceIiEET_S2_",
		"_ZNSt6vectorIiSaIiEE9push_backERKi",
		"_ZN3foo3barEi.cold",
		"_ZN3foo3barEi.constprop.0.isra.0",
		"_ZN5outer5innerB5cxx11Ev",
		"_ZdlPvm",
		"_ZNSt8ios_base4InitC1Ev",
		"_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4sizeEv",
		"_ZN9__gnu_cxx13new_allocatorIcED2Ev",
	}
	want := cxxfilt(t, raws)
	for i, raw := range raws {
		if got := Demangle(raw); got != want[i] {
			t.Errorf("Demangle(%q) = %q, c++filt %q", raw, got, want[i])
		}
	}
}

// rustfiltStyle turns c++filt's Rust output into rustfilt's default: no
// legacy "::h<hash>" suffix, no v0 crate disambiguators "[1a2b]".
var (
	legacyHash    = regexp.MustCompile(`::h[0-9a-f]{16}$`)
	disambiguator = regexp.MustCompile(`\[[0-9a-f]+\]`)
)

func TestDemangleRustLiteral(t *testing.T) {
	// From the v0 mangling RFC (2603) and a legacy name of the usual shape.
	for raw, want := range map[string]string{
		"_RNvCs1234_7mycrate3foo":                         "mycrate::foo",
		"_RNvNtCs1234_7mycrate3bar3baz":                   "mycrate::bar::baz",
		"_ZN7mycrate3foo17h1a2b3c4d5e6f7a8bE":             "mycrate::foo",
		"_ZN4core3ptr13drop_in_place17h9f8e7d6c5b4a3921E": "core::ptr::drop_in_place",
	} {
		if got := Demangle(raw); got != want {
			t.Errorf("Demangle(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestDemangleRustMatchesCxxfilt compiles a small crate with both manglings
// (when rustc is installed) and compares every symbol with c++filt,
// adjusted to rustfilt's default style.
func TestDemangleRustMatchesCxxfilt(t *testing.T) {
	needTool(t, "rustc")
	needTool(t, "c++filt")
	src := filepath.Join(t.TempDir(), "lib.rs")
	code := `
pub struct Meters(pub u64);
impl Meters { #[inline(never)] pub fn double(&self) -> u64 { self.0 * 2 } }
pub trait Speak { fn speak(&self) -> usize; }
impl Speak for Meters { #[inline(never)] fn speak(&self) -> usize { self.0 as usize } }
#[inline(never)] pub fn generic<T: Speak>(t: &T) -> usize { t.speak() + 1 }
pub mod inner { #[inline(never)] pub fn closure_user(v: &[u64]) -> u64 { v.iter().map(|x| x * 3).sum() } }
pub fn entry(m: &Meters) -> usize { generic(m) + inner::closure_user(&[m.0]) as usize + m.double() as usize }
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mangling := range []string{"legacy", "v0"} {
		t.Run(mangling, func(t *testing.T) {
			obj := filepath.Join(t.TempDir(), "lib.o")
			args := []string{"--crate-type=lib", "--emit=obj", "-O", "-C", "codegen-units=1", "-o", obj, src}
			if mangling == "v0" {
				// Legacy is stable rustc's default; asking for it by name
				// needs -Z unstable-options.
				args = append(args, "-C", "symbol-mangling-version=v0")
			}
			cmd := exec.Command("rustc", args...)
			if out, err := cmd.CombinedOutput(); err != nil {
				// v0 needs a recent rustc; legacy must always work.
				if mangling == "v0" {
					t.Skipf("rustc cannot emit v0 names: %v\n%s", err, out)
				}
				t.Fatalf("rustc: %v\n%s", err, out)
			}
			f, err := elf.Open(obj)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			syms, err := f.Symbols()
			if err != nil {
				t.Fatal(err)
			}
			prefix := "_ZN"
			if mangling == "v0" {
				prefix = "_R"
			}
			var raws []string
			for _, s := range syms {
				if strings.HasPrefix(s.Name, prefix) {
					raws = append(raws, s.Name)
				}
			}
			if len(raws) < 3 {
				t.Fatalf("only %d %s names in the object", len(raws), mangling)
			}
			want := cxxfilt(t, raws)
			for i, raw := range raws {
				w := disambiguator.ReplaceAllString(legacyHash.ReplaceAllString(want[i], ""), "")
				if got := Demangle(raw); got != w {
					t.Errorf("Demangle(%q) = %q, c++filt (rustfilt style) %q", raw, got, w)
				}
			}
		})
	}
}
