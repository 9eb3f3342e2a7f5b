package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// The command tree (cobra) and how it speaks: help that reads like
// kubectl's (usage lines, examples, flags in groups, the page of docs/ with
// the exit codes), and usage errors as one "stacktop:" line per problem and
// the usage lines, exit code exitUsage. Help goes to stderr, where the
// flag-package CLI printed it; --version, dump's stacks and completion
// scripts go to stdout.

// commandFactories is filled by each subcommand's file in its init
// function, so adding a subcommand touches only its own file.
var commandFactories []func() *cobra.Command

func register(newCommand func() *cobra.Command) {
	commandFactories = append(commandFactories, newCommand)
}

// Annotations of a command that its help shows.
const (
	// annotationMoreUsage holds usage lines after the first (Use's), one
	// per line: record -p PID, and record -- CMD.
	annotationMoreUsage = "stacktop/usage"
	// annotationExitCodes names the page of docs/ that lists the exit codes.
	annotationExitCodes = "stacktop/exit-codes"
	// annotationTakesCommand marks a command whose arguments are a command
	// to start (takesCommand).
	annotationTakesCommand = "stacktop/takes-command"
)

// newRootCommand builds the command tree: the root, which only answers
// --version and lists the subcommands, and every registered subcommand.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "stacktop COMMAND [flags]",
		Short: "sample the stacks of running Linux processes",
		Long: `stacktop samples the stacks of running Linux processes: once (dump), into
a profile file (record), or live in the terminal (top). Exit codes are
documented per command in docs/*.md; 64 is always a usage error.`,
		Example: `  stacktop dump 1234
  stacktop record -p 1234 -d 30s -o cpu.pb.gz
  stacktop top -p 1234`,
		// Subcommands are looked up by cobra; anything else in the root's
		// place is a command that does not exist.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			err := fmt.Sprintf("unknown command %q", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				err += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
			}
			return fmt.Errorf("%s", err)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if v, _ := cmd.Flags().GetBool("version"); v {
				fmt.Println(versionString())
				return nil
			}
			writeHelp(os.Stderr, cmd)
			return exitStatus(exitUsage)
		},
		SilenceErrors: true, // execute reports them, with the usage lines
		SilenceUsage:  true,
		// "recrod" is one letter swap away (two edits) from record.
		SuggestionsMinimumDistance: 2,
	}
	root.Flags().Bool("version", false, "print the version and VCS revision stacktop was built from")
	root.CompletionOptions.DisableDefaultCmd = true // completion.go's instead
	// Help to stderr, as before; cobra's own output (the completions of
	// __complete) to stdout, where the shell scripts read it.
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { writeHelp(cmd.ErrOrStderr(), cmd) })
	root.SetUsageFunc(func(cmd *cobra.Command) error { writeUsage(cmd.ErrOrStderr(), cmd); return nil })
	// A value pflag refuses is a usage error like any other: execute
	// reports it.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	for _, newCommand := range commandFactories {
		root.AddCommand(newCommand())
	}
	for _, cmd := range append(root.Commands(), root) {
		cmd.Flags().SortFlags = false // help lists flags in the order they are defined
		cmd.DisableAutoGenTag = true  // no generation date in the man pages: they are checked in
		completeFlagValues(cmd)
	}
	return root
}

// execute runs the command line and returns the exit code: the command's,
// or exitUsage for a usage error (which it reports).
func execute(root *cobra.Command, args []string) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if code, ok := err.(exitCode); ok {
		return int(code)
	}
	return reportUsage(cmd, err)
}

// exitCode carries a command's exit code through cobra's Execute, which
// knows only errors.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// exitStatus is a RunE's result for a command that ended with code.
func exitStatus(code int) error {
	if code == 0 {
		return nil
	}
	return exitCode(code)
}

// takesCommand makes cmd's arguments a command to start, as for timeout(1)
// or perf record: flags end at the first argument that is not one (or at
// --), so the command's own flags are left to it.
func takesCommand(cmd *cobra.Command) {
	cmd.Flags().SetInterspersed(false)
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationTakesCommand] = "true"
}

// The headings help sorts flags under, in this order; flags of none come
// last, under "Flags" (or "Other flags" after groups).
const (
	groupTarget   = "Target"
	groupSampling = "Sampling"
	groupView     = "View"
	groupStacks   = "Stacks and symbols"
	groupOutput   = "Output"
	groupUpload   = "Continuous upload"
)

