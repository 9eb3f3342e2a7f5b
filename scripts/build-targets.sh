#!/usr/bin/env bash
# build-targets.sh: rebuild the test target binaries in testdata/targets/bin/.
#
# The binaries are committed, so tests need neither network nor a particular
# binutils; run this only after changing a source in testdata/targets/.
#
# Every target (chains, manythreads, exiter, split, signals) is built four ways
# (libcblock, cxxinline and goprog are built once each; see below):
#
#   NAME-sframe1  -O2 -fomit-frame-pointer, SFrame V1  (bookworm gas 2.40, --gsframe)
#   NAME-sframe2  -O2 -fomit-frame-pointer, SFrame V2  (trixie gas 2.44, --gsframe)
#   NAME-sframe3  -O2 -fomit-frame-pointer, SFrame V3  (sid gas 2.46+, --gsframe-3)
#   NAME-fp       -O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer,
#                 no .sframe (the frame-pointer unwinding path)
#
# Each variant is assembled and linked by its own suite's as and ld (gcc -B
# points at the wrapper directory scripts/sframe-toolchain.sh sets up); the
# FP variant uses trixie's, which emit no SFrame unless asked. The compiler,
# C start files and libc are the host's: build on Debian 12 (gcc 12, glibc
# 2.36) or older so the binaries run there; the script refuses a result that
# needs a glibc symbol version newer than 2.36.
#
# No -g: gdb then prints an address for every frame (see internal/testsupport/gdbstack)
# and the files stay small. Symbol tables are kept for symbolization.
#
# Expected warning: trixie's gas (V2) says "skipping SFrame FDE; non-SP/FP
# register 10 in .cfi_def_cfa" for drap_frame: V2 cannot describe a DRAP
# frame, so chains-sframe2 has no FDE for it (V3 describes it with a
# flexible FDE).
#
# Usage: scripts/build-targets.sh [TOOLCHAIN_DIR | --host-only]
#   --host-only rebuilds only the targets the host's gcc builds alone.
#   TOOLCHAIN_DIR defaults to ${STACKTOP_TC:-$HOME/.cache/stacktop-tc} and is
#   passed to scripts/sframe-toolchain.sh.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/testdata/targets
out=$src/bin
tc_dir=${1:-${STACKTOP_TC:-$HOME/.cache/stacktop-tc}}

die() { echo "build-targets: $*" >&2; exit 1; }

[ "$(uname -m)" = x86_64 ] || die "the targets are x86-64 only"
command -v gcc >/dev/null || die "gcc not found"

common=(-std=c11 -O2 -pthread -Wall -Wextra -fPIE -pie
	-fasynchronous-unwind-tables -fno-stack-protector -fcf-protection=none
	-fno-stack-clash-protection)
omit_fp=(-fomit-frame-pointer)
keep_fp=(-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer)

declare -A sources=(
	[chains]="chains.c chains_asm.s"
	[manythreads]="manythreads.c"
	[exiter]="exiter.c"
	[split]="split.c"
	[signals]="signals.c"
)

# variant -> "suite flags..." and the SFrame version readelf must report
declare -A variant_suite=([sframe1]=bookworm [sframe2]=trixie [sframe3]=sid [fp]=trixie)
declare -A variant_version=([sframe1]=1 [sframe2]=2 [sframe3]=3 [fp]=none)

variant_flags() {
	case $1 in
	sframe1 | sframe2) echo "${omit_fp[*]} -Wa,--gsframe" ;;
	sframe3) echo "${omit_fp[*]} -Wa,--gsframe-3" ;;
	fp) echo "${keep_fp[*]}" ;;
	esac
}

# check_sframe FILE VARIANT: the .sframe version is the one asked for, or
# there is no .sframe at all for the FP variant.
check_sframe() {
	local f=$1 v=$2 suite=${variant_suite[$2]} want=${variant_version[$2]}
	local readelf=$tc/$suite/bin/x86_64-linux-gnu-readelf
	if [ "$want" = none ]; then
		if "$readelf" -SW "$f" | grep -q '\.sframe'; then
			die "$f: has a .sframe section but must not"
		fi
		return
	fi
	local got
	got=$("$readelf" --sframe "$f" | sed -n 's/.*Version: SFRAME_VERSION_\([0-9]*\).*/\1/p' | head -1)
	[ "$got" = "$want" ] || die "$f: SFrame version '${got:-missing}', want $want"
}

