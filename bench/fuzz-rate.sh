#!/usr/bin/env bash
# fuzz-rate.sh [SECONDS] [PATTERN]: runs every Fuzz target of the module
# (or those whose name matches PATTERN) for SECONDS (default 5) with one
# worker and prints its executions per second. Goal: >= 10,000/s where the
# code allows. A rate near 0 with "0/sec" at the end means the fuzzer spent
# its time minimising a new input (cost quadratic in the input's size):
# keep seeds small (a few hundred bytes).
set -euo pipefail
root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
secs=${1:-5}
pattern=${2:-.}
cd "$root"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
grep -rn --include='*_test.go' '^func Fuzz' . | grep -E "$pattern" | while IFS=: read -r file _ decl; do
	name=$(sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/' <<<"$decl")
	pkg=./$(dirname "${file#./}")
	# A fresh fuzz cache: inputs cached by earlier runs (re-run first, and
	# of any size) would make the figure depend on the machine's history.
	out=$(go test -run '^$' -fuzz "^$name\$" -fuzztime "${secs}s" -parallel 1 "$pkg" \
		-args -test.fuzzcachedir="$cache/$name" 2>&1 || true)
	execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | awk '{ print $2 }')
	status=$(grep -qE '^(--- FAIL|FAIL)' <<<"$out" && echo FAIL || echo ok)
	awk -v p="$pkg" -v n="$name" -v e="${execs:-0}" -v s="$secs" -v st="$status" \
		'BEGIN { printf "%-24s %-22s %9d execs %8.0f/s %s\n", p, n, e, e / s, st }'
done
