//go:build linux && s390x

package ptrace

import (
	"encoding/binary"

	"codeberg.org/stacktop/stacktop/regs"
)

const (
	hasPAC      = false
	fprsInDWARF = true
)

// convertFPRegs reads struct s390_fp_regs { u32 fpc; u32 pad; u64 fprs[16]; }.
func convertFPRegs(raw []byte, s *regs.Set) error {
	return putS390XFPRs(raw, binary.BigEndian, s)
}
