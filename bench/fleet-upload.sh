#!/usr/bin/env bash
# fleet-upload.sh [SECONDS] [ROUNDS] [OUTAGE]: what continuous uploads cost
# the sampler, and what an endpoint that is down costs stacktop.
#
# 1. Rounds of `stacktop record -p` on the split target at 99 Hz for
#    SECONDS (default 20), alternating without uploads and with --otlp to a
#    running OpenTelemetry Collector (testdata/otelcol, built here) and
#    --upload-interval 1s (fifteen times the default's upload work): the
#    achieved rate and the ticks missed, per round and on average.
# 2. An outage: --otlp to a port where nothing listens for OUTAGE seconds
#    (default 60), then a Collector starts there and recording goes on for
#    15 s. stacktop's resident memory is read every 5 s: it must stay flat
#    while the windows that do not fit the queue are dropped, and uploads
#    must resume (stacktop says so, and the summary counts sent and
#    dropped windows).
source "$(dirname "$0")/common.sh"
secs=${1:-20}
rounds=${2:-3}
outage=${3:-60}

build_collector

"$targets/split-sframe3" >/dev/null &
target=$!
sleep 0.5

port=$(free_port)
start_collector "$port"

# summary FILE: "achieved-Hz missed-ticks"
summary() {
	echo "$(sed -n 's/.*(\([0-9.]*\) Hz achieved.*/\1/p' "$1") $(sed -n 's/.*ticks missed: \([0-9]*\).*/\1/p' "$1")"
}
declare -A sum=()
if [ "$rounds" -gt 0 ]; then
echo "== achieved rate at 99 Hz, ${secs}s per run (loaded machines give lower figures for both)"
printf "%-6s %-22s %-22s\n" round "no upload (Hz, missed)" "--otlp 1s (Hz, missed)"
for r in $(seq "$rounds"); do
	"$stacktop" record -p "$target" --rate 99 --duration "${secs}s" -o "$work/a.pb.gz" 2>"$work/a.err"
	read -r ha ma < <(summary "$work/a.err")
	"$stacktop" record -p "$target" --rate 99 --duration "${secs}s" --otlp "127.0.0.1:$port" --upload-interval 1s -o "$work/b.pb.gz" 2>"$work/b.err"
	read -r hb mb < <(summary "$work/b.err")
	printf "%-6s %-22s %-22s\n" "$r" "$ha, $ma" "$hb, $mb"
	add ha "$ha"; add ma "$ma"; add hb "$hb"; add mb "$mb"
done
avg() { awk -v s="${sum[$1]}" -v n="$rounds" 'BEGIN{printf "%.1f", s/n}'; }
printf "%-6s %-22s %-22s\n" mean "$(avg ha), $(avg ma)" "$(avg hb), $(avg mb)"
grep 'uploads to' "$work/b.err" || true
fi
kill "$collector"; wait "$collector" 2>/dev/null || true

echo "== outage: the endpoint down for ${outage}s, then up for 15s (--upload-interval 1s)"
echo "   beside it, the same recording of a second split process without uploads (the baseline's memory)"
"$targets/split-sframe3" >/dev/null &
target2=$!
sleep 0.5
port=$(free_port)
"$stacktop" record -p "$target" --rate 99 --duration "$((outage + 15))s" --otlp "127.0.0.1:$port" --upload-interval 1s -o "$work/c.pb.gz" 2>"$work/c.err" &
rec=$!
"$stacktop" record -p "$target2" --rate 99 --duration "$((outage + 15))s" -o "$work/d.pb.gz" 2>"$work/d.err" &
base=$!
sleep 1
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo -; }
printf "  %-14s %-22s %-22s\n" time "--otlp RSS (kB)" "no upload RSS (kB)"
for t in $(seq 0 5 "$outage"); do
	printf "  %-14s %-22s %-22s\n" "${t}s (down)" "$(rss "$rec")" "$(rss "$base")"
	if [ "$t" -lt "$outage" ]; then sleep 5; fi
done
start_collector "$port"
for t in 5 10; do
	sleep 5
	printf "  %-14s %-22s %-22s\n" "$((outage + t))s (up)" "$(rss "$rec")" "$(rss "$base")"
done
wait "$rec" "$base"
grep -E 'unreachable|resumed|uploads to|samples in' "$work/c.err" | sed 's/^/  /'
kill "$collector" "$target" "$target2"
