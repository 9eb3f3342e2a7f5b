#!/usr/bin/env bash
# signals.sh [ROUNDS] [RATE] [SECONDS]: a signal storm against a traced
# process. bench/sigstorm.c's target runs two CPU-bound threads and
# records, for each real-time signal, the delay from its sending
# (rt_tgsigqueueinfo, thread-directed, stamped with the send time) to its
# handler; the sender sends RATE (default 5000) signals a second. Each
# round runs the storm untraced, then under stacktop record --rate 99
# (every signal is then a signal-delivery-stop the tracer must resume with
# its signal), and reports the delivery latency (p50, p99, max) and the
# target's work rate. Targets (issue 21): p99 <= 10 ms, and the target's
# work under stacktop >= half of its untraced work in the same storm.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
rate=${2:-5000}
secs=${3:-3}
gcc -O2 -pthread -o "$work/sigstorm" "$bench_dir/sigstorm.c"
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A vals=()
keep() { vals[$1]+="$2 "; }
storm() { # storm MODE: one run, prints the target's result line
	"$work/sigstorm" target "$secs" >"$work/t.out" &
	local tp=$!
	for i in $(seq 200); do grep -q tids "$work/t.out" && break; sleep 0.01; done
	local tids
	tids=$(awk '/^tids/ { print $2 }' "$work/t.out")
	if [ "$1" = stacktop ]; then
		"$stacktop" record -p "$tp" --rate 99 --duration "$(awk -v s="$secs" 'BEGIN { print s + 0.4 }')s" \
			-o "$work/s.folded" 2>"$work/st.err" &
	fi
	"$work/sigstorm" send "$tp" "$tids" "$rate" "$(awk -v s="$secs" 'BEGIN { print s + 0.7 }')" >"$work/send.out"
	wait
	grep '^work' "$work/t.out"
}
echo "$rate signals/s for ${secs}s, thread-directed to two busy threads; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
	for mode in untraced stacktop; do
		line=$(storm "$mode")
		extra=""
		if [ "$mode" = stacktop ]; then
			extra="; stacktop $(grep -o '[0-9.]* Hz achieved' "$work/st.err")"
		fi
		echo "round $r: $mode: $line$extra"
		keep "$mode/work" "$(awk '{print $2}' <<<"$line")"
		keep "$mode/p50" "$(awk '{print $8}' <<<"$line")"
		keep "$mode/p99" "$(awk '{print $10}' <<<"$line")"
		keep "$mode/max" "$(awk '{print $12}' <<<"$line")"
	done
done
m() { tr ' ' '\n' <<<"${vals[$1]:-}" | grep . | median; }
echo
echo "medians over $rounds rounds: delivery latency p50 / p99 / max (µs), work (Mit/s)"
for mode in untraced stacktop; do
	printf '%-10s %8s %8s %8s   %s\n' "$mode" "$(m $mode/p50)" "$(m $mode/p99)" "$(m $mode/max)" "$(m $mode/work)"
done
awk -v u="$(m untraced/work)" -v s="$(m stacktop/work)" 'BEGIN { if (s > 0) printf "slowdown under stacktop at 99 Hz: %.2fx (target <= 2x)\n", u / s }'
