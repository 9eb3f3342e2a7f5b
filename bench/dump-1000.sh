#!/usr/bin/env bash
# dump-1000.sh [ROUNDS]: one stack dump of a 1,000-thread process, and of a
# 1-thread process, by stacktop (with file:line, and --no-lines), gdb
# "thread apply all bt" and eu-stack, on the same processes. The 1,000
# threads are of mixed kinds (bench/mixthreads.c 1000 4: 4 spinning, the
# rest blocked in libc's pthread_cond_wait and nanosleep, and in raw read
# and futex system calls); the 1-thread process is coreutils' sleep.
# libc6-dbg (Debian's separate debug files of libc), gdb and elfutils are
# installed if missing, so every tool sees the same debug information.
# Every tool is timed alike: the shell's clock around the command alone.
#
# Each round runs every tool once on each process, in turn, so load changes
# hit all alike; the medians over ROUNDS (default 5) are the figures. The
# 1,000-thread process's spinning threads would keep both CPUs of a small
# machine busy while the 1-thread process is dumped, and the 1-thread
# figures would measure the wait for a CPU: each round therefore stops it
# (SIGSTOP) for the 1-thread runs and resumes it (SIGCONT) before the next
# round's 1,000-thread runs, which stay on a process that runs (once its
# threads are back in their waits: settle). One
# untimed stacktop dump of each process before the first round fills
# stacktop's DWARF cache, so every round measures a warm cache (a user's
# second dump; the first inflates libc's DWARF and writes the cache). For
# stacktop it also reports the peak RSS (/usr/bin/time, in an extra
# untimed run) and the longest time any single thread stayed stopped
# (stacktop's own measure: from the last poll that found the thread
# running to its resume, an upper bound).
# Each round ends, for each process, with one untimed extra stacktop dump
# and one gdb dump recorded with the kernel's scheduler tracepoints
# (bench/stoptimes.sh: a stop runs from the thread's switch-out in a ptrace
# stop to its wake-up): the kernel-measured stops of the target's threads
# (count, median, p99, max), next to stacktop's own longest stop in the
# same run. gdb holds every thread stopped for its whole dump. Without perf
# or the tracepoints these rows are left out, and the script says so.
# Targets (issue 16): 1,000 threads with file:line <= 100 ms and >= 7x
# faster than gdb; 1 thread <= 20 ms; no thread stopped > 1 ms; peak RSS
# <= 30 MB.
source "$(dirname "$0")/common.sh"
rounds=${1:-5}

need() { # need PACKAGE COMMAND-OR-PATH
	if ! command -v "$2" >/dev/null 2>&1 && [ ! -e "$2" ]; then
		echo "installing $1" >&2
		{ apt-get install -y -q "$1" || { apt-get update -q && apt-get install -y -q "$1"; }; } >/dev/null
	fi
}
need gdb gdb
need elfutils eu-stack
need time /usr/bin/time
if ! dpkg -s libc6-dbg >/dev/null 2>&1; then
	echo "installing libc6-dbg" >&2
	{ apt-get install -y -q libc6-dbg || { apt-get update -q && apt-get install -y -q libc6-dbg; }; } >/dev/null
fi
need linux-perf perf || true # the kernel-measured stops only; may be refused
if kstops_why=$("$bench_dir/stoptimes.sh" probe); then
	kstops=1
else
	kstops=
	echo "kernel-measured stops left out: $kstops_why"
fi
echo "libc6-dbg $(dpkg-query -W -f='${Version}' libc6-dbg 2>/dev/null || echo missing); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"

gcc -O2 -g -pthread -o "$work/mixthreads" "$bench_dir/mixthreads.c"
"$work/mixthreads" 1000 4 >"$work/mix.out" &
mt=$!
trap 'kill -CONT "$mt" 2>/dev/null || true; cleanup' EXIT # not left stopped by an interrupted round
sleep 1000 &
one=$!
for i in $(seq 300); do grep -q ready "$work/mix.out" && break; sleep 0.1; done
echo "1,000-thread process: pid $mt ($(ls /proc/$mt/task | wc -l) threads); 1-thread process: pid $one (sleep)"

