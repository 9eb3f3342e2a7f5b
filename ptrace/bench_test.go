//go:build linux

package ptrace

import (
	"os/signal"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"codeberg.org/stacktop/stacktop/regs"
)

// BenchmarkSample samples one busy thread like ptrace-floor.c does (16 KiB
// of stack, 1 ms apart) and reports the median Stopped (wait return ->
// resume) and Total (interrupt -> resume) times.
func BenchmarkSample(b *testing.B) {
	tg := startTarget(b, "spin", "1")
	tr := NewTracer()
	defer tr.Close()
	p := attach(b, tr, tg.pid)
	defer p.Detach()
	var s Sample
	stopped := make([]time.Duration, 0, b.N)
	total := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.SampleInto(&s, tg.pid, 16384, 0); err != nil {
			b.Fatal(err)
		}
		stopped = append(stopped, s.Stopped)
		total = append(total, s.Total)
		b.StopTimer()
		time.Sleep(time.Millisecond)
		b.StartTimer()
	}
	slices.Sort(stopped)
	slices.Sort(total)
	b.ReportMetric(float64(stopped[len(stopped)/2].Nanoseconds())/1e3, "stopped-µs/median")
	b.ReportMetric(float64(total[len(total)/2].Nanoseconds())/1e3, "total-µs/median")
	b.ReportMetric(float64(total[len(total)*99/100].Nanoseconds())/1e3, "total-µs/p99")
}

// BenchmarkSampleSteps times each step of one thread sample on a busy
// thread, 1 ms apart, and reports each step's median: where the time
// between PTRACE_INTERRUPT and the resume goes. "raw" issues the requests
// as this package does (raw system calls); "syscall" through the Go
// scheduler's syscall wrappers, as before, for comparison;
// "sigchld-ignored" is "raw" with SIGCHLD ignored process-wide (not
// something the package can do: os/exec needs SIGCHLD) to show what the
// signal costs the wait.
func BenchmarkSampleSteps(b *testing.B) {
	for _, mode := range []string{"raw", "syscall", "sigchld-ignored"} {
		b.Run(mode, func(b *testing.B) { benchSteps(b, mode != "syscall", mode == "sigchld-ignored") })
	}
}

func benchSteps(b *testing.B, raw, ignoreSIGCHLD bool) {
	tg := startTarget(b, "spin", "1")
	tr := NewTracer()
	defer tr.Close()
	p := attach(b, tr, tg.pid)
	defer p.Detach()
	if ignoreSIGCHLD {
		// After NewTracer: its signal.Notify would undo it.
		signal.Ignore(unix.SIGCHLD)
		defer signal.Reset(unix.SIGCHLD)
	}
	req := ptraceReq
	if !raw {
		req = func(r int, tid int, addr, data uintptr) error {
			_, _, e := unix.Syscall6(unix.SYS_PTRACE, uintptr(r), uintptr(tid), addr, data, 0, 0)
			if e != 0 {
				return e
			}
			return nil
		}
	}
	steps := []string{"interrupt", "wait", "getregset", "readv", "cont"}
	var d [5][]time.Duration
	buf := make([]byte, 16384)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		tr.do(func() {
			th := p.threads[tg.pid]
			t0 := time.Now()
			req(unix.PTRACE_INTERRUPT, th.tid, 0, 0)
			t1 := time.Now()
			if err = p.waitHeld(th); err != nil {
				return
			}
			t2 := time.Now()
			tr.rawIov.Base = (*byte)(unsafe.Pointer(&tr.raw))
			tr.rawIov.SetLen(prstatusSize)
			req(unix.PTRACE_GETREGSET, th.tid, ntPRSTATUS, uintptr(unsafe.Pointer(&tr.rawIov)))
			var rs regs.Set
			convertRegs(&tr.raw, &rs)
			t3 := time.Now()
			tr.local[0] = unix.Iovec{Base: &buf[0]}
			tr.local[0].SetLen(len(buf))
			tr.remote[0] = unix.RemoteIovec{Base: uintptr(rs.SP()), Len: len(buf)}
			if raw {
				readRemote(th.tid, &tr.local[0], &tr.remote[0])
			} else {
				unix.ProcessVMReadv(th.tid, tr.local[:], tr.remote[:], 0)
			}
			t4 := time.Now()
			req(unix.PTRACE_CONT, th.tid, 0, 0)
			th.state = stateRunning
			t5 := time.Now()
			for j, x := range []time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4)} {
				d[j] = append(d[j], x)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(time.Millisecond)
		b.StartTimer()
	}
	for j, name := range steps {
		slices.Sort(d[j])
		b.ReportMetric(float64(d[j][len(d[j])/2].Nanoseconds())/1e3, name+"-µs/median")
	}
}
