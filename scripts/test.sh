#!/usr/bin/env bash
# The project's test command (README "Test"): static checks (go vet, then
# scripts/lint.sh: gofmt and a pinned staticcheck), then every
# package's tests, including the live ptrace tests (they need root or
# CAP_SYS_PTRACE and gdb; without them those tests skip and say why), then,
# when CI=true or STACKTOP_EMU=1 (and as root), the live tests on s390x and
# arm64 kernels under QEMU (emu/run.sh: a few minutes each, downloads cached).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then
	echo "== test dependencies"
	./scripts/install-test-deps.sh
fi
# go vet and lint.sh (gofmt, the package table, staticcheck) side by side:
# each is mostly one CPU's type-checking. lint.sh's output comes after
# vet's.
echo "== go vet"
lintlog=$(mktemp)
./scripts/lint.sh >"$lintlog" 2>&1 &
lintpid=$!
vetrc=0
go vet ./... || vetrc=$?
lintrc=0
wait $lintpid || lintrc=$?
cat "$lintlog"
rm -f "$lintlog"
[ $vetrc = 0 ] && [ $lintrc = 0 ]
echo "== go test"
# One package at a time (-p 1): the live tests measure CPU splits and
# stop latencies of real targets, and on a 2-core machine two packages'
# targets running at once distort each other's figures. Within a package,
# the tests marked parallel (those that measure neither) run four at a
# time after the others: most of their time is spent waiting on a
# recording's duration, a terminal or a build.
go test -count=1 -p 1 -parallel 4 -timeout 20m ./...
if [ "$(id -u)" = 0 ] && { [ "${CI:-}" = true ] || [ "${STACKTOP_EMU:-}" = 1 ]; }; then
	# Prepared one after the other (apt and the fixtures' build share
	# state), booted side by side: each machine's CPUs are one host
	# thread's work at a time, and the suite has two. A boot's log is
	# printed whole when it ends.
	for arch in s390x arm64; do
		echo "== emulation: preparing $arch"
		EMU_STEPS=prepare ./emu/run.sh "$arch"
	done
	logs=$(mktemp -d)
	trap 'rm -rf "$logs"' EXIT
	pids=()
	for arch in s390x arm64; do
		EMU_STEPS=boot ./emu/run.sh "$arch" >"$logs/$arch" 2>&1 &
		pids+=($!)
	done
	failed=0
	i=0
	for arch in s390x arm64; do
		if wait "${pids[$i]}"; then status=PASS; else status=FAIL failed=1; fi
		echo "== emulation: $arch: $status"
		cat "$logs/$arch"
		i=$((i + 1))
	done
	[ $failed = 0 ]
fi
