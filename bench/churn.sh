#!/usr/bin/env bash
# churn.sh [SECONDS]: the rate stacktop achieves at 999 Hz on a process that
# creates and ends threads continuously (exiter churn), against what it
# asked for. Every thread exit is a wait event the tracer handles; if that
# costs O(threads) the ticks overrun and the achieved rate collapses.
# Target: the achieved rate within 10% of the rate asked for.
source "$(dirname "$0")/common.sh"
secs=${1:-5}
"$targets/exiter-sframe3" churn >/dev/null &
ex=$!
sleep 1
for rate in 99 999; do
	sum=$("$stacktop" record -p "$ex" --rate "$rate" --duration "${secs}s" -o "$work/c.folded" 2>&1)
	echo "$rate Hz: $(grep -o '[0-9.]* Hz achieved' <<<"$sum"), $(grep -o 'thread samples:.*' <<<"$sum")"
done
