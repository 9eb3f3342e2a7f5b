package sframereport

import (
	"fmt"
	"io"
	"strings"
)

// WriteSummary prints the default, human-oriented report of one file: what
// the section is, how much executable code it covers, and the largest
// functions without an FDE.
func WriteSummary(w io.Writer, rep *FileReport) {
	switch rep.Status {
	case StatusNoSFrame:
		fmt.Fprintf(w, "%s: no SFrame data (no PT_GNU_SFRAME segment, no .sframe section)\n", rep.File)
		return
	case StatusCorrupt, StatusUnreadable:
		fmt.Fprintf(w, "%s: %s: %s\n", rep.File, rep.Status, rep.Error)
		return
	}
	h, s := rep.Header, rep.Section
	flags := strings.Join(h.FlagNames, "|")
	if flags == "" {
		flags = "NONE"
	}
	fmt.Fprintf(w, "%s: SFrame version %d, flags %s, ABI %s", rep.File, h.Version, flags, h.ABIName)
	if rep.ELF != nil {
		fmt.Fprintf(w, " (%s %s)", rep.ELF.Type, rep.ELF.Machine)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  section %s from %s at %#x, %d bytes", s.Name, s.Source, s.Vaddr, s.Size)
	if h.CFAFixedRAOffset != 0 {
		fmt.Fprintf(w, "; CFA fixed RA offset %d", h.CFAFixedRAOffset)
	}
	if h.CFAFixedFPOffset != 0 {
		fmt.Fprintf(w, "; CFA fixed FP offset %d", h.CFAFixedFPOffset)
	}
	fmt.Fprintln(w)
	if st := rep.Stats; st != nil {
		fmt.Fprintf(w, "  FDEs %d, FREs %d", h.NumFDEs, h.NumFREs)
		var extra []string
		for _, x := range []struct {
			n    int
			what string
		}{
			{st.PCMaskFunctions, "PC-mask"}, {st.FlexFunctions, "flex"}, {st.SignalFunctions, "signal"},
			{st.PAuthBFunctions, "PAuth B-key"}, {st.EmptyFunctions, "without rows"},
			{st.ZeroSizeFunctions, "of size 0"}, {st.OutermostRows, "outermost rows"},
			{st.MangledRARows, "rows with signed RA"},
		} {
			if x.n > 0 {
				extra = append(extra, fmt.Sprintf("%d %s", x.n, x.what))
			}
		}
		if len(extra) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(extra, ", "))
		}
		fmt.Fprintln(w)
	}
	if h.Version != 3 {
		fmt.Fprintf(w, "  note: the Linux kernel's SFrame unwinder accepts only version 3\n")
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
	c := rep.Coverage
	if c == nil {
		return
	}
	fmt.Fprintf(w, "  coverage: %d of %d executable bytes (%.1f%%) in %s", c.CoveredBytes, c.ExecBytes, c.Percent, c.ExecSource)
	if c.FDEBytesOutsideExec > 0 {
		fmt.Fprintf(w, "; %d FDE bytes outside them", c.FDEBytesOutsideExec)
	}
	if c.UnplacedFDEs > 0 {
		fmt.Fprintf(w, "; %d FDEs not placed (no relocation)", c.UnplacedFDEs)
	}
	fmt.Fprintln(w)
	if c.CodeBytes > 0 && c.CodeBytes != c.ExecBytes {
		fmt.Fprintf(w, "  code sections: %d of %d bytes (%.1f%%) in SHF_EXECINSTR sections\n", c.CoveredCodeBytes, c.CodeBytes, c.CodePercent)
	}
	switch {
	case c.Functions == 0:
		fmt.Fprintf(w, "  functions: no sized function symbols (stripped?); only byte coverage is known\n")
	case c.FunctionsWithoutFDE == 0:
		fmt.Fprintf(w, "  functions: every function symbol (%d) has an FDE: SFrame-ready\n", c.Functions)
	default:
		fmt.Fprintf(w, "  functions: %d function symbols, %d with an FDE, %d without (%d bytes): unwinding there needs another method\n",
			c.Functions, c.FunctionsWithFDE, c.FunctionsWithoutFDE, c.BytesWithoutFDE)
		fmt.Fprintf(w, "  largest functions without an FDE:\n")
		for _, u := range c.Uncovered {
			where := fmt.Sprintf("%#x", u.Addr)
			if u.Section != "" {
				where = u.Section + "+" + where
			}
			fmt.Fprintf(w, "    %8d  %-20s %s\n", u.Size, where, u.Name)
		}
		if more := c.FunctionsWithoutFDE - len(c.Uncovered); more > 0 {
			fmt.Fprintf(w, "    ... and %d more\n", more)
		}
	}
}
