package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"stacktop/export"
	"stacktop/fleet"
	"stacktop/procmaps"
	"stacktop/ptrace"
	"stacktop/sampler"
)

// Exit codes of `stacktop record`, documented in docs/record.md. With
// `-- CMD` stacktop exits with CMD's status instead of exitRecordOK.
const (
	exitRecordOK      = 0   // the profile was written
	exitRecordWrite   = 1   // sampling worked but the file could not be written
	exitRecordNothing = 2   // nothing recorded: no such process, attach refused, ...
	exitRecordCmdFail = 125 // -- CMD: stacktop itself failed (CMD's own codes stay 126/127)
)

// spawnEnv marks the helper process of `record -- CMD` (see startCommand).
const spawnEnv = "STACKTOP_RECORD_SPAWN"

func init() {
	if os.Getenv(spawnEnv) == "1" {
		os.Exit(spawnHelper(os.Args[1:]))
	}
	register(command{name: "record", brief: "sample a process (or a command) into a profile file", run: runRecord})
}

type recordFlags struct {
	samplingFlags
	duration time.Duration
	output   string
	format   string
	quiet    bool
	threads  bool
	lines    bool
	fleet    fleetFlags
}

func runRecord(args []string) int {
	var f recordFlags
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	f.register(fs, "record")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until Ctrl-C or the process exits)")
	fs.StringVar(&f.output, "o", "", "output file, - for stdout (default stacktop.pb.gz, or by --format)")
	fs.StringVar(&f.format, "format", "", "pprof, folded, speedscope or svg (default: from -o's extension, else pprof)")
	fs.BoolVar(&f.quiet, "q", false, "no progress line and no summary")
	fs.BoolVar(&f.threads, "threads", false, "a root frame \"NAME TID\" per thread (folded, svg, speedscope)")
	fs.BoolVar(&f.lines, "lines", false, "folded: name frames \"func (file:line)\"")
	f.fleet.register(fs)
	noDebuginfod := registerDebuginfod(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: stacktop record -p PID[,PID...] [flags]\n       stacktop record [flags] -- CMD [ARGS...]")
		fs.PrintDefaults()
	}
	cmdArgs, code, ok := f.parse(fs, args, func() error {
		if f.tidList != "" && (len(f.pids) > 1 || f.subprocs) {
			return fmt.Errorf("--tid names threads of one process: not with several -p or --subprocesses")
		}
		return checkDuration("duration", f.duration, maxDuration, flagGiven(fs, "duration"))
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
	format, output, err := chooseOutput(f.format, f.output)
	if err == nil && f.lines && format != export.FormatFolded {
		err = fmt.Errorf("--lines names the frames of folded output; the output is %v (pprof carries lines anyway)", format)
	}
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
	var out *outputFile
	if output != "" {
		if out, err = createOutput(output); err != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			return fail
		}
		defer out.abandon()
	}

	prefetchDebuginfo(f.pid, *noDebuginfod)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	return withTracer(func(os.Signal) { cancel() }, func(tr *ptrace.Tracer) int {
		opts := f.engineOptions()
		opts.Duration = f.duration
		if format != export.FormatSpeedscope {
			// Only speedscope draws the timeline; the other formats need
			// totals, so a long recording folds its old samples.
			opts.Timeline = time.Minute
		}
		sess, err := f.startSession(tr, cmdArgs, [3]*os.File{os.Stdin, os.Stdout, os.Stderr}, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", err)
			return startFailureCode(err, fail)
		}
		defer sess.close()
		eng, child := sess.engine, sess.child
		// Several processes (-p A,B, --subprocesses): one engine each,
		// and their profiles merged (see processGroup).
		group := newProcessGroup(tr, &f.samplingFlags, opts, sess)
		defer group.close()
		for _, pid := range f.pids[min(1, len(f.pids)):] {
			if _, err := group.attach(pid); err != nil {
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				group.closeTargets()
				return fail
			}
		}
		stopProgress := func() {}
		if !f.quiet && isTerminal(os.Stderr) {
			stopProgress = showProgress(os.Stderr, eng)
		}
		var up *fleet.Uploader
		if f.fleet.uploading() {
			if up, err = f.fleet.start(eng, sess.target.PID, cmdArgs, f.rate, os.Stderr); err != nil {
				stopProgress()
				group.closeTargets()
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				return fail
			}
		}
		upCtx, stopUploads := context.WithCancel(ctx)
		if up != nil {
			go up.Run(upCtx)
		}
		runErrs := group.run(ctx, f.subprocs)
		stopUploads()
		stopProgress()
		detachErr := group.closeTargets()

		st, nproc := group.stats()
		prof := threadFilter(f.threadRE)(group.profile())
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
		if child != nil && st.Exited && sess.target.Process().Execs() == 0 {
			status, waitErr = child.wait()
			waited = true
			if waitErr == nil && (status == exitCmdNotFound || status == exitCmdNotExecutable) {
				fmt.Fprintf(os.Stderr, "stacktop: cannot run %s: it could not be executed (exit status %d); no profile written\n",
					procmaps.EscapeControl(cmdArgs[0]), status)
				return status
			}
		}
		xopts := export.Options{Threads: f.threads, Lines: f.lines}
		var werr error
		if out != nil {
			werr = out.commit(func(w io.Writer) error { return export.WriteOptions(w, prof, format, xopts) })
		}
		if werr != nil {
			fmt.Fprintln(os.Stderr, "stacktop:", werr)
			code = exitRecordWrite
		}
		var exitMsg string
		if child != nil {
			err := waitErr
			if !waited {
				status, err = child.wait()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "stacktop:", err)
				code = exitRecordCmdFail
			} else {
				exitMsg = fmt.Sprintf("exit status %d", status)
				if werr == nil {
					code = status
				}
			}
		}
		if !f.quiet {
			writeSummary(os.Stderr, st, f.rate, output, format, werr == nil, exitMsg)
			fmt.Fprintf(os.Stderr, "  unwinders: %s\n", strings.Join(sess.target.UnwinderNames(), ","))
		}
		if up != nil {
			if ust := up.Close(); !f.quiet {
				writeUploadSummary(os.Stderr, ust)
			}
		}
		return code
	})
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

