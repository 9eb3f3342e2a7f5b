#!/usr/bin/env bash
# go-first-dump.sh [ROUNDS]: what the first dump of a Go program costs, with
# an empty cache (symbol tables, DWARF, learned names all built from the
# binary) against a warm one. Dumps testdata/targets/bin/goprog (8 threads,
# DWARF, the Go runtime's units) ROUNDS times each way (default 5),
# alternating, and prints each run's wall and CPU (user+sys) time and the
# medians. The issue's target: empty-cache CPU under 1 s, within 2x of
# the warm dump.
source "$(dirname "$0")/common.sh"

rounds=${1:-5}
"$targets/goprog" >/dev/null &
pid=$!
sleep 1

# run LABEL CACHEDIR: one dump, "LABEL wall_s cpu_s".
run() {
	XDG_CACHE_HOME=$2 /usr/bin/time -f "$1 %e %U %S" "$stacktop" dump -p "$pid" >/dev/null 2>"$work/time" || true
	tail -1 "$work/time" | awk '{printf "%s %.3f %.3f\n", $1, $2, $3 + $4}'
}

mkdir -p "$work/warm"
run warm "$work/warm" >/dev/null # fills the warm cache
: >"$work/runs"
for r in $(seq "$rounds"); do
	rm -rf "$work/empty"
	run empty "$work/empty" | tee -a "$work/runs"
	run warm "$work/warm" | tee -a "$work/runs"
done
# median FIELD KIND: the median of column FIELD of KIND's runs.
median() { grep "^$2 " "$work/runs" | awk -v f="$1" '{print $f}' | sort -n | awk '{a[NR] = $1} END {printf "%.3f", (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2}'; }
for kind in empty warm; do
	echo "median $kind: wall $(median 2 "$kind") s, CPU $(median 3 "$kind") s ($rounds runs)"
done
