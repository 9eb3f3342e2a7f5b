#!/usr/bin/env bash
# lost-time.sh [SECONDS] [ROUNDS]: what one sample costs the sampled thread,
# as the thread itself sees it. bench/gaploop counts the wall time it did
# not run; runs alternate unsampled, the C floor (bench/ptrace-floor.c)
# with a sleeping wait and with a polling wait (SPIN=1), 1 ms and 10 ms
# apart, and stacktop record at 999 and at 99 Hz. A sampled run's cost per sample is
# its lost time minus the unsampled run's, over its sample count; the cost
# per sample times the rate is the slowdown (targets: 1% at 99 Hz, 5% at
# 999 Hz). Less noisy than slowdown.sh's throughput on a VM whose CPU
# speed wanders. Each figure is given twice: from all lost time, and from
# gaps shorter than 1 ms only, which leaves out most of the host's own
# preemptions of the vCPU (and the rare sample that long).
#
# HALT_POLL_NS=N runs every round also with the guest polling N ns before
# it halts (see common.sh).
source "$(dirname "$0")/common.sh"
secs=${1:-3}
rounds=${2:-3}
halt_poll_init

lost() { sed -n 's/.*lost \([0-9.]*\)%.*short lost \([0-9.]*\)%.*/\1 \2/p'; }
floor_run() { # floor_run [SPIN=1] [INTERVAL_US=N]: prints "lost short-lost samples"
	"$work/gaploop" "$secs" >"$work/g.out" &
	local g=$!
	sleep 0.01
	local f
	f=$(env "$@" "$work/ptrace-floor" "$g" 100000)
	wait "$g"
	echo "$(lost <"$work/g.out") $(grep -o '[0-9]* samples' <<<"$f" | cut -d' ' -f1)"
}
stacktop_run() { # stacktop_run RATE: prints "lost short-lost samples"
	local out
	out=$("$stacktop" record --rate "$1" -o "$work/l.folded" -- "$work/gaploop" "$secs" 2>"$work/s.err")
	echo "$(lost <<<"$out") $(sed -n 's/^stacktop: \([0-9]*\) samples.*/\1/p' "$work/s.err")"
}
declare -A sum=()
for r in $(seq "$rounds"); do
	for h in "${halt_poll_settings[@]}"; do
		set_halt_poll "$h"
		read -r bl bs < <("$work/gaploop" "$secs" | lost)
		line="round $r, halt poll $h: lost (short) unsampled $bl% ($bs%)"
		add "$h/base" "$bl"
		add "$h/base-short" "$bs"
		for run in floor spin stacktop floor10ms spin10ms stacktop99; do
			case $run in
			floor) read -r l s n < <(floor_run X=1) ;;
			spin) read -r l s n < <(floor_run SPIN=1) ;;
			floor10ms) read -r l s n < <(floor_run INTERVAL_US=10000) ;;
			spin10ms) read -r l s n < <(floor_run SPIN=1 INTERVAL_US=10000) ;;
			stacktop) read -r l s n < <(stacktop_run 999) ;;
			stacktop99) read -r l s n < <(stacktop_run 99) ;;
			esac
			line="$line, $run $l% ($s%) $n samples"
			add "$h/$run" "$l"
			add "$h/$run-short" "$s"
			add "$h/$run-per" "$(awk -v l="$l" -v b="$bl" -v n="$n" -v s="$secs" 'BEGIN{print (l - b) / 100 * s * 1e6 / n}')"
			add "$h/$run-per-short" "$(awk -v l="$s" -v b="$bs" -v n="$n" -v s="$secs" 'BEGIN{print (l - b) / 100 * s * 1e6 / n}')"
		done
		echo "$line"
	done
done
# A sample costs more at 99 Hz than at 999 Hz (colder caches, deeper
# idle), so each rate is compared with the floor at its own cadence.
for h in "${halt_poll_settings[@]}"; do
	[ ${#halt_poll_settings[@]} = 1 ] || echo "guest_halt_poll_ns $h:"
	for k in floor:999 spin:999 stacktop:999 floor10ms:99 spin10ms:99 stacktop99:99; do
		IFS=: read -r run rate <<<"$k"
		awk -v k="$run" -v rate="$rate" -v r="$rounds" -v l="${sum[$h/$run]}" -v b="${sum[$h/base]}" \
			-v p="${sum[$h/$run-per]}" -v ps="${sum[$h/$run-per-short]}" \
			'BEGIN { printf "%-10s lost %.2f%% (unsampled %.2f%%): %.1f us per sample (%.1f us in gaps < 1 ms); at %d samples/s %.2f%% (%.2f%%) of the thread'"'"'s time\n",
				k, l / r, b / r, p / r, ps / r, rate, p / r * rate / 1e4, ps / r * rate / 1e4 }'
	done
done
