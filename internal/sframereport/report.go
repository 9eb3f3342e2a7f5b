package sframereport

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"

	"codeberg.org/stacktop/stacktop/sframe"
)

// Status is the outcome of inspecting one file.
type Status string

const (
	StatusOK         Status = "ok"         // the file has a valid .sframe section
	StatusNoSFrame   Status = "no_sframe"  // an ELF file without PT_GNU_SFRAME or .sframe
	StatusCorrupt    Status = "corrupt"    // the .sframe section (or the ELF around it) is malformed
	StatusUnreadable Status = "unreadable" // cannot be opened or is not an ELF file
)

// FileReport is everything the inspector found out about one file. Its JSON
// form is the documented --json schema (docs/sframe-inspector.md); a test
// keeps the two in step.
type FileReport struct {
	File      string       `json:"file"`
	Status    Status       `json:"status"`
	Error     string       `json:"error,omitempty"`
	Warnings  []string     `json:"warnings,omitempty"`
	ELF       *ELFInfo     `json:"elf,omitempty"`
	Section   *SectionInfo `json:"section,omitempty"`
	Header    *HeaderInfo  `json:"header,omitempty"`
	Stats     *Stats       `json:"stats,omitempty"`
	Coverage  *Coverage    `json:"coverage,omitempty"`
	Functions []Function   `json:"functions,omitempty"`

	// The decoded section, kept for WriteRows, and for a relocatable
	// object with PC-relative starts the function starts readelf shows.
	sec    *sframe.Section
	starts map[int]uint64
}

// ELFInfo identifies the file.
type ELFInfo struct {
	Type      string `json:"type"`       // e.g. "ET_DYN"
	Machine   string `json:"machine"`    // e.g. "EM_X86_64"
	ByteOrder string `json:"byte_order"` // "little" or "big"
}

// SectionInfo says where the .sframe data was found.
type SectionInfo struct {
	Name   string `json:"name"`
	Source string `json:"source"` // "PT_GNU_SFRAME" or "section"
	Vaddr  uint64 `json:"vaddr"`
	Size   uint64 `json:"size"`
}

// HeaderInfo is the decoded SFrame header with the names the dumper uses.
type HeaderInfo struct {
	Version          uint8    `json:"version"`
	VersionName      string   `json:"version_name"`
	Flags            uint8    `json:"flags"`
	FlagNames        []string `json:"flag_names"`
	ABI              uint8    `json:"abi"`
	ABIName          string   `json:"abi_name"`
	CFAFixedFPOffset int8     `json:"cfa_fixed_fp_offset"`
	CFAFixedRAOffset int8     `json:"cfa_fixed_ra_offset"`
	AuxHeaderLen     uint8    `json:"aux_header_len"`
	NumFDEs          uint32   `json:"num_fdes"`
	NumFREs          uint32   `json:"num_fres"`
	FRELen           uint32   `json:"fre_len"`
}

// Stats counts kinds of functions and rows, from decoding every FDE and FRE.
type Stats struct {
	Functions         int `json:"functions"`
	Rows              int `json:"rows"`
	EmptyFunctions    int `json:"empty_functions"`     // FDEs with no FRE
	ZeroSizeFunctions int `json:"zero_size_functions"` // FDEs with size 0
	PCMaskFunctions   int `json:"pcmask_functions"`
	FlexFunctions     int `json:"flex_functions"`
	SignalFunctions   int `json:"signal_functions"`
	PAuthBFunctions   int `json:"pauth_b_functions"`
	OutermostRows     int `json:"outermost_rows"`
	MangledRARows     int `json:"mangled_ra_rows"`
}

// Coverage is how much of the executable bytes FDEs describe and which
// function symbols have no FDE at all.
type Coverage struct {
	ExecSource          string      `json:"exec_source"`
	ExecRanges          []ExecRange `json:"exec_ranges"`
	ExecBytes           uint64      `json:"exec_bytes"`
	CoveredBytes        uint64      `json:"covered_bytes"`
	Percent             float64     `json:"percent"`
	CodeBytes           uint64      `json:"code_bytes"`
	CoveredCodeBytes    uint64      `json:"covered_code_bytes"`
	CodePercent         float64     `json:"code_percent"`
	FDEBytes            uint64      `json:"fde_bytes"`
	FDEBytesOutsideExec uint64      `json:"fde_bytes_outside_exec"`
	UnplacedFDEs        int         `json:"unplaced_fdes"`
	Functions           int         `json:"functions"`
	FunctionsWithFDE    int         `json:"functions_with_fde"`
	FunctionsWithoutFDE int         `json:"functions_without_fde"`
	BytesWithoutFDE     uint64      `json:"bytes_without_fde"`
	Uncovered           []Uncovered `json:"uncovered"`
}

