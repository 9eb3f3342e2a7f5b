# common.sh: sourced by the bench scripts. Builds stacktop and the C helpers
# into a temporary directory and provides helpers. Needs root (ptrace), gcc
# and go.
set -euo pipefail
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(git -C "$bench_dir" rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/stacktop" ./cmd/stacktop)
gcc -O2 -o "$work/ptrace-floor" "$bench_dir/ptrace-floor.c"
gcc -O2 -o "$work/cpuloop" "$bench_dir/cpuloop.c"
gcc -O2 -o "$work/gaploop" "$bench_dir/gaploop.c"
stacktop=$work/stacktop
targets=$root/testdata/targets/bin

# to_us VALUE: a Go duration (850ns, 12.3µs, 1.2ms, 2s) in microseconds.
to_us() {
	awk -v d="$1" 'BEGIN {
		if (d ~ /µs$/ || d ~ /us$/) { sub(/[µu]s$/, "", d); print d + 0 }
		else if (d ~ /ns$/) { sub(/ns$/, "", d); print d / 1000 }
		else if (d ~ /ms$/) { sub(/ms$/, "", d); print d * 1000 }
		else if (d ~ /s$/) { sub(/s$/, "", d); print d * 1e6 }
		else print d }'
}

# pause_field SUMMARY N: the Nth duration of stacktop's pause line
# (1 median, 2 p99, 3 max stop->resume; 4 5 6 the same from interrupt).
pause_field() {
	local d
	d=$(grep 'pause per thread sample' <<<"$1" | grep -o '[0-9.]*[µnm]*s[,;]' | sed -n "$2p" | tr -d ',;')
	to_us "$d"
}
