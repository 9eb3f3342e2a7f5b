#!/usr/bin/env bash
# lost-time.sh [SECONDS] [ROUNDS]: what one sample costs the sampled thread,
# as the thread itself sees it. bench/gaploop counts the wall time it did
# not run; runs alternate unsampled, the C floor (bench/ptrace-floor.c, 1 ms
# apart) with a sleeping wait, the floor with a polling wait (SPIN=1), and
# stacktop record at 999 Hz. Each sampled run's cost per sample is its lost
# time minus the unsampled run's, over its sample count. Less noisy than
# slowdown.sh's throughput on a VM whose CPU speed wanders; the cost per
# sample times the rate is the slowdown at 99 and 999 samples a second
# (targets: 1% and 5%).
source "$(dirname "$0")/common.sh"
secs=${1:-3}
rounds=${2:-3}
lost() { sed -n 's/.*lost \([0-9.]*\)%.*/\1/p'; }
floor_run() { # floor_run [SPIN=1]: prints "lost samples"
	"$work/gaploop" "$secs" >"$work/g.out" &
	local g=$!
	sleep 0.01
	local f
	f=$(env "$@" "$work/ptrace-floor" "$g" 100000)
	wait "$g"
	echo "$(lost <"$work/g.out") $(grep -o '[0-9]* samples' <<<"$f" | cut -d' ' -f1)"
}
declare -A sum=() per=()
for r in $(seq "$rounds"); do
	base=$("$work/gaploop" "$secs" | lost)
	read -r fl fn < <(floor_run X=1)
	read -r fs fsn < <(floor_run SPIN=1)
	out=$("$stacktop" record --rate 999 -o "$work/l.folded" -- "$work/gaploop" "$secs" 2>"$work/s.err")
	st=$(lost <<<"$out")
	sn=$(sed -n 's/^stacktop: \([0-9]*\) samples.*/\1/p' "$work/s.err")
	echo "round $r: lost unsampled $base%, floor $fl% ($fn samples), floor SPIN=1 $fs% ($fsn), stacktop 999 Hz $st% ($sn)"
	for k in base:"$base":1 floor:"$fl":"$fn" spin:"$fs":"$fsn" stacktop:"$st":"$sn"; do
		IFS=: read -r name l n <<<"$k"
		sum[$name]=$(awk -v a="${sum[$name]:-0}" -v b="$l" 'BEGIN{print a+b}')
		[ "$name" = base ] && continue
		per[$name]=$(awk -v a="${per[$name]:-0}" -v l="$l" -v b="$base" -v n="$n" -v s="$secs" \
			'BEGIN{print a + (l - b) / 100 * s * 1e6 / n}')
	done
done
for name in floor spin stacktop; do
	awk -v k="$name" -v l="${sum[$name]}" -v b="${sum[base]}" -v p="${per[$name]}" -v r="$rounds" \
		'BEGIN { printf "%-8s lost %.2f%% (unsampled %.2f%%): %.1f us per sample; at 99 samples/s %.2f%% of the thread'"'"'s time, at 999/s %.1f%%\n",
			k, l / r, b / r, p / r, p / r * 99 / 1e4, p / r * 999 / 1e4 }'
done
