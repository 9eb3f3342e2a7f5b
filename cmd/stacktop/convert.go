package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"codeberg.org/stacktop/stacktop/export"
	"codeberg.org/stacktop/stacktop/export/outfile"
	"codeberg.org/stacktop/stacktop/profile"
)

// Exit codes of `stacktop convert`, documented in docs/convert.md.
const (
	exitConvertOK      = 0
	exitConvertBadData = 1 // an input could not be read, or the output not written
)

func init() {
	register(command{name: "convert", brief: "turn a saved profile into another format, or a differential flame graph", run: runConvert})
}

func runConvert(args []string) int {
	var f outputFlags
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	f.register(fs)
	diff := fs.String("diff", "", "draw a differential flame graph against this base profile (red: grew, blue: shrank); the output is SVG")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stacktop convert IN -o OUT [--format F] [--diff BASE]\n\nIN is a pprof file (any tool's) or folded stacks; - reads standard input.")
		fs.PrintDefaults()
		exitCodesUsage(fs, "convert.md")
	}
	// The input comes first (convert IN -o OUT); flag parses up to it.
	var in string
	if len(args) > 0 && (args[0] == "-" || len(args[0]) > 0 && args[0][0] != '-') {
		in, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return exitUsage
	}
	if in == "" && fs.NArg() == 1 {
		in = fs.Arg(0)
	} else if fs.NArg() > 0 || in == "" {
		fs.Usage()
		return exitUsage
	}
	if *diff != "" && f.format == "" && f.output == "" {
		f.format = "svg"
	}
	format, output, err := f.resolve()
	if err == nil && *diff != "" && format != export.FormatSVG {
		err = fmt.Errorf("--diff draws a flame graph: the output is %v (for pprof, use pprof -diff_base BASE)", format)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return exitUsage
	}

	p, err := readProfile(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return exitConvertBadData
	}
	if f.blocked {
		if p = f.view(p); p.Samples == 0 {
			fmt.Fprintf(os.Stderr, "stacktop: %s: no sample of a waiting thread (only record --idle labels thread states)\n", in)
			return exitConvertBadData
		}
	}
	var base *profile.Profile
	if *diff != "" {
		if base, err = readProfile(*diff); err != nil {
			fmt.Fprintln(os.Stderr, "stacktop: --diff:", err)
			return exitConvertBadData
		}
		base = f.view(base) // like against like: --blocked applies to both
	}
	out, err := outfile.Create(output)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return exitConvertBadData
	}
	defer out.Abandon()
	err = out.Commit(func(w io.Writer) error {
		if base != nil {
			return export.WriteFlameGraph(w, p, export.FlameGraphOptions{Base: base})
		}
		return export.WriteOptions(w, p, format, f.exportOptions())
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return exitConvertBadData
	}
	return exitConvertOK
}

// readProfile reads a profile file, or standard input for "-".
func readProfile(path string) (*profile.Profile, error) {
	r := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	p, _, err := export.Read(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
