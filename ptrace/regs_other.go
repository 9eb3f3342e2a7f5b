//go:build linux && !amd64 && !arm64 && !s390x

package ptrace

import "codeberg.org/stacktop/stacktop/regs"

// prstatus is a placeholder on architectures stacktop does not sample:
// Sample fails with ErrUnsupportedArch before it is used.
type prstatus struct{ _ [64]uint64 }

const prstatusSize = 0

func convertRegs(r *prstatus, s *regs.Set) { *s = regs.Set{} }

func syscallStop(r *prstatus) (asleep, atExit bool) { return false, false }
