#!/usr/bin/env bash
# oncpu.sh [SECONDS] [ROUNDS] [RATE]: is the default (on-CPU) profile true
# to where the CPU time went? Records testdata/targets/bin/cpusplit-fp
# (threads "hot" at 100% of a CPU, "quarter" at 25%, "fifth" at 5%, "waker" waking every
# 500 us to do nothing) and prints, per thread, its share of the profile's
# samples next to its share of the CPU time it really used (schedstat over
# the recording), and the profile's CPU total (samples x period) next to
# the process's utime+stime from /proc/PID/stat.
#
# The issue's target: hot / quarter / waker at 80% / 20% / <= 5% of the
# samples (+-8 points) on an idle machine; on a loaded one the spinners get
# less than their nominal share of a CPU, so compare with the "cpu" column.
# Total within 15% of utime+stime.
source "$(dirname "$0")/common.sh"

secs=${1:-5}
rounds=${2:-3}
rate=${3:-99}
clk_tck=$(getconf CLK_TCK)

# run_ns PID TID: the thread's run time in ns (schedstat's first field).
run_ns() { awk '{print $1}' "/proc/$1/task/$2/schedstat"; }
# proc_ticks PID: utime + stime of the whole process, in clock ticks.
proc_ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }

for r in $(seq "$rounds"); do
	"$targets/cpusplit-fp" >"$work/ready" &
	pid=$!
	for _ in $(seq 100); do grep -q ready "$work/ready" && break; sleep 0.05; done
	declare -A tid_of=() before=()
	for t in /proc/$pid/task/*; do
		tid=${t##*/}
		name=$(cat "$t/comm")
		tid_of[$name]=$tid
		before[$name]=$(run_ns "$pid" "$tid")
	done
	t0=$(proc_ticks "$pid")
	"$stacktop" record -p "$pid" --rate "$rate" --duration "${secs}s" --format folded -o "$work/out.folded" 2>"$work/summary"
	t1=$(proc_ticks "$pid")
	total_ran=0
	declare -A ran=()
	for name in "${!tid_of[@]}"; do
		ran[$name]=$(($(run_ns "$pid" "${tid_of[$name]}") - ${before[$name]}))
		total_ran=$((total_ran + ran[$name]))
	done
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	samples=$(awk '{s += $NF} END {print s + 0}' "$work/out.folded")
	period=$(grep -o 'periods of [0-9.]*[µnm]*s' "$work/summary" | awk '{print $3}')
	echo "round $r: $samples samples of $period"
	for name in hot quarter fifth waker; do
		n=$(grep "cpu_${name}_thread" "$work/out.folded" | awk '{s += $NF} END {print s + 0}')
		awk -v name="$name" -v n="$n" -v s="$samples" -v c="${ran[$name]}" -v t="$total_ran" \
			'BEGIN { printf "  %-8s %5.1f%% of samples  %5.1f%% of cpu\n", name, 100*n/s, 100*c/t }'
	done
	awk -v s="$samples" -v p="$(to_us "$period")" -v ticks=$((t1 - t0)) -v hz="$clk_tck" \
		'BEGIN { prof = s*p/1e6; proc = ticks/hz;
			printf "  profile %.2fs of CPU, process utime+stime %.2fs: %+.1f%%\n", prof, proc, 100*(prof-proc)/proc }'
done
