#!/usr/bin/env bash
# stoptimes.sh: how long a tracer kept a process's threads stopped, as the
# kernel saw it. A tool's own figure of its pauses is measured from its side
# of ptrace (stacktop's: from the last poll that found the thread running to
# its resume, an upper bound); this one is taken from the scheduler's
# tracepoints, recorded system-wide while the tool runs:
#
#   stoptimes.sh probe
#       exit 0 if perf can record sched:sched_switch and sched:sched_waking
#       here; else print the reason on one line and exit 1.
#   stoptimes.sh record DATA CMD...
#       run CMD under perf record (all CPUs, CLOCK_MONOTONIC) writing DATA;
#       CMD's output and exit status pass through.
#   stoptimes.sh stats DATA TID...
#       one line for the threads TID... (e.g. ls /proc/PID/task before the
#       run): "stops N median_us M p99_us P max_us X threads T unseen U
#       unended E lost L over_1ms O" (O: stops longer than 1 ms). DATA "-" reads `perf script --ns -F
#       tid,time,event,trace` text on stdin instead of a perf.data file.
#   stoptimes.sh selftest [STACKTOP PID]
#       check the parser on a made-up trace (stops, a lost waking, an
#       unended stop, an untraced job-control stop, an unseen thread); then,
#       given STACKTOP and PID, record "STACKTOP dump -p PID" and check that
#       every thread of PID was seen stopped exactly once (stacktop stops
#       each thread once).
#
# A stop begins at the thread's sched_switch with prev_state "t"
# (TASK_TRACED: a ptrace stop) and ends at the thread's next sched_waking
# (the tracer's PTRACE_CONT, PTRACE_DETACH or SIGKILL wakes it; nothing else
# wakes a traced stop). The time after that until the thread gets a CPU
# again is run-queue wait, not counted. unseen: threads never seen stopped;
# unended: stops with no waking before the recording ended (not counted in
# the figures); lost: stops whose waking perf lost (a second "t" switch of a
# thread without a waking between; not counted), plus perf's own LOST
# records. p99 is the nearest rank. A job-control stop of an untraced thread
# (SIGSTOP, prev_state "T") is not a ptrace stop and is not counted.
set -euo pipefail

events=(-e sched:sched_switch -e sched:sched_waking)

record() { # record DATA CMD...
	local data=$1
	shift
	rm -f "$data" "$data.old" # perf would keep the previous one as DATA.old
	perf record -k CLOCK_MONOTONIC -q -B -N -m 1024 -a "${events[@]}" -o "$data" -- "$@"
}

probe() {
	local tmp rc=0 err
	if ! command -v perf >/dev/null 2>&1; then
		echo "perf not installed"
		return 1
	fi
	tmp=$(mktemp -d)
	if ! err=$(perf record -k CLOCK_MONOTONIC -q -B -N -a "${events[@]}" -o "$tmp/probe.data" -- true 2>&1); then
		echo "perf cannot record the sched tracepoints here: $(head -1 <<<"$err")"
		rc=1
	fi
	rm -rf "$tmp"
	return $rc
}

stats() { # stats DATA TID...
	local data=$1
	shift
	local tids="$*"
	if [ "$data" = - ]; then
		cat
	else
		perf script -i "$data" --ns --show-lost-events -F tid,time,event,trace 2>/dev/null
	fi | awk -v tids="$tids" '
	BEGIN { n = split(tids, t, " "); for (i = 1; i <= n; i++) want[t[i]] = 1 }
	/LOST [0-9]+ events/ { lost++; next }
	{
		ts = ""
		for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = $i; break }
		if (ts == "") next
		sub(/:$/, "", ts)
		split(ts, p, ".")
		us = p[1] * 1e6 + substr(p[2] "000000000", 1, 9) / 1000
	}
	/sched:sched_switch:/ {
		if (!match($0, / prev_pid=[0-9]+/)) next
		tid = substr($0, RSTART + 10, RLENGTH - 10)
		if (!(tid in want)) next
		if (!match($0, / prev_state=[^ ]+/)) next
		if (substr($0, RSTART + 12, 1) != "t") next
		if (tid in start) lost++ # its waking was lost
		start[tid] = us
		next
	}
	/sched:sched_waking:/ {
		if (!match($0, / pid=[0-9]+/)) next
		tid = substr($0, RSTART + 5, RLENGTH - 5)
		if (!(tid in start)) next
		printf "d %.3f\n", us - start[tid]
		seen[tid] = 1
		delete start[tid]
	}
	END {
		for (tid in start) unended++
		for (tid in want) if (!(tid in seen) && !(tid in start)) unseen++
		printf "n threads %d\nn unseen %d\nn unended %d\nn lost %d\n", n, unseen, unended, lost
	}' | sort -k1,1 -k2,2g | awk '
	$1 == "d" { d[++k] = $2; if ($2 > 1000) over++; next }
	$1 == "n" { c[$2] = $3 }
	END {
		if (k == 0) med = p99 = max = "-"
		else {
			med = (k % 2) ? d[(k + 1) / 2] : (d[k / 2] + d[k / 2 + 1]) / 2
			r = int(0.99 * k); if (r < 0.99 * k) r++
			p99 = d[r]; max = d[k]
			med = sprintf("%.1f", med); p99 = sprintf("%.1f", p99); max = sprintf("%.1f", max)
		}
		printf "stops %d median_us %s p99_us %s max_us %s threads %d unseen %d unended %d lost %d over_1ms %d\n",
			k, med, p99, max, c["threads"], c["unseen"], c["unended"], c["lost"], over
	}'
}

