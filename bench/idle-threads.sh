#!/usr/bin/env bash
# idle-threads.sh [SECONDS] [ROUNDS]: stacktop's own CPU while recording
# 1,000 mostly idle threads (manythreads 1000 2: 2 spinners, the main
# thread waking every 10 ms, the rest blocked) at 99 Hz, on-CPU and
# --idle. Measured with /usr/bin/time (user+sys of stacktop), two ways:
#   total:  a SECONDS-long recording, attach and symbol loading included;
#   steady: the difference between a SECONDS-long and a 1 s recording,
#           per second: what sampling costs once attached.
# Each round runs every measurement once, the modes alternated, so load
# changes hit all alike; the medians over ROUNDS (default 3) are the
# figures (single runs on a shared VM wander by a third).
# Target: at most 10% of one core.
source "$(dirname "$0")/common.sh"
secs=${1:-10}
rounds=${2:-3}
"$targets/manythreads-sframe3" 1000 2 >/dev/null &
mt=$!
sleep 2
cpu() { # cpu SECONDS MODE: stacktop's user+sys seconds
	/usr/bin/time -f 'cpu %U %S' "$stacktop" record -q -p "$mt" --rate 99 --duration "$1s" $2 \
		-o "$work/i.folded" 2>&1 | awk '/^cpu/ { print $2 + $3 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A total=() steady=()
for r in $(seq "$rounds"); do
	for mode in on-cpu --idle; do
		flag=${mode/on-cpu/}
		long=$(cpu "$secs" "$flag")
		short=$(cpu 1 "$flag")
		t=$(awk -v l="$long" -v secs="$secs" 'BEGIN { printf "%.1f", 100 * l / secs }')
		s=$(awk -v l="$long" -v s="$short" -v secs="$secs" 'BEGIN { printf "%.1f", 100 * (l - s) / (secs - 1) }')
		echo "round $r: $mode: total ${long}s over ${secs}s = $t% of one core; steady $s% (1 s run: ${short}s)"
		total[$mode]+="$t "
		steady[$mode]+="$s "
	done
done
for mode in on-cpu --idle; do
	echo "$mode: median total $(tr ' ' '\n' <<<"${total[$mode]}" | grep . | median)% of one core, steady $(tr ' ' '\n' <<<"${steady[$mode]}" | grep . | median)% (over $rounds rounds)"
done
