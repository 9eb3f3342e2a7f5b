#!/usr/bin/env bash
# idle-threads.sh [SECONDS]: stacktop's own CPU while recording 1,000 mostly
# idle threads (manythreads 1000 2: 2 spinners, the main thread waking every
# 10 ms, the rest blocked) at 99 Hz, on-CPU and --idle. Measured with
# /usr/bin/time (user+sys of stacktop), two ways:
#   total:  a SECONDS-long recording, attach and symbol loading included;
#   steady: the difference between a SECONDS-long and a 1 s recording,
#           per second: what sampling costs once attached.
# Target: at most 10% of one core.
source "$(dirname "$0")/common.sh"
secs=${1:-10}
"$targets/manythreads-sframe3" 1000 2 >/dev/null &
mt=$!
sleep 2
cpu() { # cpu SECONDS MODE: stacktop's user+sys seconds
	/usr/bin/time -f 'cpu %U %S' "$stacktop" record -q -p "$mt" --rate 99 --duration "$1s" $2 \
		-o "$work/i.folded" 2>&1 | awk '/^cpu/ { print $2 + $3 }'
}
for mode in "" --idle; do
	long=$(cpu "$secs" "$mode")
	short=$(cpu 1 "$mode")
	awk -v l="$long" -v s="$short" -v secs="$secs" -v mode="${mode:-on-cpu}" 'BEGIN {
		printf "%s: total %.2fs over %ds = %.1f%% of one core; steady %.1f%% (1 s run: %.2fs)\n",
			mode, l, secs, 100 * l / secs, 100 * (l - s) / (secs - 1), s }'
done
