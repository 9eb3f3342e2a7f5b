#!/usr/bin/env bash
# signal-exit.sh [RUNS] [SIGNAL] [TARGET...]: how soon `stacktop record`
# stops sampling after SIGTERM (or SIGINT): the time from the kill to the
# moment no thread of the target has a TracerPid (every thread detached,
# the target no longer slowed), and to stacktop's exit (the file written
# after). Prints each run and the medians.
#
# The target is, by default, bench/faultee.c with 4 spinning threads (no
# DWARF); `goprog` (testdata/targets/bin/goprog, a Go program with large
# DWARF lines, whose loading the end of a recording may wait for) shows the
# cost of lines still pending at the signal. Each run starts the target,
# records it at 199 Hz for 1.5 s, sends the signal and polls
# /proc/PID/task/*/status (about every 0.5 ms, in the shell).
# STACKTOP=PATH measures another build (e.g. an older commit's) instead.
source "$(dirname "$0")/common.sh"
stacktop=${STACKTOP:-$stacktop}
runs=${1:-10}
sig=${2:-TERM}
shift $(( $# >= 2 ? 2 : $# ))
gcc -O2 -pthread -o "$work/faultee" "$bench_dir/faultee.c"
target=("$@")
[ ${#target[@]} -gt 0 ] || target=("$work/faultee" spin 4 "$work/tgt.txt")
[ "${target[0]}" = goprog ] && target=("$targets/goprog")

# traced PID: 0 when no thread of PID has a tracer (or PID is gone).
traced() {
	local s k v
	for s in /proc/"$1"/task/*/status; do
		while read -r k v; do
			if [ "$k" = TracerPid: ]; then
				[ "$v" = 0 ] || return 0
				break
			fi
		done 2>/dev/null <"$s"
	done
	return 1
}
# gone PID: PID has exited (a zombie, or reaped).
gone() {
	local pid comm state
	read -r pid comm state _ 2>/dev/null <"/proc/$1/stat" || return 0
	[ "$state" = Z ]
}
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) * 1000 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "stacktop record -p PID --rate 199 on: ${target[*]}; SIG$sig after 1.5 s; $runs runs"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
detach_ms=() exit_ms=()
for i in $(seq "$runs"); do
	"${target[@]}" >/dev/null 2>&1 &
	tgt=$!
	sleep 0.5
	"$stacktop" record -q -p "$tgt" --rate 199 -o "$work/p.pb.gz" 2>"$work/st.err" &
	st=$!
	for _ in $(seq 250); do traced "$tgt" && break; sleep 0.02; done
	sleep 1.5
	t0=$EPOCHREALTIME
	kill -"$sig" "$st"
	while traced "$tgt"; do :; done
	t1=$EPOCHREALTIME
	until gone "$st"; do :; done
	t2=$EPOCHREALTIME
	code=0
	wait "$st" || code=$?
	d=$(ms "$t0" "$t1") e=$(ms "$t0" "$t2")
	detach_ms+=("$d") exit_ms+=("$e")
	printf 'run %2d: untraced after %7s ms, stacktop exited (%d) after %7s ms\n' "$i" "$d" "$code" "$e"
	kill -9 "$tgt" 2>/dev/null || true
	wait "$tgt" 2>/dev/null || true
done
printf 'median: untraced after %s ms, exit after %s ms (SIG%s, %d runs)\n' \
	"$(printf '%s\n' "${detach_ms[@]}" | median)" "$(printf '%s\n' "${exit_ms[@]}" | median)" "$sig" "$runs"

# The floor: bench/sigfloor (a Go program that only exits on the signal)
# beside the same target; its kill-to-exit time is what the scheduler and
# Go's signal delivery cost before any of stacktop's code runs.
(cd "$root" && go build -o "$work/sigfloor" ./bench/sigfloor)
floor_ms=()
for i in $(seq "$runs"); do
	"${target[@]}" >/dev/null 2>&1 &
	tgt=$!
	"$work/sigfloor" &
	fl=$!
	sleep 2
	t0=$EPOCHREALTIME
	kill -"$sig" "$fl"
	until gone "$fl"; do :; done
	t1=$EPOCHREALTIME
	wait "$fl" 2>/dev/null || true
	floor_ms+=("$(ms "$t0" "$t1")")
	kill -9 "$tgt" 2>/dev/null || true
	wait "$tgt" 2>/dev/null || true
done
printf 'floor (bench/sigfloor exits on SIG%s beside the same target): median %s ms\n' "$sig" "$(printf '%s\n' "${floor_ms[@]}" | median)"
