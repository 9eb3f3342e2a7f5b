#!/usr/bin/env bash
# slowdown.sh [SECONDS] [ROUNDS]: the slowdown a CPU-bound program suffers
# while sampled. bench/cpuloop reports its own iterations per second; runs
# alternate unsampled, stacktop at 99 Hz, stacktop at 999 Hz and, where
# perf works, perf record -F 999 -g, so load changes hit all alike.
# Targets: <= 1% at 99 Hz, <= 5% at 999 Hz.
source "$(dirname "$0")/common.sh"
secs=${1:-5}
rounds=${2:-3}
speed() { grep -o '[0-9.]* Mit/s' | awk '{print $1}'; }
perf_ok=0
if command -v perf >/dev/null && perf record -F 999 -g -o "$work/perf.data" -- true >/dev/null 2>&1; then
	perf_ok=1
else
	echo "perf record does not work here: $(perf record -F 999 -g -o "$work/perf.data" -- true 2>&1 | head -1)"
fi
declare -A sum=()
for r in $(seq "$rounds"); do
	base=$("$work/cpuloop" "$secs" | speed)
	s99=$("$stacktop" record -q --rate 99 -o "$work/s.folded" -- "$work/cpuloop" "$secs" | speed)
	s999=$("$stacktop" record -q --rate 999 -o "$work/s.folded" -- "$work/cpuloop" "$secs" | speed)
	line="round $r: unsampled $base, stacktop 99 Hz $s99, stacktop 999 Hz $s999"
	sum[base]=$(awk -v a="${sum[base]:-0}" -v b="$base" 'BEGIN{print a+b}')
	sum[s99]=$(awk -v a="${sum[s99]:-0}" -v b="$s99" 'BEGIN{print a+b}')
	sum[s999]=$(awk -v a="${sum[s999]:-0}" -v b="$s999" 'BEGIN{print a+b}')
	if [ "$perf_ok" = 1 ]; then
		p=$(perf record -q -F 999 -g -o "$work/perf.data" -- "$work/cpuloop" "$secs" 2>/dev/null | speed)
		line="$line, perf 999 Hz $p"
		sum[perf]=$(awk -v a="${sum[perf]:-0}" -v b="$p" 'BEGIN{print a+b}')
	fi
	echo "$line (Mit/s)"
done
for k in s99 s999 perf; do
	[ -n "${sum[$k]:-}" ] || continue
	awk -v k="$k" -v b="${sum[base]}" -v s="${sum[$k]}" \
		'BEGIN { printf "slowdown %s: %.2f%%\n", k, 100 * (b - s) / b }'
done