func parseTIDs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var tids []int
	for _, f := range strings.Split(s, ",") {
		tid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || tid <= 0 {
			return nil, fmt.Errorf("--tid: bad thread id %q", f)
		}
		tids = append(tids, tid)
	}
	return tids, nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// showProgress redraws one status line on w four times a second until the
// returned function is called, which erases it.
func showProgress(w io.Writer, eng *sampler.Engine) (stop func()) {
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

// writeSummary prints what the recording got and what it cost the target.
func writeSummary(w io.Writer, st sampler.Stats, rate float64, output string, format export.Format, written bool, exitMsg string) {
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
	fmt.Fprintf(w, "stacktop: %d samples in %.2fs (%.1f Hz achieved, %.0f Hz asked), %s (%v)\n",
		st.Samples, st.Elapsed.Seconds(), st.Rate, rate, verdict, format)
	if st.Exited {
		msg := "the process exited"
		if exitMsg != "" {
			msg += ", " + exitMsg
		}
		fmt.Fprintf(w, "  %s\n", msg)
	}
	if st.Wall {
		fmt.Fprintf(w, "  wall-clock profile (--idle): every thread counted at every tick\n")
	} else {
		fmt.Fprintf(w, "  on-CPU profile: samples weighted by their thread's CPU time, %d periods of %v = %v of CPU\n",
			st.Weight, round(st.Period), round(time.Duration(st.Weight)*st.Period))
	}
	fmt.Fprintf(w, "  thread samples: %d stopped, %d reused (idle), %d failed, %d not taken (thread exited), %d not taken (no stop before the tick's deadline); ticks missed: %d\n",
		st.Stops, st.Reused, st.Failed, st.Gone, st.NotTaken, st.MissedTicks)
	if why := shortfall(st, rate); why != "" {
		fmt.Fprintf(w, "  rate short of the asked %.0f Hz: %s\n", rate, why)
	}
	trunc := 0.0
	if st.Samples > 0 {
		trunc = 100 * float64(st.Truncated) / float64(st.Samples)
	}
	fmt.Fprintf(w, "  truncated stacks: %d (%.1f%%)\n", st.Truncated, trunc)
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
	p, pt := st.Pause, st.PauseTotal
	fmt.Fprintf(w, "  pause per thread sample (stop to resume): median %v, p99 %v, max %v; from interrupt: median %v, p99 %v, max %v\n",
		round(p.Median), round(p.P99), round(p.Max), round(pt.Median), round(pt.P99), round(pt.Max))
	if st.LastErr != nil {
		fmt.Fprintf(w, "  last error: %v\n", st.LastErr)
	}
	for _, n := range st.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// shortfall says why the achieved rate fell below 95% of the asked one,
// or "" if it did not.
func shortfall(st sampler.Stats, rate float64) string {
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

// spawned is a command started for `record -- CMD`.
//
// The command must not be stacktop's child: a tracer thread waits for its
// tracees, and os/exec's wait4(pid) running on another thread would steal
// the ptrace stops of the command's main thread (any thread may reap
// events of the process's children). So stacktop starts a helper, itself
// re-executed with spawnEnv set; the helper starts "sh -c 'read; exec
// CMD'" and reports its PID. stacktop attaches to that shell while it
// waits on the go pipe, releases it, and the shell execs CMD: sampling
// covers CMD from its first instruction. The helper, CMD's parent, waits
// for it and passes its exit status back on the status pipe.
type spawned struct {
	pid    int
	helper *exec.Cmd
	goW    *os.File
	status *os.File
}

// startCommand starts argv with stdio as its standard input, output and
// error (record passes the terminal's; top, which owns the terminal, passes
// /dev/null).
func startCommand(argv []string, stdio [3]*os.File) (*spawned, error) {
	if err := checkRunnable(argv[0]); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pidR, pidW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	helper := exec.Command(self, argv...)
	helper.Env = append(os.Environ(), spawnEnv+"=1")
	helper.Stdin, helper.Stdout, helper.Stderr = stdio[0], stdio[1], stdio[2]
	helper.ExtraFiles = []*os.File{statusW, goR, pidW} // fds 3, 4, 5
	err = helper.Start()
	statusW.Close()
	goR.Close()
	pidW.Close()
	if err != nil {
		statusR.Close()
		goW.Close()
		pidR.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	s := &spawned{helper: helper, goW: goW, status: statusR}
	line, err := bufio.NewReader(pidR).ReadString('\n')
	pidR.Close()
	if s.pid, err = strconv.Atoi(strings.TrimSpace(line)); err != nil || s.pid <= 0 {
		s.abandon()
		return nil, fmt.Errorf("starting %s: the helper reported no PID", argv[0])
	}
	return s, nil
}

// release lets the command exec.
func (s *spawned) release() error {
	_, err := s.goW.Write([]byte("go\n"))
	s.goW.Close()
	s.goW = nil
	if err != nil {
		return fmt.Errorf("releasing the command: %w", err)
	}
	return nil
}

// wait returns the command's exit status as a shell reports it (128+N
// when killed by signal N).
func (s *spawned) wait() (int, error) {
	line, rerr := bufio.NewReader(s.status).ReadString('\n')
	s.status.Close()
	s.status = nil
	werr := s.helper.Wait()
	status, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		if rerr == nil {
			rerr = werr
		}
		return 0, fmt.Errorf("no exit status from the command's helper: %v", rerr)
	}
	return status, nil
}

// abandon kills what is left of a command whose recording failed: closing
// the go pipe makes a command that was never released exit without
// running.
func (s *spawned) abandon() {
	if s.goW != nil {
		s.goW.Close()
		s.goW = nil
	}
	if s.status != nil {
		s.status.Close()
		s.status = nil
		s.helper.Wait()
	}
}

// spawnHelper is the helper process of `record -- CMD` (see spawned):
// fd 3 status pipe (write), fd 4 go pipe (read), fd 5 PID pipe (write).
func spawnHelper(argv []string) int {
	os.Unsetenv(spawnEnv)
	status, goR, pidW := os.NewFile(3, "status"), os.NewFile(4, "go"), os.NewFile(5, "pid")
	// Ctrl-C reaches the whole foreground process group: the command
	// decides what to do with it, the helper must live on to report its
	// status. A handler (not SIG_IGN) so the command gets the default.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGQUIT)
	if len(argv) == 0 {
		return exitRecordCmdFail
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read -r _ <&3 || exit 125; exec 3<&- "$0" "$@"`}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{goR}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "stacktop:", err)
		return exitRecordCmdFail
	}
	goR.Close()
	fmt.Fprintf(pidW, "%d\n", cmd.Process.Pid)
	pidW.Close()
	err := cmd.Wait()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		code = ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	case err != nil:
		code = exitRecordCmdFail
	}
	fmt.Fprintf(status, "%d\n", code)
	status.Close()
	return 0
}
