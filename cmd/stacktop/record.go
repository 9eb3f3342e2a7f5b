package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/export"
	"codeberg.org/stacktop/stacktop/export/fleet"
	"codeberg.org/stacktop/stacktop/export/outfile"
	"codeberg.org/stacktop/stacktop/internal/backend/perfevent"
	"codeberg.org/stacktop/stacktop/internal/engine"
	"codeberg.org/stacktop/stacktop/internal/selfsched"
	"codeberg.org/stacktop/stacktop/internal/session"
	"codeberg.org/stacktop/stacktop/internal/spawn"
	"codeberg.org/stacktop/stacktop/procmaps"
	"codeberg.org/stacktop/stacktop/profile"
	"codeberg.org/stacktop/stacktop/ptrace"
)

// Exit codes of `stacktop record`, documented in docs/record.md. With
// `-- CMD` stacktop exits with CMD's status instead of exitRecordOK.
const (
	exitRecordOK      = 0                // the profile was written
	exitRecordWrite   = 1                // sampling worked but the file could not be written
	exitRecordNothing = 2                // nothing recorded: no such process, attach refused, ...
	exitRecordCmdFail = spawn.ExitFailed // -- CMD: stacktop itself failed (CMD's own codes stay 126/127)
	exitRecordRefused = 3                // --backend perf: the kernel refused the sampling event
)

func init() {
	// The helper that starts `-- CMD` is this binary (see spawn.Cmd); it
	// runs before main, so it settles package early's priority itself.
	spawn.RunHelper(func() { selfsched.Settle(false) })
	register(newRecordCommand)
}

func newRecordCommand() *cobra.Command {
	var f recordFlags
	cmd := &cobra.Command{
		Use:   "record -p PID[,PID...] [flags]",
		Short: "sample a process (or a command) into a profile file",
		Long: `Record samples the stacks of running processes (-p), or of a command it
starts for the purpose (-- CMD), until --duration ends, Ctrl-C, or the
processes exit, and writes a profile file: pprof, folded stacks,
speedscope or a flame graph SVG. A summary on stderr says what the
recording got and what it cost the target.`,
		Example: `  # 30 seconds of process 1234 into a pprof file
  stacktop record -p 1234 -d 30s -o cpu.pb.gz

  # a command from its start to its exit, as a flame graph
  stacktop record -o flame.svg -- make -j2

  # where two processes wait as well as run (wall clock), folded stacks
  stacktop record -p 1234,5678 --idle -f folded -o wall.folded`,
		Annotations: map[string]string{
			annotationMoreUsage: "stacktop record [flags] -- CMD [ARGS...]",
			annotationExitCodes: "record.md",
		},
		RunE: func(cmd *cobra.Command, args []string) error { return exitStatus(runRecord(cmd, &f, args)) },
	}
	f.addTo(cmd.Flags())
	takesCommand(cmd)
	return cmd
}

type recordFlags struct {
	samplingFlags
	outputFlags
	duration     time.Duration
	quiet        bool
	fleet        fleetFlags
	noDebuginfod bool
}

func (f *recordFlags) addTo(fs *pflag.FlagSet) {
	f.samplingFlags.addTo(fs, "record")
	fs.DurationVarP(&f.duration, "duration", "d", 0, "stop after this long (default: until Ctrl-C or the process exits)")
	setGroup(fs, groupSampling, "duration")
	f.outputFlags.addTo(fs)
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line and no summary")
	setGroup(fs, groupOutput, "quiet")
	addDebuginfodFlag(fs, &f.noDebuginfod)
	f.fleet.addTo(fs)
}

// outputFlags are the flags of a profile file written, shared by record
// and convert.
type outputFlags struct {
	output  string
	format  string
	threads bool
	lines   bool
	blocked bool
}

