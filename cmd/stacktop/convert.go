package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

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
	register(newConvertCommand)
}

// convertFlags are convert's: the output file's, and --diff.
type convertFlags struct {
	outputFlags
	diff string
}

func newConvertCommand() *cobra.Command {
	f := &convertFlags{}
	cmd := &cobra.Command{
		Use:   "convert IN -o OUT [flags]",
		Short: "turn a saved profile into another format, or a differential flame graph",
		Long: `Convert turns a saved profile into another format without recording
again. IN is a pprof file (any tool's) or folded stacks; - reads standard
input. The output format comes from --format, else -o's extension, else
pprof.`,
		Example: `  # a flame graph of a recording
  stacktop convert cpu.pb.gz -o cpu.svg

  # what grew (red) and shrank (blue) since the base profile
  stacktop convert after.pb.gz --diff before.pb.gz -o diff.svg`,
		Annotations: map[string]string{
			annotationMoreUsage: "stacktop convert IN --diff BASE -o OUT.svg",
			annotationExitCodes: "convert.md",
		},
		RunE: func(cmd *cobra.Command, args []string) error { return exitStatus(runConvert(cmd, f, args)) },
	}
	fs := cmd.Flags()
	f.outputFlags.addTo(fs)
	fs.StringVar(&f.diff, "diff", "", "draw a differential flame graph against this base profile (red: grew, blue: shrank); the output is SVG")
	setGroup(fs, groupOutput, "diff")
	return cmd
}

// runConvert runs `stacktop convert` with cobra's parse of the flags (f)
// and the arguments: the input.
func runConvert(cmd *cobra.Command, f *convertFlags, args []string) int {
	if len(args) != 1 {
		writeUsage(os.Stderr, cmd)
		return exitUsage
	}
	in := args[0]
	if f.diff != "" && f.format == "" && f.output == "" {
		f.format = "svg"
	}
	format, output, err := f.resolve()
	if err == nil && f.diff != "" && format != export.FormatSVG {
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
	if f.diff != "" {
		if base, err = readProfile(f.diff); err != nil {
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