# check_glibc FILE: no symbol version newer than GLIBC_2.36 is needed.
check_glibc() {
	local newest
	newest=$({ readelf -VW "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//'; echo 2.36; } | sort -V | tail -1)
	[ "$newest" = 2.36 ] || die "$1: needs GLIBC_$newest, newer than Debian 12's 2.36"
}

mkdir -p "$out"

# The targets built by the host's gcc alone (no SFrame), for the on-CPU
# weighting and the walk's end rules and naming:
#
#   cpusplit-fp   threads at 100%, 25%, 5% and ~0% of a CPU (frame pointers)
#   sigalt-fp     a signal handler on a sigaltstack (frame pointers + CFI)
#   sigalt-cfi    the same, -fomit-frame-pointer (CFI only)
#   bigframe-cfi  40 KiB frames over blocked threads (CFI only)
#   bigframe-fp   the same with frame pointers (and CFI)
#   deeprec-cfi   a thread 2,000 frames deep in a recursion (CFI only)
#   nocfi         neither CFI nor frame pointers: -fomit-frame-pointer
#                 -fno-asynchronous-unwind-tables -fno-unwind-tables, and
#                 .eh_frame/.eh_frame_hdr removed from the linked program
#   perfmap       JIT-style code in anonymous memory, listed in
#                 /tmp/perf-PID.map (frame pointers + CFI)
#   i386          a static 32-bit x86 program (as --32, ld -m elf_i386: no
#                 multilib C library), which stacktop must refuse
host_targets() {
	local tmp
	tmp=$(mktemp -d)
	local host=(-std=c11 -O2 -pthread -Wall -Wextra -fPIE -pie -fno-stack-protector
		-fcf-protection=none -fno-stack-clash-protection)
	(
		cd "$src"
		gcc "${host[@]}" -fasynchronous-unwind-tables "${keep_fp[@]}" -o "$tmp/cpusplit-fp" cpusplit.c
		gcc "${host[@]}" -fasynchronous-unwind-tables "${keep_fp[@]}" -o "$tmp/sigalt-fp" sigalt.c
		gcc "${host[@]}" -fasynchronous-unwind-tables "${omit_fp[@]}" -o "$tmp/sigalt-cfi" sigalt.c
		gcc "${host[@]}" -fasynchronous-unwind-tables "${omit_fp[@]}" -o "$tmp/bigframe-cfi" bigframe.c
		gcc "${host[@]}" -fasynchronous-unwind-tables "${keep_fp[@]}" -o "$tmp/bigframe-fp" bigframe.c
		gcc "${host[@]}" -fasynchronous-unwind-tables "${omit_fp[@]}" -o "$tmp/deeprec-cfi" deeprec.c
		gcc "${host[@]}" "${omit_fp[@]}" -fno-asynchronous-unwind-tables -fno-unwind-tables \
			-o "$tmp/nocfi" nocfi.c
		objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr "$tmp/nocfi"
		gcc "${host[@]}" -fasynchronous-unwind-tables "${keep_fp[@]}" -o "$tmp/perfmap" perfmap.c
		as --32 -o "$tmp/i386.o" i386.s
		ld -m elf_i386 -o "$tmp/i386" "$tmp/i386.o"
		rm "$tmp/i386.o"
	)
	for f in "$tmp"/*; do
		check_glibc "$f"
		mv "$f" "$out/"
	done
	rmdir "$tmp"
}
if [ "$tc_dir" = --host-only ]; then
	host_targets
	exit 0
fi

tc=$(SFRAME_TC_SUITES="bookworm trixie sid" "$root/scripts/sframe-toolchain.sh" "$tc_dir" | tail -1)
[ -d "$tc" ] || die "scripts/sframe-toolchain.sh did not print a directory"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cd "$src" # relative source names: nothing of this machine's paths in the files
for name in chains manythreads exiter split signals; do
	for v in sframe1 sframe2 sframe3 fp; do
		suite=${variant_suite[$v]}
		# shellcheck disable=SC2046,SC2086
		gcc -B "$tc/$suite/gcc-x86_64/" "${common[@]}" $(variant_flags "$v") \
			-o "$tmp/$name-$v" ${sources[$name]} 2> >(grep -v -e 'Assembler messages' \
				-e 'skipping SFrame FDE; non-SP/FP register 10' >&2)
		check_sframe "$tmp/$name-$v" "$v"
		check_glibc "$tmp/$name-$v"
		mv "$tmp/$name-$v" "$out/$name-$v"
	done
done

# The distribution-shaped targets, one build each:
#
#   libcblock-sframe3      threads blocked in libc, the vDSO, the PLT and
#                          lazy binding; SFrame V3 (sid), -z lazy, with its
#                          IFUNC library libcblock-lazy.so (found through
#                          RUNPATH $ORIGIN)
#   cxxinline-sframe3      C++ -O2 -g (inlined templates and a lambda);
#                          SFrame V3; the DWARF holds no path of this machine
#                          (-fdebug-prefix-map)
#   goprog                 Go (frame pointers and .gopclntab), built by the
#                          host's Go toolchain with -trimpath
lazy_flags=(-std=c11 -O2 -pthread -Wall -Wextra -fasynchronous-unwind-tables
	-fno-stack-protector -fcf-protection=none -fno-stack-clash-protection
	-fomit-frame-pointer -Wa,--gsframe-3)
gcc -B "$tc/sid/gcc-x86_64/" "${lazy_flags[@]}" -fPIC -shared \
	-Wl,-soname,libcblock-lazy.so -o "$tmp/libcblock-lazy.so" libcblock-lazy.c
gcc -B "$tc/sid/gcc-x86_64/" "${lazy_flags[@]}" -fPIE -pie -Wl,-z,lazy \
	-Wl,-rpath,'$ORIGIN' -o "$tmp/libcblock-sframe3" libcblock.c "$tmp/libcblock-lazy.so"
g++ -B "$tc/sid/gcc-x86_64/" -std=c++17 -O2 -g -pthread -Wall -Wextra -fPIE -pie \
	-fno-stack-protector -fcf-protection=none -fno-stack-clash-protection \
	-fomit-frame-pointer -Wa,--gsframe-3 -fdebug-prefix-map="$src"=. \
	-o "$tmp/cxxinline-sframe3" cxxinline.cc
for f in libcblock-lazy.so libcblock-sframe3 cxxinline-sframe3; do
	check_sframe "$tmp/$f" sframe3
	check_glibc "$tmp/$f"
	mv "$tmp/$f" "$out/$f"
done
if command -v go >/dev/null; then
	(cd goprog && GOFLAGS= CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$tmp/goprog" .)
	mv "$tmp/goprog" "$out/goprog"
else
	echo "build-targets: go not found; goprog not rebuilt" >&2
fi

host_targets

for f in "$out"/*; do
	printf '%-24s %7d bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"
done
