#!/usr/bin/env bash
# rss-idle.sh [SECONDS] [THREADS] [EVERY]: stacktop's memory over a long
# `record --idle` of a many-thread process (manythreads THREADS 2: 2
# spinners, the rest blocked), at 99 Hz. Prints stacktop's RSS every EVERY
# seconds (default: 30 points over the run) with the live Go heap after the
# latest collection (GODEBUG=gctrace=1; RSS also holds the garbage the
# collector lets grow up to twice the live heap), then the growth per
# minute over the second half of the run (after the start-up
# allocations), and the live heap by allocation site (STACKTOP_MEMPROFILE,
# as of the run's last collection) when `go tool pprof` is at hand.
# Default: 1 hour (issue 21), 1,000 threads. Target: RSS flat after the
# first minutes (bounded caches), not growing with the length of the run.
source "$(dirname "$0")/common.sh"
secs=${1:-3600}
threads=${2:-1000}
every=${3:-$(( secs / 30 > 0 ? secs / 30 : 1 ))}
"$targets/manythreads-sframe3" "$threads" 2 >/dev/null &
mt=$!
sleep 2
GODEBUG=gctrace=1 STACKTOP_MEMPROFILE=$work/heap.pb.gz "$stacktop" record -q -p "$mt" --rate 99 --idle \
	--duration "${secs}s" -o "$work/idle.pb.gz" 2>"$work/gc.log" &
st=$!
echo "stacktop record --idle --rate 99 of $threads threads for ${secs}s; RSS every ${every}s"
declare -a ts=() rss=() live=()
start=$(date +%s)
while kill -0 "$st" 2>/dev/null; do
	kb=$(awk '/^VmRSS:/ { print $2 }' "/proc/$st/status" 2>/dev/null || true)
	[ -n "$kb" ] || break
	t=$(( $(date +%s) - start ))
	mb=$( (grep -o -- '->[0-9]* MB' "$work/gc.log" || true) | tail -1 | tr -dc '0-9')
	ts+=("$t")
	rss+=("$kb")
	live+=("${mb:-0}")
	printf 't=%5ds rss=%7.1f MiB live heap=%4s MB\n' "$t" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')" "${mb:-?}"
	sleep "$every"
done
wait "$st" || echo "stacktop exited with status $?"
n=${#ts[@]}
if [ "$n" -ge 4 ]; then
	h=$(( n / 2 ))
	awk -v t0="${ts[$h]}" -v r0="${rss[$h]}" -v t1="${ts[$((n - 1))]}" -v r1="${rss[$((n - 1))]}" 'BEGIN {
		printf "RSS growth over the second half (t=%ds..%ds): %.2f MiB/min (%.1f -> %.1f MiB)\n",
			t0, t1, (t1 > t0) ? (r1 - r0) / 1024 / ((t1 - t0) / 60) : 0, r0 / 1024, r1 / 1024 }'
	echo "live heap over the second half: ${live[$h]} -> ${live[$((n - 1))]} MB"
fi
if [ -s "$work/heap.pb.gz" ]; then
	echo "live heap at the end (inuse_space, top 8):"
	go tool pprof -sample_index=inuse_space -top -nodecount=8 "$stacktop" "$work/heap.pb.gz" 2>/dev/null | sed -n '/flat%/,$p' || true
fi
