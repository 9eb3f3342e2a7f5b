//go:build linux && arm64

package ptrace

import "codeberg.org/stacktop/stacktop/regs"

// hasPAC: arm64 may have pointer authentication (NT_ARM_PAC_MASK).
const (
	hasPAC      = true
	fprsInDWARF = false
)

// convertFPRegs: the arm64 FP/SIMD registers play no part in unwinding.
func convertFPRegs(raw []byte, s *regs.Set) error { return nil }