selftest() { # selftest [STACKTOP PID]
	local st=${1:-} pid=${2:-} tmp tids line want
	# Thread 5: 10 µs; 6: a lost waking, then 1005.5 µs; 7: "T", not a ptrace
	# stop; 8: no waking; 9: never stopped; 10: not asked for. A comm may hold spaces.
	want="stops 2 median_us 507.8 p99_us 1005.5 max_us 1005.5 threads 5 unseen 2 unended 1 lost 1 over_1ms 1"
	line=$(stats - 5 6 7 8 9 <<'EOT'
     1 10.000001000: sched:sched_switch: prev_comm=a b prev_pid=5 prev_prio=120 prev_state=t ==> next_comm=x next_pid=1 next_prio=120
     2 10.000011000: sched:sched_waking: comm=a b pid=5 prio=120 target_cpu=001
     1 10.000020000: sched:sched_switch: prev_comm=c prev_pid=6 prev_prio=120 prev_state=t ==> next_comm=x next_pid=1 next_prio=120
     1 10.000030000: sched:sched_switch: prev_comm=c prev_pid=6 prev_prio=120 prev_state=t ==> next_comm=x next_pid=1 next_prio=120
     1 10.000031000: sched:sched_switch: prev_comm=k prev_pid=10 prev_prio=120 prev_state=t ==> next_comm=x next_pid=1 next_prio=120
     2 10.001035500: sched:sched_waking: comm=c pid=6 prio=120 target_cpu=001
     2 10.001036000: sched:sched_waking: comm=k pid=10 prio=120 target_cpu=001
     1 10.000040000: sched:sched_switch: prev_comm=d prev_pid=7 prev_prio=120 prev_state=T ==> next_comm=x next_pid=1 next_prio=120
     2 10.000050000: sched:sched_waking: comm=d pid=7 prio=120 target_cpu=001
     1 10.000060000: sched:sched_switch: prev_comm=e prev_pid=8 prev_prio=120 prev_state=t ==> next_comm=x next_pid=1 next_prio=120
EOT
	)
	if [ "$line" != "$want" ]; then
		printf 'FAIL: made-up trace\n got:  %s\n want: %s\n' "$line" "$want"
		return 1
	fi
	echo "ok: made-up trace"
	[ -n "$pid" ] || return 0
	probe >/dev/null || { probe; return 1; }
	tmp=$(mktemp -d)
	tids=$(ls "/proc/$pid/task")
	record "$tmp/st.data" "$st" dump -p "$pid" >/dev/null 2>"$tmp/err" || true
	line=$(stats "$tmp/st.data" $tids)
	echo "self:   $(grep 'each thread stopped' "$tmp/err" || echo '(no pause line)')"
	echo "kernel: $line"
	rm -rf "$tmp"
	awk -v n="$(wc -w <<<"$tids")" '{
		if ($2 == n && $10 == n && $12 == 0 && $14 == 0 && $16 == 0) { print "ok: one stop per thread, " n " threads"; exit 0 }
		print "FAIL: expected " n " stops, one per thread"; exit 1 }' <<<"$line"
}

case "${1:-}" in
probe) probe ;;
record) shift; record "$@" ;;
stats) shift; stats "$@" ;;
selftest) shift; selftest "$@" ;;
*)
	sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2
	exit 64
	;;
esac
