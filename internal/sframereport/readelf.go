package sframereport

import (
	"fmt"
	"io"
	"strings"

	"codeberg.org/stacktop/stacktop/sframe"
)

// This file renders decoded SFrame data in the notation of binutils 2.46
// `readelf --sframe` (libsframe's sframe-dump.c), so the two can be compared
// line by line. The column widths are copied from that dumper; only the
// texts matter for comparison, the widths just keep diffs readable.

// spFP returns the DWARF numbers of the stack and frame pointer of an ABI,
// which the dumper prints as "sp" and "fp" (every other register as "rN").
func spFP(abi sframe.ABI) (sp, fp uint16, ok bool) {
	switch abi {
	case sframe.ABIAMD64LittleEndian:
		return 7, 6, true
	case sframe.ABIAArch64BigEndian, sframe.ABIAArch64LittleEndian:
		return 31, 29, true
	case sframe.ABIS390XBigEndian:
		return 15, 11, true
	}
	return 0, 0, false
}

func regName(abi sframe.ABI, reg uint16) string {
	if sp, fp, ok := spFP(abi); ok {
		switch reg {
		case sp:
			return "sp"
		case fp:
			return "fp"
		}
	}
	return fmt.Sprintf("r%d", reg)
}

// versionName is the dumper's name of a format version.
func versionName(v uint8) string {
	if v >= 1 && v <= 3 {
		return fmt.Sprintf("SFRAME_VERSION_%d", v)
	}
	return fmt.Sprintf("SFRAME_VERSION_%d (unknown)", v)
}

// flagNames lists the flag names the 2.46 dumper prints for a header, in its
// order; a residual unknown bit set is printed as a decimal number, as the
// dumper does. FRAME_POINTER is a name only before V3.
func flagNames(version uint8, f sframe.Flags) []string {
	var names []string
	take := func(bit sframe.Flags, name string) {
		if f&bit != 0 {
			f &^= bit
			names = append(names, name)
		}
	}
	take(sframe.FlagFDESorted, "SFRAME_F_FDE_SORTED")
	if version < 3 {
		take(sframe.FlagFramePointer, "SFRAME_F_FRAME_POINTER")
	}
	take(sframe.FlagFDEFuncStartPCRel, "SFRAME_F_FDE_FUNC_START_PCREL")
	if f != 0 {
		names = append(names, fmt.Sprintf("%d", uint8(f)))
	}
	return names
}

// funcAttr is the dumper's attr string for an FDE: "S" signal trampoline,
// "F" flexible FDE, both, or "".
func funcAttr(f sframe.Func) string {
	var b strings.Builder
	if f.Signal {
		b.WriteByte('S')
	}
	if f.FDEType == sframe.FDETypeFlex {
		b.WriteByte('F')
	}
	return b.String()
}

// rowColumns returns the CFA, FP and RA columns of one row as the dumper
// prints them, or ok=false for an "RA undefined" (outermost) row.
//
// Default and flex FDEs are printed by different code in the dumper and
// differ in small ways that are kept here: a default FDE prints a negative
// CFA offset as "sp+-8" ("%s+%d") and always prints "f" for the RA when the
// header has a fixed RA offset; a flex FDE prints "sp-8" ("%s%+d"), puts
// parentheses around dereferenced register rules only, and prints "U" for a
// padding RA word even when the header has a fixed RA offset.
func rowColumns(h sframe.Header, f sframe.Func, r sframe.Row) (cfa, fp, ra string, ok bool) {
	if r.Outermost {
		return "", "", "", false
	}
	if f.FDEType == sframe.FDETypeFlex {
		cfa = flexDisp(h.ABI, r.CFA)
		switch {
		case r.FP.Fixed, r.FP.Kind == sframe.RuleSame:
			fp = "u"
		default:
			fp = flexDisp(h.ABI, r.FP)
		}
		switch {
		case r.RA.Padding:
			ra = "U"
		case r.RA.Fixed:
			ra = "f"
		case r.RA.Kind == sframe.RuleSame:
			ra = "u"
			if h.CFAFixedRAOffset != 0 {
				ra = "f"
			}
		default:
			ra = flexDisp(h.ABI, r.RA)
		}
	} else {
		base := "?"
		if r.CFA.Kind == sframe.RuleReg {
			base = regName(h.ABI, r.CFA.Reg)
		}
		cfa = fmt.Sprintf("%s+%d", base, r.CFA.Offset)
		switch {
		case h.CFAFixedFPOffset != 0:
			fp = fmt.Sprintf("c%+d", h.CFAFixedFPOffset)
		default:
			fp = defaultDisp(r.FP)
		}
		switch {
		case h.CFAFixedRAOffset != 0:
			ra = "f"
		case r.RA.Padding:
			ra = "U"
		default:
			ra = defaultDisp(r.RA)
		}
	}
	if r.MangledRA {
		ra += "[s]"
	}
	return cfa, fp, ra, true
}

