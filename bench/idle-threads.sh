#!/usr/bin/env bash
# idle-threads.sh [SECONDS]: stacktop's own CPU while recording 1,000 mostly
# idle threads (manythreads 1000 2: 2 spinners, the rest blocked) at 99 Hz,
# on-CPU and --idle. Measured with /usr/bin/time (user+sys of stacktop).
# Target: at most 10% of one core.
source "$(dirname "$0")/common.sh"
secs=${1:-10}
"$targets/manythreads-sframe3" 1000 2 >/dev/null &
mt=$!
sleep 2
for mode in "" --idle; do
	out=$(/usr/bin/time -f 'cpu %U %S' "$stacktop" record -q -p "$mt" --rate 99 --duration "${secs}s" $mode -o "$work/i.folded" 2>&1)
	awk -v secs="$secs" -v mode="${mode:-on-cpu}" '/^cpu/ {
		printf "%s: stacktop user %.2fs sys %.2fs over %ds = %.1f%% of one core\n", mode, $2, $3, secs, 100 * ($2 + $3) / secs }' <<<"$out"
done
