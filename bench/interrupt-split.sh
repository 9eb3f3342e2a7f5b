#!/usr/bin/env bash
# interrupt-split.sh [ROUNDS] [SECONDS]: does a recording cut short read
# what a full one reads? Records testdata split (75% of its CPU in a->hot,
# 25% in b->cold) at 499 Hz and stops it with SIGINT after SECONDS
# (default 2), then records the same span with --duration, ROUNDS times
# (default 8), alternating, and prints each share of a->hot and the median
# of each kind. The issue's target: the interrupted runs read 75 +- 3.
source "$(dirname "$0")/common.sh"

rounds=${1:-8}
secs=${2:-2}

share() { awk '/a;hot/ {h += $NF} /b;cold/ {c += $NF} END {printf "%.1f %d\n", 100 * h / (h + c), h + c}' "$1"; }

"$targets/split-sframe3" >"$work/ready" &
pid=$!
for _ in $(seq 100); do grep -q ready "$work/ready" && break; sleep 0.05; done
: >"$work/int" && : >"$work/dur"
for r in $(seq "$rounds"); do
	"$stacktop" record -p "$pid" --rate 499 --format folded -o "$work/int.folded" -q &
	rec=$!
	sleep "$secs"
	kill -INT "$rec"
	wait "$rec"
	share "$work/int.folded" | tee -a "$work/int" | sed "s/^/round $r interrupted: a->hot % of samples: /"
	"$stacktop" record -p "$pid" --rate 499 --duration "${secs}s" --format folded -o "$work/dur.folded" -q
	share "$work/dur.folded" | tee -a "$work/dur" | sed "s/^/round $r --duration:  a->hot % of samples: /"
done
for kind in int dur; do
	sort -n "$work/$kind" | awk -v k="$kind" '{a[NR] = $1} END {printf "median %s: %.1f%% (min %.1f, max %.1f)\n", k, (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2, a[1], a[NR]}'
done
