#!/usr/bin/env bash
# soak.sh [SECONDS] [EVERY]: stacktop's memory and descriptors over a long
# run against a churning target, sampled every EVERY seconds (default: one
# hour, every 60 s).
#
# The target is `exiter churn` (four creators making and joining
# short-lived threads back to back: threads appear and disappear at a high
# rate, the case where per-thread state could leak). Two stacktops sample
# one such target each for the whole run: `record --otlp` to a real
# OpenTelemetry Collector (testdata/otelcol, built here) with the default
# 15 s upload interval, and `top` in a tmux terminal. Each line gives their resident memory
# (VmRSS) and open descriptors; at the end, the growth from the first
# sample after warm-up (a tenth of the run, at least one sample) to the
# last, which must be flat: a few percent of RSS (the Go heap's own
# breathing) and no descriptors.
source "$(dirname "$0")/common.sh"
secs=${1:-3600}
every=${2:-60}
command -v tmux >/dev/null || { echo "soak.sh needs tmux" >&2; exit 1; }

build_collector
port=$(free_port)
start_collector "$port"

# One target each: a process has one tracer.
nice -n 10 "$targets/exiter-fp" churn >/dev/null &
target=$!
nice -n 10 "$targets/exiter-fp" churn >/dev/null &
target2=$!
sleep 1

"$stacktop" record -p "$target" --otlp "127.0.0.1:$port" --duration "${secs}s" 2>"$work/record.err" &
rec=$!
session="stacktop-soak-$$"
tmux -L "$session" new-session -d -x 120 -y 40 -s "$session" "$stacktop top -p $target2"
stop_top() { tmux -L "$session" kill-server 2>/dev/null || true; }
trap 'stop_top; cleanup' EXIT
top=
for _ in $(seq 100); do
	top=$(pgrep -n -f "^$stacktop top -p $target2\$" || true)
	[ -n "$top" ] && break
	sleep 0.1
done
[ -n "$top" ] || { echo "top did not start:" >&2; tmux -L "$session" capture-pane -p -t "$session" >&2; exit 1; }

rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo -; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
threads() { ls "/proc/$target/task" 2>/dev/null | wc -l; }
printf "%-8s %-18s %-12s %-18s %-12s %s\n" time "record RSS (kB)" "record fds" "top RSS (kB)" "top fds" "threads now"
warm=$(( secs / 10 / every * every ))
[ "$warm" -lt "$every" ] && warm=$every
declare -A first=() last=()
for t in $(seq 0 "$every" "$((secs - every))"); do
	r=$(rss "$rec"); rf=$(fds "$rec"); p=$(rss "$top"); pf=$(fds "$top")
	printf "%-8s %-18s %-12s %-18s %-12s %s\n" "${t}s" "$r" "$rf" "$p" "$pf" "$(threads)"
	if [ "$t" -ge "$warm" ] && [ -z "${first[rr]:-}" ]; then first=([rr]=$r [rf]=$rf [tr]=$p [tf]=$pf); fi
	last=([rr]=$r [rf]=$rf [tr]=$p [tf]=$pf)
	sleep "$every"
done
growth() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%+.1f%%", 100 * (b - a) / a; else print "-" }'; }
echo "after warm-up (${warm}s) to the end: record RSS $(growth "${first[rr]}" "${last[rr]}"), fds ${first[rf]} -> ${last[rf]};" \
	"top RSS $(growth "${first[tr]}" "${last[tr]}"), fds ${first[tf]} -> ${last[tf]}"
stop_top
wait "$rec" || true
grep -E 'samples in|uploads to|truncated' "$work/record.err" | sed 's/^/  /'
echo "  Collector received $(stat -c %s "$work/received.pb" 2>/dev/null || echo 0) bytes"
