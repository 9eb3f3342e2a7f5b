#!/usr/bin/env bash
# Builds stacktop and runs it on a workload the project ships, so a first
# run shows it working without hunting for a PID:
#   ./scripts/demo.sh          # stacktop top on the workload (dump without a terminal)
#   ./scripts/demo.sh dump     # one dump of every thread instead
# The workload's threads spin and block in known call chains; it is built
# with SFrame V3 (see testdata/targets/README.md). It is stopped on exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p bin
CGO_ENABLED=0 go build -o bin/stacktop ./cmd/stacktop # no C library: smaller and quicker to start

sudo=""
if [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)" != 0 ]; then
	echo "demo: kernel.yama.ptrace_scope is not 0: running stacktop with sudo" >&2
	sudo=sudo
fi

testdata/targets/bin/chains-sframe3 >/dev/null &
workload=$!
trap 'kill $workload 2>/dev/null || true' EXIT
sleep 0.3 # let its threads reach their call chains

mode=${1:-top}
if [ "$mode" = top ] && [ -t 0 ] && [ -t 1 ] && bin/stacktop top -h >/dev/null 2>&1; then
	$sudo bin/stacktop top -p "$workload"
else
	$sudo bin/stacktop dump -p "$workload" || true
fi