// ExecRange is one range of executable bytes. In a relocatable object each
// range is a section and starts at 0.
type ExecRange struct {
	Name  string `json:"name"`
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
}

// Uncovered is a function symbol none of whose bytes has an FDE.
type Uncovered struct {
	Name    string `json:"name"`
	Addr    uint64 `json:"addr"`
	Size    uint64 `json:"size"`
	Section string `json:"section,omitempty"` // relocatable objects only
}

// Function is one FDE with its rows (--json only).
type Function struct {
	Index     int    `json:"index"`
	Start     uint64 `json:"start"`
	Section   string `json:"section,omitempty"` // relocatable objects: the code section
	Size      uint32 `json:"size"`
	NumFREs   uint32 `json:"num_fres"`
	FREType   uint8  `json:"fre_type"`
	PCType    string `json:"pc_type"` // "inc" or "mask"
	RepSize   uint8  `json:"rep_size"`
	FDEType   string `json:"fde_type"` // "default" or "flex"
	Signal    bool   `json:"signal"`
	PAuthKeyB bool   `json:"pauth_key_b"`
	Attr      string `json:"attr"` // readelf's attr: "", "S", "F" or "SF"
	Rows      []Row  `json:"rows"`
}

// Row is one FRE. CFA, FP and RA are absent on an outermost row.
type Row struct {
	Start     uint64 `json:"start"`
	Outermost bool   `json:"outermost"`
	MangledRA bool   `json:"mangled_ra"`
	CFA       *Rule  `json:"cfa,omitempty"`
	FP        *Rule  `json:"fp,omitempty"`
	RA        *Rule  `json:"ra,omitempty"`
	Readelf   string `json:"readelf"` // e.g. "sp+16 c-16 f" or "RA undefined"
}

// Rule is one recovery rule, as in sframe.Rule.
type Rule struct {
	Kind    string `json:"kind"` // "same", "cfa" or "reg"
	Reg     uint16 `json:"reg"`
	Offset  int64  `json:"offset"`
	Deref   bool   `json:"deref"`
	Fixed   bool   `json:"fixed"`
	Padding bool   `json:"padding"`
}

// Options select what Inspect collects.
type Options struct {
	// Functions fills FileReport.Functions with every FDE and row.
	Functions bool
	// Top is how many uncovered functions to keep, largest first; < 0 keeps all.
	Top int
}

// Inspect opens and inspects one file. It never fails: what went wrong is
// in the report's Status and Error.
func Inspect(path string, opt Options) *FileReport {
	f, err := os.Open(path)
	if err != nil {
		return &FileReport{File: path, Status: StatusUnreadable, Error: err.Error()}
	}
	defer f.Close()
	return inspectReader(path, f, opt)
}

// inspectReader inspects ELF bytes read through r; name is used in the
// report only.
func inspectReader(name string, r io.ReaderAt, opt Options) *FileReport {
	rep := &FileReport{File: name}
	ef, err := elf.NewFile(r)
	if err != nil {
		rep.Status, rep.Error = StatusUnreadable, fmt.Sprintf("not an ELF file: %v", err)
		return rep
	}
	defer ef.Close()
	rep.ELF = &ELFInfo{Type: ef.Type.String(), Machine: ef.Machine.String(), ByteOrder: "little"}
	if ef.Data == elf.ELFDATA2MSB {
		rep.ELF.ByteOrder = "big"
	}

	sec, err := sframe.FromELF(ef)
	if errors.Is(err, sframe.ErrNoSFrame) {
		rep.Status = StatusNoSFrame
		return rep
	}
	if err != nil {
		rep.Status, rep.Error = StatusCorrupt, err.Error()
		return rep
	}
	elfSec, info := sframeELFSection(ef)
	rep.Section = &info
	h := sec.Header()
	rep.Header = headerInfo(h)
	if err := rep.walk(ef, elfSec, sec, opt); err != nil {
		rep.Status, rep.Error = StatusCorrupt, err.Error()
		return rep
	}
	rep.Status = StatusOK
	rep.sec = sec
	return rep
}

