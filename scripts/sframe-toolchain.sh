#!/usr/bin/env bash
# sframe-toolchain.sh: fetch GNU binutils that emit every SFrame version, without
# installing anything system-wide.
#
#   bookworm  binutils 2.40   SFrame V1            x86-64, aarch64
#   trixie    binutils 2.44   SFrame V2 (flags 1)  x86-64, aarch64
#   sid       binutils 2.46+  SFrame V3 (flags 5)  x86-64, aarch64, s390x
#
# Each suite gets a private apt state (its own sources.list, lists and cache
# directories), so the machine's apt configuration and package set are left
# alone. The .debs are fetched with `apt-get download`, unpacked with `dpkg -x`
# and every tool is run through its own suite's dynamic loader
# (ld-linux-x86-64.so.2 --library-path ...), so a tool never mixes its libc,
# libbfd or libsframe with the host's.
#
# V1 comes from bookworm fetched the same way rather than from the host's
# /usr/bin: the result is then the same on any x86-64 Linux host, whatever its
# own binutils version, and needs no root.
#
# The mirror is the Debian mirror already configured in /etc/apt; the suite
# lines reuse it. Release files of old snapshots may be expired, hence
# Acquire::Check-Valid-Until=false.
#
# Usage: scripts/sframe-toolchain.sh [DIR]
#   DIR defaults to ${STACKTOP_TC:-$HOME/.cache/stacktop-tc}.
#   Idempotent: a suite that is complete (DIR/<suite>/.ready) is not fetched
#   again; remove that file (or DIR) to refresh. Prints DIR on success.
#
# Layout afterwards, for suite in bookworm trixie sid:
#   DIR/<suite>/bin/<triplet>-{as,ld,readelf,objdump}   triplet: x86_64-linux-gnu,
#                                                     aarch64-linux-gnu, s390x-linux-gnu
#                                                     (s390x only in sid)
#   DIR/<suite>/gcc-<arch>/{as,ld}                    for `gcc -B DIR/<suite>/gcc-<arch>/`
#   DIR/<suite>/version                               `as --version` first line
set -euo pipefail

TC=${1:-${STACKTOP_TC:-$HOME/.cache/stacktop-tc}}
SUITES=${SFRAME_TC_SUITES:-"bookworm trixie sid"}
mkdir -p "$TC"
TC=$(cd "$TC" && pwd)

die() { echo "sframe-toolchain: $*" >&2; exit 1; }

command -v apt-get >/dev/null || die "apt-get not found (a Debian-like host is needed)"
command -v dpkg >/dev/null || die "dpkg not found"
[ "$(uname -m)" = x86_64 ] || die "the host must be x86-64 (the fetched tools are amd64 builds)"

# The Debian mirror from the machine's apt configuration: deb822 .sources
# files first, then one-line sources.list entries. Only the main archive
# (a URI ending in /debian) is used, not debian-security or third parties.
find_mirror() {
  local m=""
  m=$(grep -h -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
    tr ' ' '\n' | grep -E '^[a-z+]+://.*/debian/?$' | head -1 || true)
  if [ -z "$m" ]; then
    m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      grep -E '^deb[[:space:]]' | tr ' ' '\n' | grep -E '^[a-z+]+://.*/debian/?$' | head -1 || true)
  fi
  echo "${m%/}"
}

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$keyring" ] || die "$keyring missing (install debian-archive-keyring)"

# Triplets each suite provides; binutils-s390x in trixie has no SFrame support
# (2.44 gas has no s390x SFrame), bookworm's 2.40 neither.
triplets_of() {
  case $1 in
  sid) echo "x86_64-linux-gnu aarch64-linux-gnu s390x-linux-gnu" ;;
  *) echo "x86_64-linux-gnu aarch64-linux-gnu" ;;
  esac
}

setup_suite() {
  local suite=$1 S=$TC/$1
  if [ -e "$S/.ready" ]; then
    return 0
  fi
  [ -n "${mirror:-}" ] || mirror=$(find_mirror)
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt (need a URI ending in /debian)"

  local A=$S/apt R=$S/root
  rm -rf "$S/debs" "$R" "$S/bin"
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$S/debs" "$R" "$S/bin"
  echo "deb [signed-by=$keyring] $mirror $suite main" >"$A/sources.list"
  local O=(-o Dir::Etc::sourcelist="$A/sources.list" -o Dir::Etc::sourceparts=-
    -o Dir::State::lists="$A/lists" -o Dir::State::status=/dev/null
    -o Dir::Cache="$A/cache" -o Debug::NoLocking=1
    -o Acquire::Check-Valid-Until=false -o APT::Architecture=amd64
    -o APT::Architectures::=amd64)
  apt-get "${O[@]}" update -qq >/dev/null || die "$suite: apt-get update failed"

  # The binutils cross packages plus their whole run-time closure (libc6,
  # libbfd, libsframe, libctf, libzstd, ...). Resolving the closure with apt
  # keeps the script working across library renames (t64, soname bumps).
  local roots="" t
  for t in $(triplets_of "$suite"); do roots="$roots binutils-${t//_/-}"; done
  local want
  want=$(apt-cache "${O[@]}" depends --recurse --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances $roots |
    grep -E '^[a-z0-9]' | sort -u)
  # Drop virtual names (they have no candidate to download).
  local real="" p
  for p in $want; do
    if apt-cache "${O[@]}" show "$p" >/dev/null 2>&1; then real="$real $p"; fi
  done
  echo "$suite: fetching$real" >&2
  (cd "$S/debs" && apt-get "${O[@]}" download $real 2>&1 | grep -v unsandboxed >&2) ||
    die "$suite: apt-get download failed"
  local d
  for d in "$S"/debs/*.deb; do dpkg -x "$d" "$R"; done

  local ldso
  ldso=$(ls "$R"/usr/lib64/ld-linux-x86-64.so.2 "$R"/lib64/ld-linux-x86-64.so.2 \
    "$R"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 2>/dev/null | head -1 || true)
  [ -n "$ldso" ] || die "$suite: no ld-linux-x86-64.so.2 in the unpacked libc6"
  local libs="$R/usr/lib/x86_64-linux-gnu:$R/lib/x86_64-linux-gnu"
  local tool arch
  for t in $(triplets_of "$suite"); do
    for tool in as ld readelf objdump; do
      [ -x "$R/usr/bin/$t-$tool" ] || die "$suite: $t-$tool missing after unpacking"
      printf '#!/bin/sh\nexec "%s" --library-path "%s" "%s" "$@"\n' \
        "$ldso" "$libs" "$R/usr/bin/$t-$tool" >"$S/bin/$t-$tool"
      chmod +x "$S/bin/$t-$tool"
    done
    arch=${t%%-*}
    mkdir -p "$S/gcc-$arch"
    ln -sfn "$S/bin/$t-as" "$S/gcc-$arch/as"
    ln -sfn "$S/bin/$t-ld" "$S/gcc-$arch/ld"
    "$S/bin/$t-as" --version >/dev/null || die "$suite: $t-as does not run"
  done
  "$S/bin/x86_64-linux-gnu-as" --version | head -1 >"$S/version"
  rm -rf "$S/debs" "$A/cache/archives"
  touch "$S/.ready"
}

for suite in $SUITES; do
  setup_suite "$suite"
  echo "$suite: $(cat "$TC/$suite/version")" >&2
done
echo "$TC"
