package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"codeberg.org/stacktop/stacktop/export"
	"codeberg.org/stacktop/stacktop/internal/idlist"
	"codeberg.org/stacktop/stacktop/internal/session"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/unwind"
)

// Shell completion is cobra's: the scripts call the hidden `stacktop
// __complete ARGS...`, which parses the line as far as it goes and asks the
// functions below for the values of the flag or argument under the cursor,
// so completion knows every flag the binary has.

// completionShells are the shells `stacktop completion` writes for.
var completionShells = []string{"bash", "zsh", "fish", "powershell"}

const completionUsage = `usage: stacktop completion bash|zsh|fish|powershell

  bash: source <(stacktop completion bash)     (or save it in bash-completion's completions directory as stacktop)
  zsh:  stacktop completion zsh > "${fpath[1]}/_stacktop"
  fish: stacktop completion fish > ~/.config/fish/completions/stacktop.fish
  powershell: stacktop completion powershell | Out-String | Invoke-Expression`

func init() {
	register(newCompletionCommand)
}

func newCompletionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "print a shell completion script",
		Long: `Completion prints the completion script of a shell: commands, flags, and
the values of flags (process IDs with their names for -p, formats, back
ends, unwinders, files for -o). Load it as follows:

` + completionUsage[strings.Index(completionUsage, "\n\n")+2:],
		ValidArgs: completionShells,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				fmt.Fprintln(os.Stderr, completionUsage)
				return exitStatus(exitUsage)
			}
			w, root := os.Stdout, cmd.Root()
			var err error
			switch args[0] {
			case "bash":
				err = root.GenBashCompletionV2(w, true)
			case "zsh":
				err = root.GenZshCompletion(w)
			case "fish":
				err = root.GenFishCompletion(w, true)
			case "powershell":
				err = root.GenPowerShellCompletionWithDesc(w)
			default:
				fmt.Fprintln(os.Stderr, completionUsage)
				return exitStatus(exitUsage)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				return exitStatus(1)
			}
			return nil
		},
	}
}

// flagValueCompletions complete the values of the flags that have a
// known set of them, on every command that has the flag.
var flagValueCompletions = map[string]cobra.CompletionFunc{
	"pid":      completeList(func(*cobra.Command, []string) []cobra.Completion { return processCompletions() }),
	"tid":      completeList(threadCompletions),
	"unwinder": completeList(func(*cobra.Command, []string) []cobra.Completion { return unwind.UnwinderNames }),
	"format": func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, f := range []export.Format{export.FormatPprof, export.FormatFolded, export.FormatSpeedscope, export.FormatSVG} {
			out = append(out, f.String())
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	},
	"backend": func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, b := range session.Backends {
			out = append(out, string(b))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	},
	// Files, as the shell completes them.
	"output": completeFiles,
	"diff":   completeFiles,
}

func completeFiles(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveDefault
}

// completeFlagValues registers cmd's flag value completions, and its
// arguments': a PID for dump, a command to start for record and top. The
// value of a flag with none (a rate, a duration, a pattern) is not
// completed at all: no file name fits it.
func completeFlagValues(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !takesValue(f) {
			return
		}
		complete, ok := flagValueCompletions[f.Name]
		if !ok {
			complete = cobra.NoFileCompletions
		}
		if err := cmd.RegisterFlagCompletionFunc(f.Name, complete); err != nil {
			panic(err) // registered twice: a programming error every run shows
		}
	})
	switch {
	case cmd.Name() == "dump":
		cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return processCompletions(), cobra.ShellCompDirectiveNoFileComp
		}
	case cmd.Annotations[annotationTakesCommand] != "":
		cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 || strings.Contains(toComplete, "/") {
				return nil, cobra.ShellCompDirectiveDefault // the command's own arguments, or a path to it
			}
			return commandCompletions(toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
}

// completeList completes the last item of a comma-separated list (-p
// 12,34 and --tid, --unwinder sframe,cfi) from the items candidates gives,
// keeping the items before it.
func completeList(candidates func(cmd *cobra.Command, args []string) []cobra.Completion) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		done := toComplete[:strings.LastIndexByte(toComplete, ',')+1]
		given := strings.Split(done, ",")
		var out []cobra.Completion
		for _, c := range candidates(cmd, args) {
			item, _, _ := strings.Cut(c, "\t")
			if slices.Contains(given, item) {
				continue
			}
			if done != "" {
				// Without the description: cobra's bash script
				// matches described values against the word by
				// their printf %q form, which escapes the comma
				// ("1\,2"), and then matches none of them.
				c = item
			}
			out = append(out, done+c)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// processCompletions are the processes of /proc, each with its name as
// the description, stacktop's own (this completion) left out.
func processCompletions() []cobra.Completion {
	entries, _ := os.ReadDir("/proc")
	var out []cobra.Completion
	for _, e := range entries {
		pid, err := idlist.ParsePID(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		out = append(out, cobra.CompletionWithDesc(e.Name(), procmaps.Comm(pid)))
	}
	return out
}

// threadCompletions are the threads of the process -p (or dump's
// argument) names, each with its name.
func threadCompletions(cmd *cobra.Command, args []string) []cobra.Completion {
	var pid int
	if f := cmd.Flags().Lookup("pid"); f != nil {
		first, _, _ := strings.Cut(f.Value.String(), ",")
		pid, _ = strconv.Atoi(first)
	}
	if pid <= 0 && len(args) > 0 {
		pid, _ = idlist.ParsePID(args[0])
	}
	if pid <= 0 {
		return nil
	}
	tids, _ := procmaps.Threads(pid)
	var out []cobra.Completion
	for _, tid := range tids {
		name := ""
		if st, err := procmaps.ReadStat(pid, tid); err == nil {
			name = st.Comm
		}
		out = append(out, cobra.CompletionWithDesc(strconv.Itoa(tid), name))
	}
	return out
}

// commandCompletions are the executables on $PATH whose names begin with
// prefix: the command record and top start.
func commandCompletions(prefix string) []cobra.Completion {
	seen := map[string]bool{}
	var out []cobra.Completion
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			name := e.Name()
			if !strings.HasPrefix(name, prefix) || seen[name] {
				continue
			}
			if info, err := os.Stat(filepath.Join(dir, name)); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
				continue
			}
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}