var groupOrder = []string{groupTarget, groupSampling, groupView, groupStacks, groupOutput, groupUpload}

const annotationGroup = "stacktop/group"

// setGroup files the named flags, defined on fs, under a heading of help.
func setGroup(fs *pflag.FlagSet, group string, names ...string) {
	for _, name := range names {
		if err := fs.SetAnnotation(name, annotationGroup, []string{group}); err != nil {
			panic(err) // a name misspelt here: every help shows it
		}
	}
}

// typedValue gives a flag.Value (idlist's) the Type method of a
// pflag.Value: the kind of value help shows when the usage names none.
type typedValue struct {
	value interface {
		String() string
		Set(string) error
	}
	typ string
}

func (v typedValue) String() string     { return v.value.String() }
func (v typedValue) Set(s string) error { return v.value.Set(s) }
func (v typedValue) Type() string       { return v.typ }

// funcValue is a flag whose every value is handed to set, named typ in
// help (pflag's Func flags are all "value").
type funcValue struct {
	typ string
	set func(string) error
}

func (v funcValue) String() string     { return "" }
func (v funcValue) Set(s string) error { return v.set(s) }
func (v funcValue) Type() string       { return v.typ }

// usageLines are cmd's usage: Use's line, then annotationMoreUsage's.
func usageLines(cmd *cobra.Command) []string {
	lines := []string{cmd.UseLine()}
	if more := cmd.Annotations[annotationMoreUsage]; more != "" {
		lines = append(lines, strings.Split(more, "\n")...)
	}
	return lines
}

// writeUsage is what follows a usage error: the usage lines, the
// subcommands of the root, and where the full help is.
func writeUsage(w io.Writer, cmd *cobra.Command) {
	for i, line := range usageLines(cmd) {
		prefix := "usage: "
		if i > 0 {
			prefix = "       "
		}
		fmt.Fprintln(w, prefix+line)
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintln(w, "\ncommands:")
		writeCommands(w, cmd)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Run '%s --help' for the flags and examples.\n", cmd.CommandPath())
}

func writeCommands(w io.Writer, cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			fmt.Fprintf(w, "  %-*s %s\n", cmd.NamePadding(), c.Name(), c.Short)
		}
	}
}

// writeHelp is -h, --help and `stacktop help COMMAND`.
func writeHelp(w io.Writer, cmd *cobra.Command) {
	cmd.InitDefaultHelpFlag()
	desc := cmd.Long
	if desc == "" {
		desc = cmd.Short
	}
	fmt.Fprintf(w, "%s\n\nUsage:\n", strings.TrimSpace(desc))
	for _, line := range usageLines(cmd) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintln(w, "\nCommands:")
		writeCommands(w, cmd)
	}
	if cmd.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", cmd.Example)
	}
	writeFlagGroups(w, cmd.Flags(), helpWidth())
	if doc := cmd.Annotations[annotationExitCodes]; doc != "" {
		fmt.Fprintf(w, "\nExit codes: see docs/%s (64: usage error).\n", doc)
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's flags and examples.\n", cmd.CommandPath())
	}
}

// writeFlagGroups lists fs's flags under their groups' headings (setGroup).
func writeFlagGroups(w io.Writer, fs *pflag.FlagSet, width int) {
	groups := map[string]*pflag.FlagSet{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name := ""
		if g := f.Annotations[annotationGroup]; len(g) > 0 {
			name = g[0]
		}
		if groups[name] == nil {
			groups[name] = pflag.NewFlagSet(name, pflag.ContinueOnError)
			groups[name].SortFlags = false
		}
		groups[name].AddFlag(f)
	})
	for _, name := range append(groupOrder, "") {
		set := groups[name]
		if set == nil {
			continue
		}
		heading := name + " flags"
		if name == "" {
			heading = "Flags"
			if len(groups) > 1 {
				heading = "Other flags"
			}
		}
		fmt.Fprintf(w, "\n%s:\n%s", heading, set.FlagUsagesWrapped(width))
	}
}

// helpWidth is the width help wraps flag descriptions to: the terminal's
// on stderr, else 80 columns.
func helpWidth() int {
	if ws, err := unix.IoctlGetWinsize(int(os.Stderr.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col >= 40 {
		return int(ws.Col)
	}
	return 80
}
