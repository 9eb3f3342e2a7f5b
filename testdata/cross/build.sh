#!/usr/bin/env bash
# build.sh: cross-build the fixture spin.c for s390x and aarch64 into
# testdata/cross/bin/ (not committed: the committed snapshots carry what the
# unit tests need; the binaries are rebuilt for the emulated runs).
#
#   s390x-sframe     -O2, SFrame V3 (sid gas --gsframe-3)
#   s390x-backchain  -O2 -mbackchain, no .sframe (the back-chain path)
#   arm64-sframe     -O2 -fomit-frame-pointer -mbranch-protection=pac-ret,
#                    SFrame V3 (mangled-RA rows)
#   arm64-fp         -O2 -fno-omit-frame-pointer -mbranch-protection=pac-ret,
#                    no .sframe (x29 frame records; leaves keep none, so a
#                    leaf's caller comes from x30)
#
# All are static (no shared libraries in the emulated initramfs), non-PIE.
# The SFrame variants are assembled and linked by sid binutils fetched by
# scripts/sframe-toolchain.sh (the host's 2.40 has no s390x SFrame); the
# others by the host's cross binutils. Installs the Debian cross compilers
# when missing (root only).
#
# Usage: testdata/cross/build.sh [TOOLCHAIN_DIR]
#   TOOLCHAIN_DIR defaults to ${STACKTOP_TC:-$HOME/.cache/stacktop-tc}.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$here/bin
tc_dir=${1:-${STACKTOP_TC:-$HOME/.cache/stacktop-tc}}

die() { echo "cross/build.sh: $*" >&2; exit 1; }

need=()
for t in s390x aarch64; do
	command -v $t-linux-gnu-gcc >/dev/null || need+=(gcc-$t-linux-gnu)
done
[ -e /usr/s390x-linux-gnu/lib/libc.a ] || need+=(libc6-dev-s390x-cross)
[ -e /usr/aarch64-linux-gnu/lib/libc.a ] || need+=(libc6-dev-arm64-cross)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing ${need[*]} (install them, or run as root)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

tc=$(SFRAME_TC_SUITES=sid "$root/scripts/sframe-toolchain.sh" "$tc_dir" | tail -1)
[ -d "$tc/sid" ] || die "scripts/sframe-toolchain.sh did not set up $tc/sid"

mkdir -p "$out"
common=(-std=gnu11 -O2 -static -pthread -Wall -Wextra -fno-stack-protector)

build() { # build NAME TRIPLET-ARCH SUITE|host FLAGS...
	local name=$1 arch=$2 suite=$3
	shift 3
	local b=()
	[ "$suite" = host ] || b=(-B "$tc/$suite/gcc-$arch/")
	"$arch-linux-gnu-gcc" "${b[@]}" "${common[@]}" "$@" -o "$out/spin-$name" "$here/spin.c"
	local has=no
	if "$tc/sid/bin/$arch-linux-gnu-readelf" -SW "$out/spin-$name" | grep -q '\.sframe'; then has=yes; fi
	case $name in
	*-sframe) [ $has = yes ] || die "spin-$name has no .sframe" ;;
	*) [ $has = no ] || die "spin-$name has a .sframe but must not" ;;
	esac
	echo "spin-$name: $(stat -c %s "$out/spin-$name") bytes, .sframe: $has"
}

build s390x-sframe s390x sid -Wa,--gsframe-3
build s390x-backchain s390x host -mbackchain
build arm64-sframe aarch64 sid -fomit-frame-pointer -mbranch-protection=pac-ret -Wa,--gsframe-3
build arm64-fp aarch64 host -fno-omit-frame-pointer -mbranch-protection=pac-ret
