package sframereport

import (
	"encoding/json"
	"fmt"
	"io"
)

// Mode is the kind of output Run writes.
type Mode int

const (
	ModeSummary Mode = iota // per-file summary and coverage
	ModeRows                // readelf --sframe notation
	ModeJSON                // one JSON document (Document) for all files
)

// Outcome is the worst thing that happened across the files of one Run; the
// CLI maps it to an exit code. Later constants are worse.
type Outcome int

const (
	OutcomeOK       Outcome = iota // every file had valid SFrame data
	OutcomeNoSFrame                // some file had none
	OutcomeCorrupt                 // some file was corrupt, unreadable or not ELF
)

func (s Status) outcome() Outcome {
	switch s {
	case StatusOK:
		return OutcomeOK
	case StatusNoSFrame:
		return OutcomeNoSFrame
	}
	return OutcomeCorrupt
}

// Document is the top-level --json output.
type Document struct {
	Files []*FileReport `json:"files"`
}

// defaultTop is how many functions without an FDE the summary lists.
const defaultTop = 10

// Run inspects every path and writes the chosen output to stdout; errors go
// to stderr, each prefixed by the file name, and never stop the other
// files.
func Run(stdout, stderr io.Writer, paths []string, mode Mode) Outcome {
	worst := OutcomeOK
	doc := Document{Files: []*FileReport{}}
	for i, p := range paths {
		opt := Options{Top: defaultTop}
		if mode == ModeJSON {
			opt = Options{Functions: true, Top: -1}
		}
		rep := Inspect(p, opt)
		worst = max(worst, rep.Status.outcome())
		if rep.Status == StatusCorrupt || rep.Status == StatusUnreadable {
			fmt.Fprintf(stderr, "stacktop sframe: %s: %s\n", p, rep.Error)
		}
		switch mode {
		case ModeJSON:
			doc.Files = append(doc.Files, rep)
		case ModeRows:
			if rep.Status == StatusNoSFrame {
				fmt.Fprintf(stderr, "stacktop sframe: %s: no SFrame data\n", p)
			}
			if rep.Status != StatusOK {
				continue
			}
			if len(paths) > 1 {
				if i > 0 {
					fmt.Fprintln(stdout)
				}
				fmt.Fprintf(stdout, "File: %s\n", p)
			}
			if err := WriteRows(stdout, rep); err != nil {
				// Inspect already decoded everything, so this is a bug.
				fmt.Fprintf(stderr, "stacktop sframe: %s: %v\n", p, err)
				worst = OutcomeCorrupt
			}
		default:
			if rep.Status == StatusOK || rep.Status == StatusNoSFrame {
				WriteSummary(stdout, rep)
			}
		}
	}
	if mode == ModeJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			fmt.Fprintf(stderr, "stacktop sframe: writing JSON: %v\n", err)
			worst = OutcomeCorrupt
		}
	}
	return worst
}
