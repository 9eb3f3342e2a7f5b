#!/usr/bin/env bash
# lines.sh: what file:line costs (issue 16, the debug-information part).
#
# 1. Wall time of "stacktop dump" of a 1-thread "sleep 1000" with Debian's
#    libc6-dbg installed (the script installs it): --no-lines, lines with
#    no DWARF cache (STACKTOP_NO_CACHE=1), lines with a cold cache (a new
#    empty XDG_CACHE_HOME each round) and with a warm one. The modes
#    alternate within each round; medians at the end. Target: <= 20 ms.
# 2. record's start: BenchmarkRecordStart (internal/engine) gives the time from
#    attach to the first sample and the tick rate over 3 s at 999 Hz.
#    Targets: first sample within 20 ms; 999 Hz within 1% on a quiet
#    machine.
#
# ROUNDS=N sets the rounds of part 1 (default 9); SKIP_RECORD=1 skips
# part 2.
source "$(dirname "$0")/common.sh"
if ! dpkg -s libc6-dbg >/dev/null 2>&1; then
	apt-get install -y libc6-dbg >/dev/null || { apt-get update >/dev/null && apt-get install -y libc6-dbg >/dev/null; }
fi
rounds=${ROUNDS:-9}
sleep 1000 &
target=$!
sleep 0.2

gcc -O2 -o "$work/cputime" "$bench_dir/cputime.c"

# wall_ms CMD...: the command's wall time in milliseconds; its CPU time
# (user + system, ms) goes to $work/cpu: on a loaded machine the CPU time
# says more than the wall time.
wall_ms() {
	"$work/cputime" "$@" >/dev/null 2>"$work/err" || true
	awk '/^cputime:/ { printf "%.1f", $3 }' "$work/err" >"$work/cpu"
	awk '/^cputime:/ { printf "%.1f", $2 }' "$work/err"
}

# median: of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

modes=(nolines nocache cold warm)
declare -A times cpus
XDG_CACHE_HOME=$work/warm "$stacktop" dump -p "$target" >/dev/null # fill the warm cache
for r in $(seq "$rounds"); do
	line="round $r:"
	for m in "${modes[@]}"; do
		case $m in
		nolines) t=$(wall_ms env XDG_CACHE_HOME="$work/warm" "$stacktop" dump --no-lines -p "$target") ;;
		nocache) t=$(wall_ms env STACKTOP_NO_CACHE=1 "$stacktop" dump -p "$target") ;;
		cold)
			rm -rf "$work/cold"
			t=$(wall_ms env XDG_CACHE_HOME="$work/cold" "$stacktop" dump -p "$target")
			;;
		warm) t=$(wall_ms env XDG_CACHE_HOME="$work/warm" "$stacktop" dump -p "$target") ;;
		esac
		times[$m]+="$t "
		cpus[$m]+="$(cat "$work/cpu") "
		line+=" $m $t ms ($(cat "$work/cpu") ms CPU);"
	done
	echo "$line"
done
echo "1-thread dump of sleep, median of $rounds rounds (wall ms, process start to exit; CPU ms, user + system):"
for m in "${modes[@]}"; do
	printf '  %-8s %6s ms wall %6s ms CPU\n' "$m" "$(tr ' ' '\n' <<<"${times[$m]}" | grep . | median)" \
		"$(tr ' ' '\n' <<<"${cpus[$m]}" | grep . | median)"
done
echo "cache size: $(du -sh "$work/warm" | cut -f1)"
kill "$target"

if [ -z "${SKIP_RECORD:-}" ]; then
	echo "record start (3 s at 999 Hz of cxxinline's spinning thread):"
	(cd "$root" && go test -run '^$' -bench BenchmarkRecordStart -benchtime 1x -count 3 ./internal/engine) |
		grep -E '^Benchmark'
fi
