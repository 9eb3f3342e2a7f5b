//go:build linux && !arm64 && !s390x

package ptrace

import "codeberg.org/stacktop/stacktop/regs"

const (
	hasPAC      = false
	fprsInDWARF = false
)

// convertFPRegs: amd64's FP registers play no part in unwinding.
func convertFPRegs(raw []byte, s *regs.Set) error { return nil }