// defaultDisp prints an RA or FP rule of a default FDE: a stack slot "c-16",
// a register (s390x V2 only) "r8", or "u" when not saved.
func defaultDisp(r sframe.Rule) string {
	switch r.Kind {
	case sframe.RuleCFA:
		return fmt.Sprintf("c%+d", r.Offset)
	case sframe.RuleReg:
		return fmt.Sprintf("r%d", r.Reg)
	}
	return "u"
}

// flexDisp prints a flex FDE rule. The dumper shows the dereference only for
// register-based rules: a stack slot *(CFA-16) prints as "c-16".
func flexDisp(abi sframe.ABI, r sframe.Rule) string {
	switch r.Kind {
	case sframe.RuleReg:
		s := fmt.Sprintf("%s%+d", regName(abi, r.Reg), r.Offset)
		if r.Deref {
			s = "(" + s + ")"
		}
		return s
	case sframe.RuleCFA:
		return fmt.Sprintf("c%+d", r.Offset)
	}
	return "u"
}

// writeHeader prints the "Contents of..." line and the header block.
func writeHeader(w io.Writer, section string, h sframe.Header) {
	fmt.Fprintf(w, "Contents of the SFrame section %s:\n", section)
	fmt.Fprintf(w, "  Header :\n\n")
	fmt.Fprintf(w, "    Version: %s\n", versionName(h.Version))
	names := flagNames(h.Version, h.Flags)
	if len(names) == 0 {
		fmt.Fprintf(w, "%11sNONE\n", "Flags: ")
	}
	prefix := "Flags: "
	for i, n := range names {
		sep := ","
		if i == len(names)-1 {
			sep = ""
		}
		fmt.Fprintf(w, "%11s%s%s\n", prefix, n, sep)
		prefix = " "
	}
	if h.CFAFixedFPOffset != 0 {
		fmt.Fprintf(w, "    CFA fixed FP offset: %d\n", h.CFAFixedFPOffset)
	}
	if h.CFAFixedRAOffset != 0 {
		fmt.Fprintf(w, "    CFA fixed RA offset: %d\n", h.CFAFixedRAOffset)
	}
	fmt.Fprintf(w, "    Num FDEs: %d\n", h.NumFDEs)
	fmt.Fprintf(w, "    Num FREs: %d\n", h.NumFREs)
}

// writeFunc prints one "func idx" block: its title, the column header and
// one line per row.
func writeFunc(w io.Writer, h sframe.Header, f sframe.Func, rows []sframe.Row) {
	fmt.Fprintf(w, "\n    func idx [%d]: pc = %#x, size = %d bytes", f.Index, f.Start, f.Size)
	if a := funcAttr(f); a != "" {
		fmt.Fprintf(w, ", attr = %q", a)
	}
	if (h.ABI == sframe.ABIAArch64BigEndian || h.ABI == sframe.ABIAArch64LittleEndian) && f.PAuthKeyB {
		fmt.Fprint(w, ", pauth = B key")
	}
	marker := "   "
	if f.PCType == sframe.PCMask {
		marker = "[m]"
	}
	fmt.Fprintf(w, "\n    %-7s%-8s %-10s%-10s%-13s", "STARTPC", marker, "CFA", "FP", "RA")
	for _, r := range rows {
		fmt.Fprintf(w, "\n    %016x", r.Start)
		cfa, fp, ra, ok := rowColumns(h, f, r)
		if !ok {
			fmt.Fprint(w, "  RA undefined")
			continue
		}
		if !r.MangledRA {
			ra += "   "
		}
		fmt.Fprintf(w, "  %-10s%-10s%-13s", cfa, fp, ra)
	}
	fmt.Fprintln(w)
}
