package unwind

import (
	"fmt"
	"strings"

	"codeberg.org/stacktop/stacktop/regs"
)

// The user's choice of unwinders (dump/record/top --unwinder): an ordered
// subset of the methods the walker knows. Per frame the walker asks them in
// this order and the first that describes the frame answers; a frame none
// of them describes ends the walk with ErrNoUnwindInfo, whose cause names
// what was allowed. Signal trampolines recognised by their code are always
// followed: they are not an unwinding method but a frame the kernel built.

// UnwinderNames lists the names ParseUnwinders accepts, in the default
// order (fp and backchain are the stack-chain methods of different
// architectures; a default order has one of them).
var UnwinderNames = []string{"sframe", "cfi", "fp", "backchain"}

// DefaultUnwinders is the order a walk uses when Options.Unwinders is nil:
// SFrame, DWARF CFI, then frame pointers (amd64, arm64) or the back chain
// (s390x).
func DefaultUnwinders(a regs.Arch) []Method {
	if a == regs.S390X {
		return []Method{MethodSFrame, MethodCFI, MethodBackChain}
	}
	return []Method{MethodSFrame, MethodCFI, MethodFP}
}

// ParseUnwinders parses a comma-separated list of unwinder names
// ("sframe,cfi,fp"). Order matters; a name may appear once; the list may
// not be empty. Whether a name applies to the target's architecture is
// checked by CheckUnwinders once it is known.
func ParseUnwinders(s string) ([]Method, error) {
	var out []Method
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		var m Method
		switch name {
		case "sframe":
			m = MethodSFrame
		case "cfi":
			m = MethodCFI
		case "fp":
			m = MethodFP
		case "backchain":
			m = MethodBackChain
		case "":
			return nil, fmt.Errorf("empty unwinder name in %q (give some of %s, comma-separated)", s, strings.Join(UnwinderNames, ","))
		default:
			return nil, fmt.Errorf("unknown unwinder %q (known: %s)", name, strings.Join(UnwinderNames, ","))
		}
		for _, o := range out {
			if o == m {
				return nil, fmt.Errorf("unwinder %q given twice in %q", name, s)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// CheckUnwinders reports a method of the list that the architecture does
// not have: frame pointers on s390x (its ABI has no frame-pointer chain),
// the back chain elsewhere.
func CheckUnwinders(a regs.Arch, list []Method) error {
	for _, m := range list {
		switch {
		case m == MethodFP && a == regs.S390X:
			return fmt.Errorf("s390x has no frame-pointer chain: use backchain instead of fp")
		case m == MethodBackChain && a != regs.S390X:
			return fmt.Errorf("the back chain is s390x only: use fp instead of backchain on %v", a)
		}
	}
	return nil
}

// WithoutMethod returns list without m, in a new slice.
func WithoutMethod(list []Method, m Method) []Method {
	out := make([]Method, 0, len(list))
	for _, o := range list {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

// formatUnwinders is the list as ParseUnwinders reads it: "sframe,cfi,fp".
func formatUnwinders(list []Method) string {
	var b strings.Builder
	for i, m := range list {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.String())
	}
	return b.String()
}

// NotCoveredError is the cause of ErrNoUnwindInfo when the allowed
// unwinders have nothing for a frame: it says which were allowed, so a
// user who restricted them sees where that choice ends the stack.
type NotCoveredError struct {
	Allowed []Method
}

func (e *NotCoveredError) Error() string {
	if len(e.Allowed) == 0 {
		return "no unwinder allowed"
	}
	return "not covered by the allowed unwinders " + formatUnwinders(e.Allowed)
}

// walkOrder is the order of this walk: Options.Unwinders, or the default
// of the arch with the default stack-chain method being Options.Fallback's
// when one is set; NoCFI and NoFramePointer remove methods from it.
func (w *Walker) walkOrder(a regs.Arch) []Method {
	list := w.opts.Unwinders
	if list == nil {
		chain := MethodFP
		if a == regs.S390X {
			chain = MethodBackChain
		}
		if w.opts.Fallback != nil {
			chain = w.opts.Fallback.Method()
		}
		w.orderBuf = [4]Method{MethodSFrame, MethodCFI, chain}
		list = w.orderBuf[:3]
	}
	if !w.opts.NoCFI && !w.opts.NoFramePointer {
		return list
	}
	n := 0
	for _, m := range list {
		if (m == MethodCFI && w.opts.NoCFI) || ((m == MethodFP || m == MethodBackChain) && w.opts.NoFramePointer) {
			continue
		}
		if n < len(w.orderBuf) {
			w.orderBuf[n] = m
			n++
		}
	}
	return w.orderBuf[:n]
}