// walk decodes every FDE and FRE (so a corrupt entry anywhere is reported),
// counts them, and computes coverage.
func (rep *FileReport) walk(ef *elf.File, elfSec *elf.Section, sec *sframe.Section, opt Options) error {
	h := sec.Header()
	var placed map[int]span
	if ef.Type == elf.ET_REL && elfSec != nil {
		var err error
		if placed, err = relocatedFDEs(ef, elfSec, h); err != nil {
			rep.Warnings = append(rep.Warnings, err.Error())
		}
	}
	// A relocatable object with a single code section needs no relocation
	// to place its FDEs.
	soleExec := -1
	if ef.Type == elf.ET_REL {
		if ex, _, _ := execSpans(ef); len(ex) == 1 {
			soleExec = ex[0].space
		}
	}

	if ef.Type == elf.ET_REL && elfSec != nil {
		rep.starts = objectStarts(elfSec, ef, h, placed)
	}

	st := &Stats{}
	var fdes []span
	unplaced := 0
	n := sec.NumFuncs()
	for i := range n {
		fn, err := sec.Func(i)
		if err != nil {
			return fmt.Errorf("FDE %d: %w", i, err)
		}
		rows, err := sec.Rows(fn)
		if err != nil {
			return fmt.Errorf("FDE %d (pc %#x): %w", i, fn.Start, err)
		}
		st.Functions++
		st.Rows += len(rows)
		if len(rows) == 0 {
			st.EmptyFunctions++
		}
		if fn.Size == 0 {
			st.ZeroSizeFunctions++
		}
		if fn.PCType == sframe.PCMask {
			st.PCMaskFunctions++
		}
		if fn.FDEType == sframe.FDETypeFlex {
			st.FlexFunctions++
		}
		if fn.Signal {
			st.SignalFunctions++
		}
		if fn.PAuthKeyB {
			st.PAuthBFunctions++
		}
		for _, r := range rows {
			if r.Outermost {
				st.OutermostRows++
			}
			if r.MangledRA {
				st.MangledRARows++
			}
		}

		switch {
		case ef.Type != elf.ET_REL:
			fdes = append(fdes, span{lo: fn.Start, hi: fn.Start + uint64(fn.Size)})
		case placed != nil && hasKey(placed, i):
			p := placed[i]
			fdes = append(fdes, span{space: p.space, lo: p.lo, hi: p.lo + uint64(fn.Size)})
		case soleExec >= 0:
			fdes = append(fdes, span{space: soleExec, lo: fn.Start, hi: fn.Start + uint64(fn.Size)})
		default:
			unplaced++
		}

		if start, ok := rep.starts[i]; ok {
			fn, rows = moveFunc(fn, rows, start)
		}
		if opt.Functions {
			jf := functionJSON(h, fn, rows)
			if p, ok := placed[i]; ok && p.space < len(ef.Sections) {
				jf.Section = ef.Sections[p.space].Name
			}
			rep.Functions = append(rep.Functions, jf)
		}
	}
	rep.Stats = st
	cov, warnings := computeCoverage(ef, fdes, unplaced, opt.Top)
	rep.Coverage = cov
	rep.Warnings = append(rep.Warnings, warnings...)
	return nil
}

func hasKey(m map[int]span, k int) bool { _, ok := m[k]; return ok }

// objectStarts returns the function starts readelf shows for a relocatable
// object. With PC-relative starts (V3, V2 from 2.45) readelf 2.46+ applies
// .rela.sframe and shows the function's offset in its section, S + A.
// Older sections can only be dumped correctly by the readelf of their time
// (2.40, 2.44), which shows the raw, unrelocated field (usually 0): newer
// ones apply the PC-relative relocation to a section-relative field and
// print nonsense.
func objectStarts(sec *elf.Section, f *elf.File, h sframe.Header, placed map[int]span) map[int]uint64 {
	starts := map[int]uint64{}
	if h.Flags&sframe.FlagFDEFuncStartPCRel != 0 {
		for i, p := range placed {
			starts[i] = p.lo
		}
		return starts
	}
	data, err := sec.Data()
	if err != nil {
		return nil
	}
	first := uint64(28) + uint64(h.AuxHeaderLen) + uint64(h.FDEOff)
	esz := fdeEntrySize(h.Version)
	for i := range uint64(h.NumFDEs) {
		o := first + i*esz
		if o+4 > uint64(len(data)) {
			break
		}
		starts[int(i)] = uint64(int64(int32(f.ByteOrder.Uint32(data[o:]))))
	}
	return starts
}

// moveFunc returns fn and its rows as if fn started at start: PCINC row
// starts are absolute and move with it, PCMASK ones are block offsets.
func moveFunc(fn sframe.Func, rows []sframe.Row, start uint64) (sframe.Func, []sframe.Row) {
	if fn.PCType == sframe.PCInc {
		moved := make([]sframe.Row, len(rows))
		for i, r := range rows {
			r.Start = r.Start - fn.Start + start
			moved[i] = r
		}
		rows = moved
	}
	fn.Start = start
	return fn, rows
}