func (f *outputFlags) addTo(fs *pflag.FlagSet) {
	fs.StringVarP(&f.output, "output", "o", "", "output file, - for stdout (default stacktop.pb.gz, or by --format)")
	fs.StringVarP(&f.format, "format", "f", "", "pprof, folded, speedscope or svg (default: from -o's extension, else pprof)")
	fs.BoolVar(&f.threads, "threads", false, "a root frame \"NAME TID\" per thread (folded, svg, speedscope)")
	fs.BoolVar(&f.lines, "lines", false, "folded: name frames \"func (file:line)\"")
	fs.BoolVar(&f.blocked, "blocked", false, "only the time threads spent waiting (sleeping, disk wait, stopped): a wall-clock profile's off-CPU part")
	setGroup(fs, groupOutput, "output", "format", "threads", "lines", "blocked")
}

// view is what of p the output shows: with --blocked, its samples of
// threads that were waiting.
func (f *outputFlags) view(p *profile.Profile) *profile.Profile {
	if !f.blocked {
		return p
	}
	return p.OnlyStates(profile.ThreadState.Blocked)
}

// resolve picks the format and the file (chooseOutput) and checks that
// the options fit the format.
func (f *outputFlags) resolve() (export.Format, string, error) {
	format, output, err := chooseOutput(f.format, f.output)
	if err == nil && f.lines && format != export.FormatFolded {
		err = fmt.Errorf("--lines names the frames of folded output; the output is %v (pprof carries lines anyway)", format)
	}
	return format, output, err
}

func (f *outputFlags) exportOptions() export.Options {
	return export.Options{Threads: f.threads, Lines: f.lines}
}

