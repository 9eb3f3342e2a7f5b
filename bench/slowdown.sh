#!/usr/bin/env bash
# slowdown.sh [SECONDS] [ROUNDS]: the slowdown a CPU-bound program suffers
# while sampled. bench/cpuloop reports its own iterations per second; runs
# alternate unsampled, stacktop at 99 Hz, stacktop at 999 Hz and, where
# perf works, perf record -F 999 -g, so load changes hit all alike.
# Targets: <= 1% at 99 Hz, <= 5% at 999 Hz. HALT_POLL_NS=N runs every round
# also with the guest polling N ns before it halts (see common.sh).
source "$(dirname "$0")/common.sh"
secs=${1:-5}
rounds=${2:-3}
halt_poll_init
speed() { grep -o '[0-9.]* Mit/s' | awk '{print $1}'; }
perf_ok=0
if command -v perf >/dev/null && perf record -F 999 -g -o "$work/perf.data" -- true >/dev/null 2>&1; then
	perf_ok=1
else
	echo "perf record does not work here: $(perf record -F 999 -g -o "$work/perf.data" -- true 2>&1 | head -1)"
fi
declare -A sum=()
for r in $(seq "$rounds"); do
	for h in "${halt_poll_settings[@]}"; do
		set_halt_poll "$h"
		base=$("$work/cpuloop" "$secs" | speed)
		s99=$("$stacktop" record -q --rate 99 -o "$work/s.folded" -- "$work/cpuloop" "$secs" | speed)
		s999=$("$stacktop" record -q --rate 999 -o "$work/s.folded" -- "$work/cpuloop" "$secs" | speed)
		line="round $r, halt poll $h: unsampled $base, stacktop 99 Hz $s99, stacktop 999 Hz $s999"
		add "$h/base" "$base"
		add "$h/s99" "$s99"
		add "$h/s999" "$s999"
		if [ "$perf_ok" = 1 ]; then
			p=$(perf record -q -F 999 -g -o "$work/perf.data" -- "$work/cpuloop" "$secs" 2>/dev/null | speed)
			line="$line, perf 999 Hz $p"
			add "$h/perf" "$p"
		fi
		echo "$line (Mit/s)"
	done
done
for h in "${halt_poll_settings[@]}"; do
	[ ${#halt_poll_settings[@]} = 1 ] || echo "guest_halt_poll_ns $h:"
	for k in s99 s999 perf; do
		[ -n "${sum[$h/$k]:-}" ] || continue
		awk -v k="$k" -v b="${sum[$h/base]}" -v s="${sum[$h/$k]}" \
			'BEGIN { printf "slowdown %s: %.2f%%\n", k, 100 * (b - s) / b }'
	done
done