now_ns() { date +%s%N; }
# settle PID N: wait (at most 5 s) until no more than N threads of PID are
# runnable, then one second more. After SIGCONT every thread of the
# 1,000-thread process wakes to go back to its wait, and the machine, idle
# but for the short 1-thread runs while that process was stopped, is busy
# again; the run timed first after that, stacktop's with file:line, was
# the slowest of every round (medians of 5: 123 ms, against 97 for the
# --no-lines run just after it, which reads no line tables but is
# otherwise the same work).
settle() {
	local i
	for i in $(seq 100); do
		[ "$(cat /proc/"$1"/task/*/stat 2>/dev/null | awk '$3 == "R"' | wc -l)" -le "$2" ] && break
		sleep 0.05
	done
	sleep 1
}
# run CMD...: CMD's wall time in ms; its output in $work/out and err.
run() {
	local s e
	s=$(now_ns)
	"$@" >"$work/out" 2>"$work/err" || true
	e=$(now_ns)
	echo $(((e - s) / 1000000))
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A vals=()
keep() { vals[$1]+="$2 "; }

stacktop_run() { # stacktop_run KEY PID [FLAGS]: wall, RSS, longest stop
	local key=$1 pid=$2 s e
	shift 2
	# Timed as gdb and eu-stack are, on its own: under /usr/bin/time the
	# wall also held time's own start and fork, 5-6 ms more under the
	# spinners (30 alternated runs each). The peak RSS comes from a second,
	# untimed run under /usr/bin/time.
	s=$(now_ns)
	"$stacktop" dump -p "$pid" "$@" >"$work/out" 2>"$work/err" || true
	e=$(now_ns)
	local ms=$(((e - s) / 1000000))
	/usr/bin/time -f 'rss %M' -o "$work/time" "$stacktop" dump -p "$pid" "$@" >/dev/null 2>&1 || true
	local rss=$(awk '/^rss/ { printf "%.1f", $2 / 1024 }' "$work/time")
	local maxstop=$(grep -o 'max [0-9.]*[µnm]*s' "$work/err" | tail -1 | awk '{print $2}')
	local threads=$(grep -c '^TID' "$work/out" || true)
	keep "$key" "$ms"
	keep "$key/rss" "$rss"
	keep "$key/stop" "$(to_us "${maxstop:-0}")"
	printf '%-28s %6d ms  %3d threads  peak RSS %5s MB  longest stop %s\n' "$key" "$ms" "$threads" "$rss" "${maxstop:--}"
}
traced_run() { # traced_run KEY PID CMD...: CMD once, untimed, under stoptimes.sh record; PID's threads' stops
	local key=$1 pid=$2 tids line own= stops med p99 max unseen unended lost over
	shift 2
	tids=$(ls "/proc/$pid/task")
	"$bench_dir/stoptimes.sh" record "$work/sched.data" "$@" >"$work/out" 2>"$work/err" || true
	line=$("$bench_dir/stoptimes.sh" stats "$work/sched.data" $tids)
	# stops N median_us M p99_us P max_us X threads T unseen U unended E lost L over_1ms O
	read -r _ stops _ med _ p99 _ max _ _ _ unseen _ unended _ lost _ over <<<"$line"
	[ "$max" = - ] || keep "$key/kmax" "$max"
	if [ "${key%%/*}" = stacktop ]; then
		own=$(grep -o 'max [0-9.]*[µnm]*s' "$work/err" | tail -1 | awk '{print $2}')
		keep "$key/ownmax" "$(to_us "${own:-0}")"
		own="  stacktop's own max ${own:--}"
	fi
	printf '%-28s %6d stops  median/p99/max %s/%s/%s µs  %d over 1 ms  %d never stopped%s%s\n' \
		"${key%%/*}, kernel/${key##*/}" "$stops" "$med" "$p99" "$max" "$over" "$unseen" \
		"$([ "$unended$lost" = 00 ] || echo "  ($unended unended, $lost lost)")" "$own"
}
"$stacktop" dump -p "$mt" >/dev/null 2>&1 || true # warm the DWARF cache (header)
"$stacktop" dump -p "$one" >/dev/null 2>&1 || true
for r in $(seq "$rounds"); do
	echo "--- round $r"
	for p in "$mt:1000" "$one:1"; do
		pid=${p%%:*}
		n=${p##*:}
		if [ "$n" = 1 ]; then
			kill -STOP "$mt" # its 4 spinning threads off the CPUs (header)
		fi
		stacktop_run "stacktop/$n" "$pid"
		stacktop_run "stacktop --no-lines/$n" "$pid" --no-lines
		ms=$(run gdb -batch -nx -p "$pid" -ex 'thread apply all bt')
		keep "gdb/$n" "$ms"
		printf '%-28s %6d ms  %3d threads\n' "gdb/$n" "$ms" "$(grep -c '^Thread ' "$work/out" || true)"
		ms=$(run eu-stack -p "$pid")
		keep "eu-stack/$n" "$ms"
		printf '%-28s %6d ms  %3d threads\n' "eu-stack/$n" "$ms" "$(grep -c '^TID ' "$work/out" || true)"
		if [ -n "$kstops" ]; then # after the timed runs: tracing perturbs none of them
			traced_run "stacktop/$n" "$pid" "$stacktop" dump -p "$pid"
			traced_run "gdb/$n" "$pid" gdb -batch -nx -p "$pid" -ex 'thread apply all bt'
		fi
	done
	kill -CONT "$mt"
	settle "$mt" 4
done

m() { tr ' ' '\n' <<<"${vals[$1]:-}" | grep . | median; }
echo
echo "medians over $rounds rounds (wall ms; stacktop: peak RSS MB, longest single-thread stop µs)"
printf '%-22s %12s %12s\n' tool "1,000 thr" "1 thr"
for tool in stacktop "stacktop --no-lines" gdb eu-stack; do
	printf '%-22s %12s %12s\n' "$tool" "$(m "$tool/1000")" "$(m "$tool/1")"
done
for k in stacktop "stacktop --no-lines"; do
	printf '%-22s %12s %12s   (peak RSS, MB)\n' "$k" "$(m "$k/1000/rss")" "$(m "$k/1/rss")"
	worst=$(tr ' ' '\n' <<<"${vals[$k/1000/stop]}" | grep . | sort -g | tail -1)
	printf '%-22s %12s %12s   (longest stop, µs: median of rounds; worst %s)\n' "$k" "$(m "$k/1000/stop")" "$(m "$k/1/stop")" "$worst"
done
worst() { tr ' ' '\n' <<<"${vals[$1]:-}" | grep . | sort -g | tail -1; }
if [ -n "$kstops" ]; then
	for k in stacktop gdb; do
		printf '%-22s %12s %12s   (kernel-measured longest stop, µs: median of rounds; worst %s)\n' \
			"$k, kernel" "$(m "$k/1000/kmax")" "$(m "$k/1/kmax")" "$(worst "$k/1000/kmax")"
		if [ "$k" = stacktop ]; then
			printf '%-22s %12s %12s   (stacktop'"'"'s own longest stop in the same runs, µs; worst %s)\n' \
				"stacktop, own" "$(m "$k/1000/ownmax")" "$(m "$k/1/ownmax")" "$(worst "$k/1000/ownmax")"
		fi
	done
fi
awk -v s="$(m stacktop/1000)" -v g="$(m gdb/1000)" -v e="$(m eu-stack/1000)" \
	'BEGIN { if (s > 0) printf "1,000 threads, file:line: stacktop %.1fx faster than gdb, %.1fx than eu-stack\n", g / s, e / s }'
