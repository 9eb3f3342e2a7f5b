package symbols

import (
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// demangleOptions choose what gdb prints for a minimal symbol and c++filt
// prints by default: the full C++ signature with parameter types and
// clone suffixes ("ns::f(int) [clone .cold]"), since overloads are
// otherwise indistinguishable in a profile. Rust names come out as
// rustfilt prints them: legacy names without the "::h<hash>" suffix and v0
// names without crate disambiguators. The length cap keeps a hostile
// template name from exploding into megabytes; past it the raw name is
// kept.
var demangleOptions = []demangle.Option{demangle.MaxLength(16)} // 64 KiB

// Demangle returns the human-readable form of an Itanium C++ ("_Z…") or
// Rust (legacy "_ZN…17h<hash>E", v0 "_R…") symbol name. Anything else,
// including names that fail to demangle, is returned unchanged: Demangle
// never fails.
func Demangle(raw string) (name string) {
	if !strings.HasPrefix(raw, "_Z") && !strings.HasPrefix(raw, "_R") {
		return raw // C, assembly, Go: nothing to do, and no allocation
	}
	defer func() {
		if recover() != nil {
			name = raw
		}
	}()
	return demangle.Filter(raw, demangleOptions...)
}