// runRecord runs `stacktop record` with cobra's parse of the flags (f)
// and the arguments after them: the command to start, if any.
func runRecord(cmd *cobra.Command, f *recordFlags, cmdArgs []string) int {
	code, ok := f.checkArgs(cmd, cmdArgs, func() error {
		if len(f.tids) > 0 && (len(f.pids) > 1 || f.subprocs) {
			return fmt.Errorf("--tid names threads of one process: not with several -p or --subprocesses")
		}
		if f.lines && f.noLines {
			return fmt.Errorf("--lines names frames by file:line, which --no-lines does not read: give one of them")
		}
		if f.blocked && !f.idle {
			return fmt.Errorf("--blocked shows the time threads spent waiting, which only a wall-clock profile has: add --idle")
		}
		return checkDuration("duration", f.duration, maxDuration, flagGiven(cmd.Flags(), "duration"))
	})
	if !ok {
		return code
	}
	if err := f.fleet.check(); err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return exitUsage
	}
	if f.fleet.uploading() && (len(f.pids) > 1 || f.subprocs) {
		// The uploader cuts windows of one engine's growing profile.
		fmt.Fprintln(os.Stderr, "stacktop: --otlp and --pyroscope send one process's profile: not with several -p or --subprocesses")
		return exitUsage
	}
	format, output, err := f.outputFlags.resolve()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return exitUsage
	}
	if f.fleet.uploading() && f.output == "" && f.format == "" {
		output = "" // continuous uploads write no file unless asked
	}
	fail := exitRecordNothing
	if len(cmdArgs) > 0 {
		fail = exitRecordCmdFail
	}
	var out *outfile.File
	if output != "" {
		if out, err = outfile.Create(output); err != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			return fail
		}
		defer out.Abandon()
	}

	prefetchDebuginfo(f.pid, f.noDebuginfod)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	return withTracer(func(os.Signal) { cancel() }, func(tr *ptrace.Tracer) int {
		opts := f.sessionOptions()
		opts.Duration = f.duration
		if format != export.FormatSpeedscope {
			// Only speedscope draws the timeline; the other formats need
			// totals, so a long recording folds its old samples.
			opts.Timeline = time.Minute
		}
		sess, err := f.startSession(tr, cmdArgs, [3]*os.File{os.Stdin, os.Stdout, os.Stderr}, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			if perfRefused(err) && len(cmdArgs) == 0 {
				return exitRecordRefused
			}
			return spawn.FailureCode(err, fail)
		}
		defer sess.Close()
		eng, child := sess.Engine, sess.Child
		// Several processes (-p A,B, --subprocesses): one engine each,
		// and their profiles merged (see procgroup).
		group := newProcessGroup(tr, &f.samplingFlags, opts, sess)
		defer group.Close()
		for _, pid := range f.pids[min(1, len(f.pids)):] {
			if err := group.Attach(pid); err != nil {
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				group.Detach()
				if perfRefused(err) {
					return exitRecordRefused
				}
				return fail
			}
		}
		stopProgress := func() {}
		if !f.quiet && isTerminal(os.Stderr) {
			stopProgress = showProgress(os.Stderr, eng)
		}
		var up *fleet.Uploader
		if f.fleet.uploading() {
			if up, err = f.fleet.start(eng, sess.PID, cmdArgs, f.rate, os.Stderr); err != nil {
				stopProgress()
				group.Detach()
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				return fail
			}
		}
		upCtx, stopUploads := context.WithCancel(ctx)
		if up != nil {
			go up.Run(upCtx)
		}
		// A command started for the recording ends with it, as with
		// timeout(1): at the end of --duration, or a moment after the
		// signal that ended the recording.
		stopEnding := func() string { return "" }
		if child != nil {
			stopEnding = child.EndWhen(f.duration, ctx.Done())
		}
		runErrs := group.Run(ctx, f.subprocs)
		stopUploads()
		stopProgress()
		detachErr := group.Detach()

		st, nproc := group.Stats()
		prof := threadFilter(f.threadRE)(group.Profile())
		code := exitRecordOK
		for _, err := range runErrs {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
		}
		if detachErr != nil {
			fmt.Fprintln(os.Stderr, "stacktop: detaching:", detachErr)
		}
		if nproc > 1 && !f.quiet {
			fmt.Fprintf(os.Stderr, "stacktop: %d processes recorded into one profile\n", nproc)
		}
		// A command the launcher's shell could not exec (a script whose
		// interpreter is missing, a binary of another architecture: what
		// checkRunnable cannot see) ends with 126 or 127 before any exec.
		// That is a start failure, not a recording: no file.
		var status int
		var waitErr error
		waited := false
		if child != nil && st.Exited && sess.Execs() == 0 {
			status, waitErr = child.Wait()
			waited = true
			if waitErr == nil && (status == spawn.ExitNotFound || status == spawn.ExitNotExecutable) {
				stopEnding()
				fmt.Fprintf(os.Stderr, "stacktop: cannot run %s: it could not be executed (exit status %d); no profile written\n",
					procmaps.EscapeControl(cmdArgs[0]), status)
				return status
			}
		}
		xopts := f.exportOptions()
		var werr error
		if out != nil {
			werr = out.Commit(func(w io.Writer) error { return export.WriteOptions(w, f.view(prof), format, xopts) })
		}
		if werr != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", werr)
			code = exitRecordWrite
		}
		var exitMsg string
		if child != nil {
			err := waitErr
			if !waited {
				status, err = child.Wait()
			}
			ended := stopEnding()
			switch {
			case err != nil:
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				code = exitRecordCmdFail
			case ended == "duration":
				// The recording asked for this end: it succeeded.
				exitMsg = fmt.Sprintf("the command was ended at the end of --duration (%s)", describeStatus(status))
			default:
				exitMsg = describeStatus(status)
				if ended == "signal" {
					exitMsg = "the command was ended after the signal (" + exitMsg + ")"
				}
				if werr == nil {
					code = status
				}
			}
		}
		if !f.quiet {
			writeSummary(os.Stderr, st, backendInfo{sess.Backend, sess.Fallback}, f.rate, output, format, werr == nil, exitMsg)
			fmt.Fprintf(os.Stderr, "  unwinders: %s\n", strings.Join(sess.UnwinderNames(), ","))
		}
		if up != nil {
			if ust := up.Close(); !f.quiet {
				writeUploadSummary(os.Stderr, ust)
			}
		}
		return code
	})
}

// describeStatus says how a command's status (as a shell reports it) came.
func describeStatus(status int) string {
	if status > 128 && status < 128+65 {
		return fmt.Sprintf("exit status %d: %v", status, unix.SignalName(syscall.Signal(status-128)))
	}
	return fmt.Sprintf("exit status %d", status)
}

