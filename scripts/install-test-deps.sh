#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the tests compare against, only those
# missing: libc6-dbg (libc's separate debug file: start_thread, clone3 and
# DWARF lines), binutils (addr2line, objcopy: the oracle), g++, gdb,
# elfutils (eu-stack, for the benchmarks), tmux (the terminal UI test),
# xz-utils (the MiniDebugInfo test), python3 (a distribution program the
# stack comparison runs), chromium (the flame graph's script, run headless
# in export's browser test), zsh and fish (the completion scripts' tests),
# debuginfod (the server the debuginfod client test starts), linux-perf and
# time (bench/perf-backends.sh compares with perf record and measures each
# sampler's CPU), and the s390x
# and arm64 cross compilers with their libc (big-endian CFI compared with
# s390x-linux-gnu-readelf; the frame-0 link-register rules on real arm64 and
# s390x code). Needs root; without apt-get it says so and does nothing.
set -euo pipefail
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
	echo "install-test-deps: no apt-get; install libc6-dbg (or your distribution's glibc debuginfo), binutils, g++, gdb, elfutils by hand" >&2
	exit 0
fi
missing=()
for pkg in libc6-dbg binutils g++ gdb elfutils tmux xz-utils python3 chromium zsh fish debuginfod \
	gcc-s390x-linux-gnu libc6-dev-s390x-cross gcc-aarch64-linux-gnu libc6-dev-arm64-cross linux-perf time; do
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$pkg")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
echo "install-test-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}"
