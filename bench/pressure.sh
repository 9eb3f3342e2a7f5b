#!/usr/bin/env bash
# pressure.sh [ROUNDS] [PER_CPU]: sampling under CPU pressure. A process of
# PER_CPU (default 20) spinning threads per CPU (bench/mixthreads.c): a
# runnable thread stops only when the scheduler gives it a CPU, so a tick
# cannot wait for all of them; it gives up at its deadline, counts those
# threads as not taken and leaves them running.
#   record: stacktop record --rate 49 --duration 3s; its wall time (target
#           <= 4.5 s), achieved tick rate (target >= 50% of 49 Hz), the
#           share of thread samples taken, and the longest pause.
#   SIGTERM, SIGINT: stacktop record without --duration, signalled after
#           1.5 s; the time from the signal to stacktop's exit, profile
#           written and target detached (target <= 100 ms to stop sampling;
#           the figure includes the detach and the write).
# After each run the script checks that no thread of the target is still
# traced or stopped.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
per_cpu=${2:-20}
n=$((per_cpu * $(nproc)))
gcc -O2 -g -pthread -o "$work/mixthreads" "$bench_dir/mixthreads.c"
"$work/mixthreads" "$n" "$n" >"$work/mix.out" &
mt=$!
for i in $(seq 100); do grep -q ready "$work/mix.out" && break; sleep 0.1; done
echo "$n spinning threads on $(nproc) CPUs (pid $mt); load $(cut -d' ' -f1-3 /proc/loadavg)"
now_ns() { date +%s%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A vals=()
keep() { vals[$1]+="$2 "; }
check_target() {
	local bad=0
	for t in /proc/$mt/task/*; do
		if ! grep -q '^TracerPid:[[:space:]]*0$' "$t/status" || [ "$(awk '{print $3}' "$t/stat")" = t ]; then
			bad=$((bad + 1))
		fi
	done
	[ $bad = 0 ] || echo "  !! $bad threads still traced or stopped"
}
for r in $(seq "$rounds"); do
	s=$(now_ns)
	"$stacktop" record -p "$mt" --rate 49 --duration 3s -o "$work/p.folded" 2>"$work/err" || true
	e=$(now_ns)
	wall=$(((e - s) / 1000000))
	hz=$(grep -o '[0-9.]* Hz achieved' "$work/err" | awk '{print $1}')
	stopped=$(grep -o '[0-9]* stopped' "$work/err" | head -1 | awk '{print $1}')
	late=$(grep -o "[0-9]* not taken (no stop" "$work/err" | awk '{print $1}')
	taken=$(awk -v s="$stopped" -v l="${late:-0}" 'BEGIN { if (s + l > 0) printf "%.0f", 100 * s / (s + l); else print 0 }')
	maxp=$(pause_field "$(cat "$work/err")" 3)
	echo "round $r: record --rate 49 --duration 3s: wall $wall ms, $hz Hz achieved, thread samples taken $taken% ($stopped taken, ${late:-0} not taken), longest pause $maxp µs"
	grep 'rate short' "$work/err" || true
	check_target
	keep wall "$wall"
	keep hz "$hz"
	keep taken "$taken"
	for sig in TERM INT; do
		"$stacktop" record -p "$mt" --rate 49 -o "$work/s.folded" 2>"$work/err" &
		st=$!
		sleep 1.5
		s=$(now_ns)
		kill -s "$sig" "$st"
		wait "$st" || true
		e=$(now_ns)
		ms=$(((e - s) / 1000000))
		echo "round $r: SIG$sig to exit: $ms ms ($(grep -o '[0-9]* samples in [0-9.]*s' "$work/err"))"
		check_target
		keep "$sig" "$ms"
	done
done
m() { tr ' ' '\n' <<<"${vals[$1]:-}" | grep . | median; }
echo
echo "medians over $rounds rounds: record wall $(m wall) ms (target <= 4500), $(m hz) Hz of 49 (target >= 24.5), thread samples taken $(m taken)%; SIGTERM to exit $(m TERM) ms, SIGINT to exit $(m INT) ms"
