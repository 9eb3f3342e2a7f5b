#!/usr/bin/env bash
# fault-matrix.sh [ROUNDS]: what happens to the target, the profile and
# the signals when stacktop or its target is killed, stopped, exec'd,
# churned, put in D state or flooded with signals in the middle of a
# `stacktop record`. Each case prints what it tried and what it found:
#   stacktop: its exit status and how long after the fault it ended;
#   target:   alive or gone, running or stopped (T), threads still traced,
#             and whether it progressed after stacktop ended;
#   file:     whether the profile was written, and any temporary file left;
#   signals:  real-time signals sent during the recording and received.
# A case FAILs when the target is left traced, left stopped when it was
# not stopped before, stopped when it should stay stopped but runs, loses a
# signal, or a temporary file is left. Signal delivery latency and the
# target's slowdown under signal storms are measured elsewhere; this
# counts only what arrives. ROUNDS (default 1) repeats the
# matrix; the totals line counts every case run.
source "$(dirname "$0")/common.sh"
rounds=${1:-1}
gcc -O2 -pthread -o "$work/faultee" "$bench_dir/faultee.c"
out=$work/out
mkdir -p "$out"

tgt= tgtfile= st= fails=0 ncases=0 sent=

start_target() { # start_target MODE THREADS: faultee in the background
	tgtfile=$work/tgt.txt
	rm -f "$tgtfile"
	"$work/faultee" "$1" "$2" "$tgtfile" &
	tgt=$!
	for _ in $(seq 100); do [ -s "$tgtfile" ] && break; sleep 0.02; done
}
start_churn() {
	tgtfile=
	"$targets/exiter-sframe3" churn >/dev/null &
	tgt=$!
	sleep 1
}
start_stacktop() { # start_stacktop [ARGS...]: record the target in the background
	rm -rf "$out" && mkdir -p "$out"
	"$stacktop" record -q -p "$tgt" --rate 199 -o "$out/p.pb.gz" "$@" 2>"$work/st.err" &
	st=$!
	sleep 1.5
}
# wait_stacktop SECONDS: waits for stacktop; sets code (or "hung") and secs.
wait_stacktop() {
	local t0 t1
	t0=$(date +%s.%N)
	for _ in $(seq $(( $1 * 50 ))); do kill -0 "$st" 2>/dev/null || break; sleep 0.02; done
	if kill -0 "$st" 2>/dev/null; then
		kill -9 "$st"; { wait "$st"; } 2>/dev/null || true
		code=hung
	else
		code=0; { wait "$st"; } 2>/dev/null || code=$?
	fi
	t1=$(date +%s.%N)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
}
counter() { # counter NAME: a field of the target's status file
	[ -n "$tgtfile" ] && awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$tgtfile" 2>/dev/null || echo 0
}
# inspect: fills traced, stopped, alive, runs for the target.
inspect() {
	traced=0 stopped=0 alive=no runs=-
	if [ -d "/proc/$tgt/task" ]; then
		alive=yes
		for s in /proc/"$tgt"/task/*/status; do
			[ -r "$s" ] || continue
			awk '/^TracerPid:/ { exit $2 == 0 }' "$s" 2>/dev/null && traced=$((traced + 1))
			grep -q '^State:.[tT]' "$s" 2>/dev/null && stopped=$((stopped + 1))
		done
		if [ -n "$tgtfile" ]; then
			local a b
			a=$(counter progress); sleep 0.3; b=$(counter progress)
			if [ "$b" -gt "$a" ] 2>/dev/null; then runs=yes; else runs=no; fi
		else
			runs=n/a
		fi
	fi
}
# report NAME FAULT EXPECT: prints the findings; EXPECT is running,
# stopped or gone (the target's state after stacktop ended).
report() {
	local name=$1 fault=$2 expect=$3 verdict=ok why=() file=absent tmp
	inspect
	[ -s "$out/p.pb.gz" ] && file=written
	tmp=$(find "$out" -name '.*tmp*' | wc -l)
	[ "$traced" -eq 0 ] || why+=("$traced threads left traced")
	case $expect in
	running) [ "$alive" = yes ] && [ "$stopped" -eq 0 ] && [ "$runs" != no ] || why+=("target not running") ;;
	stopped) [ "$alive" = yes ] && [ "$stopped" -gt 0 ] || why+=("target no longer stopped") ;;
	gone) [ "$alive" = no ] || why+=("target still alive") ;;
	esac
	[ "$tmp" -eq 0 ] || why+=("$tmp temporary files left")
	[ "$code" != hung ] || why+=("stacktop hung")
	if [ -n "${sent:-}" ]; then
		[ "$got" -eq "$sent" ] || why+=("$((sent - got)) of $sent signals lost")
	fi
	[ ${#why[@]} -eq 0 ] || { verdict=FAIL; fails=$((fails + 1)); }
	printf '%-34s stacktop exit %-4s %5ss after | target %s, %d stopped, %d traced, progressing %s | file %s, tmp %d%s | %s%s\n' \
		"$name" "$code" "$secs" "$( [ "$alive" = yes ] && echo alive || echo gone)" "$stopped" "$traced" "$runs" \
		"$file" "$tmp" "${sent:+ | signals $got/$sent}" "$verdict" "${why[*]:+: ${why[*]}}"
	sent=
}
# shellcheck disable=SC2317
finish_target() { kill -CONT "$tgt" 2>/dev/null || true; kill -9 "$tgt" 2>/dev/null || true; { wait "$tgt"; } 2>/dev/null || true; }

for round in $(seq "$rounds"); do
	echo "round $round"
	for sig in KILL TERM INT; do
		start_target spin 4; start_stacktop
		kill -"$sig" "$st"; wait_stacktop 15
		report "stacktop gets SIG$sig" "" running; ncases=$((ncases + 1)); finish_target
	done

	start_target spin 4; start_stacktop
	kill -INT "$st"; sleep 0.3; kill -INT "$st"; wait_stacktop 15
	report "stacktop gets SIGINT twice" "" running; ncases=$((ncases + 1)); finish_target

	for sig in KILL TERM INT; do
		start_target spin 4; start_stacktop
		kill -"$sig" "$tgt"; wait_stacktop 15
		report "target gets SIG$sig" "" gone; ncases=$((ncases + 1)); finish_target
	done

	start_target spin 4; kill -STOP "$tgt"; sleep 0.2
	start_stacktop --duration 2s; wait_stacktop 15
	report "target stopped before attach" "" stopped; ncases=$((ncases + 1))
	kill -CONT "$tgt"; sleep 0.2; inspect
	echo "  after SIGCONT: $stopped stopped, progressing $runs"; finish_target

	start_target spin 4; start_stacktop --duration 3s
	kill -STOP "$tgt"; sleep 0.5; kill -CONT "$tgt"; wait_stacktop 15
	report "SIGSTOP+SIGCONT while recording" "" running; ncases=$((ncases + 1)); finish_target

	start_target spin 4; start_stacktop
	kill -STOP "$tgt"; sleep 0.3; kill -INT "$st"; wait_stacktop 15
	report "stopped while recording, then end" "" stopped; ncases=$((ncases + 1))
	kill -CONT "$tgt"; sleep 0.2; inspect
	echo "  after SIGCONT: $stopped stopped, progressing $runs"; finish_target

	start_target exec 4; start_stacktop --duration 3s; wait_stacktop 15
	report "target execs while recording" "" running; ncases=$((ncases + 1)); finish_target

	start_churn; start_stacktop --duration 3s; wait_stacktop 15
	report "thread churn" "" running; ncases=$((ncases + 1)); finish_target

	start_target dstate 2; start_stacktop --duration 3s; wait_stacktop 15
	sleep 0.4 # the vfork child's 300 ms: a thread in D cannot be detached before
	report "a thread in D state (vfork)" "" running; ncases=$((ncases + 1)); finish_target

	for n in 5000; do
		start_target spin 2; start_stacktop --duration 4s
		sent=$n; "$work/faultee" send "$tgt" "$n" >/dev/null; wait_stacktop 15
		sleep 0.1; got=$(counter rt)
		report "$n RT signals while recording" "" running; ncases=$((ncases + 1)); finish_target
	done
done
echo "$ncases cases, $fails failed (machine load: $(cut -d' ' -f1-3 /proc/loadavg))"