// chooseOutput resolves --format and -o: the flag wins, else the file's
// extension, else pprof; without -o the file is named after the format.
func chooseOutput(formatName, output string) (export.Format, string, error) {
	var format export.Format
	if formatName != "" {
		f, err := export.ParseFormat(formatName)
		if err != nil {
			return 0, "", err
		}
		format = f
	} else if output != "" && output != "-" {
		if f, ok := export.FormatFromPath(output); ok {
			format = f
		}
	}
	if format == 0 {
		format = export.FormatPprof
	}
	if output == "" {
		output = map[export.Format]string{
			export.FormatPprof:      "stacktop.pb.gz",
			export.FormatFolded:     "stacktop.folded",
			export.FormatSpeedscope: "stacktop.speedscope.json",
			export.FormatSVG:        "stacktop.svg",
		}[format]
	}
	return format, output, nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// showProgress redraws one status line on w four times a second until the
// returned function is called, which erases it.
func showProgress(w io.Writer, eng *engine.Engine) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-tick.C:
				fmt.Fprintf(w, "\r\033[Kstacktop: recording %s", eng.Stats())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// perfRefused tells an error of the kernel refusing the perf back end's
// event, which record and top report with their own exit code.
func perfRefused(err error) bool {
	var refused *perfevent.RefusedError
	return errors.As(err, &refused)
}

// backendInfo says which back end a recording ran on (--backend auto
// resolved) and, if auto fell back to ptrace, why.
type backendInfo struct {
	backend  session.Backend
	fallback string
}

// writeSummary prints what the recording got and what it cost the target.
func writeSummary(w io.Writer, st engine.Stats, be backendInfo, rate float64, output string, format export.Format, written bool, exitMsg string) {
	where := output
	if output == "-" {
		where = "stdout"
	}
	verdict := "written to " + where
	if !written {
		verdict = "NOT written"
	}
	if output == "" {
		verdict = "no file"
	}
	if be.backend == session.Perf {
		fmt.Fprintf(w, "stacktop: %d samples in %.2fs (perf back end: %.0f per second of a thread's CPU time asked), %s (%v)\n",
			st.Samples, st.Elapsed.Seconds(), rate, verdict, format)
	} else {
		fmt.Fprintf(w, "stacktop: %d samples in %.2fs (%.1f Hz achieved, %.0f Hz asked), %s (%v)\n",
			st.Samples, st.Elapsed.Seconds(), st.Rate, rate, verdict, format)
	}
	if be.fallback != "" {
		fmt.Fprintf(w, "  back end: ptrace (--backend auto: %s)\n", be.fallback)
	}
	switch {
	case st.Exited:
		msg := "the process exited"
		if exitMsg != "" {
			msg += ", " + exitMsg
		}
		fmt.Fprintf(w, "  %s\n", msg)
	case exitMsg != "":
		fmt.Fprintf(w, "  %s\n", exitMsg) // a command stacktop ended
	}
	if st.Wall {
		fmt.Fprintf(w, "  wall-clock profile (--idle): every thread counted at every tick\n")
	} else {
		writeOnCPUTotal(w, st, be)
	}
	if be.backend == session.Perf {
		fmt.Fprintf(w, "  thread samples: %d taken by the kernel at its timer tick (no thread stopped), %d lost (ring buffer full), %d failed\n",
			st.Samples, st.Lost, st.Failed)
	} else {
		fmt.Fprintf(w, "  thread samples: %d stopped, %d reused (idle), %d failed, %d not taken (thread exited), %d not taken (no stop before the tick's deadline); ticks missed: %d\n",
			st.Stops, st.Reused, st.Failed, st.Gone, st.NotTaken, st.MissedTicks)
		if st.Asleep > 0 {
			fmt.Fprintf(w, "  thread samples found waiting in the kernel, not counted: %d (their CPU time goes to the thread's next sample)\n", st.Asleep)
		}
		if st.LateStops > 0 {
			fmt.Fprintf(w, "  thread samples at a system call's exit beyond the thread's kernel time, counted at the wrapper's caller: %d\n", st.LateStops)
		}
		if st.Lost > 0 {
			fmt.Fprintf(w, "  samples lost (dropped by the kernel before stacktop read them): %d\n", st.Lost)
		}
		if why := shortfall(st, rate); why != "" {
			fmt.Fprintf(w, "  rate short of the asked %.0f Hz: %s\n", rate, why)
		}
	}
	trunc := 0.0
	if st.Samples > 0 {
		trunc = 100 * float64(st.Truncated) / float64(st.Samples)
	}
	fmt.Fprintf(w, "  truncated stacks: %d (%.1f%%)\n", st.Truncated, trunc)
	if st.StackMissed > 0 {
		fmt.Fprintf(w, "  stacks read partly from the live process, beyond the copy taken at the sample: %d\n", st.StackMissed)
	}
	var total int64
	names := make([]string, 0, len(st.Methods))
	for m, n := range st.Methods {
		total += n
		names = append(names, m)
	}
	sort.Slice(names, func(i, j int) bool { return st.Methods[names[i]] > st.Methods[names[j]] })
	parts := make([]string, 0, len(names))
	for _, m := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", m, 100*float64(st.Methods[m])/float64(total)))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "  frames by unwind method: %s\n", strings.Join(parts, ", "))
	}
	if p, pt := st.Pause, st.PauseTotal; be.backend != session.Perf {
		fmt.Fprintf(w, "  pause per thread sample (stop to resume): median %v, p99 %v, max %v; from interrupt: median %v, p99 %v, max %v\n",
			round(p.Median), round(p.P99), round(p.Max), round(pt.Median), round(pt.P99), round(pt.Max))
	}
	if st.LastErr != nil {
		fmt.Fprintf(w, "  last error: %v\n", st.LastErr)
	}
	for _, n := range st.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// writeOnCPUTotal says what an on-CPU profile's total is: perf's samples
// count CPU time at its clock; ptrace's count the CPU time of the threads
// they sampled, each sample taken where its thread was found running, so
// the process's CPU clock is shown beside it (what was never placed: the
// CPU of threads not found running yet).
func writeOnCPUTotal(w io.Writer, st engine.Stats, be backendInfo) {
	total := time.Duration(st.Weight) * st.Period
	if be.backend == session.Perf {
		fmt.Fprintf(w, "  on-CPU profile: a sample every %v of a thread's CPU time, %d periods = %v of CPU\n",
			round(st.Period), st.Weight, round(total))
		return
	}
	fmt.Fprintf(w, "  on-CPU profile: samples of threads found running, weighted by their CPU time, %d periods of %v = %v of CPU",
		st.Weight, round(st.Period), round(total))
	if st.ProcessCPU > 0 {
		fmt.Fprintf(w, "; the process used %v (%.0f%% placed)", round(st.ProcessCPU), 100*float64(total)/float64(st.ProcessCPU))
	}
	fmt.Fprintln(w)
}

// shortfall says why the achieved rate fell below 95% of the asked one,
// or "" if it did not.
func shortfall(st engine.Stats, rate float64) string {
	if st.Elapsed < time.Second/2 || st.Rate >= 0.95*rate {
		return ""
	}
	var why []string
	if st.MissedTicks > 0 {
		why = append(why, fmt.Sprintf("%d ticks missed: sampling took longer than the period (mean tick %v, longest %v), or stacktop waited for a CPU",
			st.MissedTicks, round(st.TickWork), round(st.TickWorkMax)))
	}
	if st.ShortTicks > 0 {
		why = append(why, fmt.Sprintf("%d ticks ended at their deadline with threads not stopped (more busy threads than CPUs, or threads in uninterruptible sleep)",
			st.ShortTicks))
	}
	if len(why) == 0 {
		why = append(why, "ticks started late (a loaded machine)")
	}
	return strings.Join(why, "; ")
}

func round(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Nanosecond)
}