// abiName is the header's ABI/arch identifier without its SFRAME_ABI_ prefix.
func abiName(a sframe.ABI) string {
	switch a {
	case sframe.ABIAArch64BigEndian:
		return "AARCH64_ENDIAN_BIG"
	case sframe.ABIAArch64LittleEndian:
		return "AARCH64_ENDIAN_LITTLE"
	case sframe.ABIAMD64LittleEndian:
		return "AMD64_ENDIAN_LITTLE"
	case sframe.ABIS390XBigEndian:
		return "S390X_ENDIAN_BIG"
	}
	return fmt.Sprintf("UNKNOWN_%d", uint8(a))
}

func headerInfo(h sframe.Header) *HeaderInfo {
	names := flagNames(h.Version, h.Flags)
	if names == nil {
		names = []string{}
	}
	return &HeaderInfo{
		Version:          h.Version,
		VersionName:      versionName(h.Version),
		Flags:            uint8(h.Flags),
		FlagNames:        names,
		ABI:              uint8(h.ABI),
		ABIName:          abiName(h.ABI),
		CFAFixedFPOffset: h.CFAFixedFPOffset,
		CFAFixedRAOffset: h.CFAFixedRAOffset,
		AuxHeaderLen:     h.AuxHeaderLen,
		NumFDEs:          h.NumFDEs,
		NumFREs:          h.NumFREs,
		FRELen:           h.FRELen,
	}
}

func functionJSON(h sframe.Header, f sframe.Func, rows []sframe.Row) Function {
	out := Function{
		Index:     f.Index,
		Start:     f.Start,
		Size:      f.Size,
		NumFREs:   f.NumFREs,
		FREType:   f.FREType,
		PCType:    "inc",
		RepSize:   f.RepSize,
		FDEType:   "default",
		Signal:    f.Signal,
		PAuthKeyB: f.PAuthKeyB,
		Attr:      funcAttr(f),
		Rows:      make([]Row, 0, len(rows)),
	}
	if f.PCType == sframe.PCMask {
		out.PCType = "mask"
	}
	if f.FDEType == sframe.FDETypeFlex {
		out.FDEType = "flex"
	}
	for _, r := range rows {
		jr := Row{Start: r.Start, Outermost: r.Outermost, MangledRA: r.MangledRA, Readelf: "RA undefined"}
		if cfa, fp, ra, ok := rowColumns(h, f, r); ok {
			jr.CFA, jr.FP, jr.RA = ruleJSON(r.CFA), ruleJSON(r.FP), ruleJSON(r.RA)
			jr.Readelf = cfa + " " + fp + " " + ra
		}
		out.Rows = append(out.Rows, jr)
	}
	return out
}

func ruleJSON(r sframe.Rule) *Rule {
	k := "same"
	switch r.Kind {
	case sframe.RuleCFA:
		k = "cfa"
	case sframe.RuleReg:
		k = "reg"
	}
	return &Rule{Kind: k, Reg: r.Reg, Offset: r.Offset, Deref: r.Deref, Fixed: r.Fixed, Padding: r.Padding}
}

// WriteRows prints the report's section in the notation of binutils 2.46
// `readelf --sframe`. It needs a report with Status ok.
func WriteRows(w io.Writer, rep *FileReport) error {
	if rep.sec == nil {
		return fmt.Errorf("%s: no decoded .sframe section (status %s)", rep.File, rep.Status)
	}
	name := ".sframe"
	if rep.Section != nil {
		name = rep.Section.Name
	}
	return writeReadelf(w, name, rep.sec, rep.starts)
}

// writeReadelf prints a decoded section the way binutils 2.46
// `readelf --sframe` does (V1 sections, which 2.46 refuses to dump, are
// printed in the same notation), with some function starts replaced (those
// of a relocatable object, see FileReport.starts).
func writeReadelf(w io.Writer, name string, sec *sframe.Section, starts map[int]uint64) error {
	h := sec.Header()
	writeHeader(w, name, h)
	fmt.Fprintf(w, "\n  Function Index :\n")
	for i := range sec.NumFuncs() {
		fn, err := sec.Func(i)
		if err != nil {
			return fmt.Errorf("FDE %d: %w", i, err)
		}
		rows, err := sec.Rows(fn)
		if err != nil {
			return fmt.Errorf("FDE %d (pc %#x): %w", i, fn.Start, err)
		}
		if start, ok := starts[i]; ok {
			fn, rows = moveFunc(fn, rows, start)
		}
		writeFunc(w, h, fn, rows)
	}
	return nil
}
