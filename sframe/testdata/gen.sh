#!/usr/bin/env bash
# Regenerates every SFrame fixture object/executable in this directory and its
# golden `readelf --sframe` output (NAME.readelf.txt) from the sources in src/.
#
# Usage: sframe/testdata/gen.sh [TOOLCHAIN_DIR]
# The toolchains come from scripts/sframe-toolchain.sh (binutils 2.40 from
# Debian bookworm for V1, 2.44 from trixie for V2, sid's 2.46+ for V3); they
# are fetched on first use. No compiler is needed: the C-derived sources are
# committed as assembly (see src/*.c for how they were produced).
#
# The script stops at the first assembler/linker diagnostic (gas prints
# "no SFrame FDE emitted" for CFI it cannot express) and checks that each
# golden shows the feature the fixture exists for.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
TC=$("$root/scripts/sframe-toolchain.sh" ${1:+"$1"})
cd "$here"
src=src
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# bin SUITE TRIPLET TOOL -> wrapper path
bin() { echo "$TC/$1/bin/$2-$3"; }

# run CMD...: run a tool; any output on stderr (a warning) is fatal.
run() {
  if ! "$@" 2>"$tmp/err" || [ -s "$tmp/err" ]; then
    echo "gen.sh: $*" >&2
    cat "$tmp/err" >&2
    exit 1
  fi
}

# as SUITE TRIPLET OUT SRC [ASFLAGS...]
asm() {
  local s=$1 t=$2 out=$3 in=$4
  shift 4
  run "$(bin "$s" "$t" as)" --gsframe "$@" -o "$out" "$in"
}

# link SUITE TRIPLET OUT [LDFLAGS/OBJS...]: small static or dynamic images;
# no separate-code padding, 4 KiB pages, so files stay a few KB.
link() {
  local s=$1 t=$2 out=$3
  shift 3
  run "$(bin "$s" "$t" ld)" -z noseparate-code -z max-page-size=0x1000 \
    -z common-page-size=0x1000 --hash-style=gnu -o "$out" "$@"
}

# golden SUITE TRIPLET FILE: FILE.readelf.txt from that suite's readelf.
golden() {
  local s=$1 t=$2 f=$3
  "$(bin "$s" "$t" readelf)" --sframe "$f" >"$f.readelf.txt" 2>"$tmp/err"
  if [ -s "$tmp/err" ]; then
    echo "gen.sh: readelf ($s) on $f:" >&2
    cat "$tmp/err" >&2
    exit 1
  fi
}

# expect FILE ERE...: every pattern must match the golden of FILE.
expect() {
  local f=$1
  shift
  local p
  for p in "$@"; do
    grep -Eq -- "$p" "$f.readelf.txt" || {
      echo "gen.sh: $f.readelf.txt lacks /$p/" >&2
      exit 1
    }
  done
}

# has_sframe_phdr SUITE TRIPLET FILE: linked images must carry PT_GNU_SFRAME.
has_sframe_phdr() {
  "$(bin "$1" "$2" readelf)" -lW "$3" | grep -q GNU_SFRAME ||
    { echo "gen.sh: $3 has no PT_GNU_SFRAME" >&2; exit 1; }
}

rm -f ./*.o ./*.exe ./*.so ./*.readelf.txt

X=x86_64-linux-gnu
A=aarch64-linux-gnu
Z=s390x-linux-gnu

# Which readelf makes which golden (see README.md):
#   V1 (bookworm 2.40) -> bookworm readelf: 2.46+ cannot dump V1.
#   V2 objects (.o)    -> trixie readelf: 2.46+ applies the .rela.sframe
#                         PC-relative relocations to the non-PCREL V2 start
#                         fields and prints nonsense starts (README).
#   V2 linked images   -> sid readelf (2.46+ notation).
#   V3                 -> sid readelf.
declare -A suite_of=([1]=bookworm [2]=trixie [3]=sid)
declare -A objreader_of=([1]=bookworm [2]=trixie [3]=sid)
declare -A exereader_of=([1]=bookworm [2]=sid [3]=sid)

for v in 1 2 3; do
  s=${suite_of[$v]}
  # x86-64 basic: leaf, FP frame, 2-/4-byte data words, ADDR2.
  asm "$s" $X "x86_64-v$v.o" $src/x86_64-basic.s
  link "$s" $X "x86_64-v$v.exe" "x86_64-v$v.o"
  # x86-64 ADDR4 (a > 64 KiB function): V1 and V3 only, to keep testdata small.
  if [ "$v" != 2 ]; then
    asm "$s" $X "$tmp/addr4.o" $src/x86_64-addr4.s
    link "$s" $X "x86_64-v$v-addr4.exe" "$tmp/addr4.o"
  fi
  # x86-64 PLT: a dynamic executable against a tiny shared object, lazy binding.
  asm "$s" $X "$tmp/lib.o" $src/x86_64-plt-lib.s
  link "$s" $X "libplt-v$v.so" -shared -soname "libplt-v$v.so" "$tmp/lib.o"
  asm "$s" $X "$tmp/main.o" $src/x86_64-plt-main.s
  link "$s" $X "x86_64-v$v-plt.exe" -z lazy -dynamic-linker /lib64/ld-linux-x86-64.so.2 \
    "$tmp/main.o" "libplt-v$v.so"
  # aarch64 little-endian basic: leaf, frame record, PAC A/B keys, 2-/4-byte words, ADDR2.
  asm "$s" $A "aarch64-v$v.o" $src/aarch64-basic.s
  link "$s" $A "aarch64-v$v.exe" "aarch64-v$v.o"
done

# V3 only (sid).
asm sid $X x86_64-v3-flex.o $src/x86_64-flex.s
link sid $X x86_64-v3-flex.exe x86_64-v3-flex.o
asm sid $X "$tmp/main.o" $src/x86_64-plt-main.s
link sid $X x86_64-v3-ibtplt.exe -z lazy -z ibtplt -dynamic-linker /lib64/ld-linux-x86-64.so.2 \
  "$tmp/main.o" libplt-v3.so
asm sid $A aarch64be-v3.o $src/aarch64-basic.s -EB
link sid $A aarch64be-v3.exe -EB aarch64be-v3.o
asm sid $A aarch64-v3-outer.o $src/aarch64-v3.s
link sid $A aarch64-v3-outer.exe aarch64-v3-outer.o
asm sid $Z s390x-v3-gcc.o $src/s390x-gcc.s
asm sid $Z s390x-v3-hand.o $src/s390x-hand.s
link sid $Z s390x-v3.exe s390x-v3-gcc.o s390x-v3-hand.o

# Goldens.
for f in *.o *.exe *.so; do
  case $f in
  x86_64* | libplt*) t=$X ;;
  aarch64*) t=$A ;;
  s390x*) t=$Z ;;
  esac
  v=$(echo "$f" | sed -E 's/^[a-z0-9_]+-v([123]).*/\1/; s/^libplt-v([123]).*/\1/')
  case $f in
  *.o) r=${objreader_of[$v]} ;;
  *) r=${exereader_of[$v]}; has_sframe_phdr "$r" "$t" "$f" ;;
  esac
  golden "$r" "$t" "$f"
  expect "$f" "Version: SFRAME_VERSION_$v"
done

# Features each fixture exists for.
for v in 1 2 3; do
  expect "x86_64-v$v.exe" 'sp\+4112' 'sp\+70016' 'size = 290 bytes'
  expect "x86_64-v$v-plt.exe" 'STARTPC\[m\]' '^ *0+b +sp\+16'
  expect "aarch64-v$v.exe" 'pauth = B key' 'c-24\[s\]' 'u\[s\]' 'sp\+4112' 'sp\+70016'
done
expect x86_64-v1-addr4.exe 'size = 65555 bytes'
expect x86_64-v3-addr4.exe 'size = 65555 bytes'
expect x86_64-v3-flex.exe 'RA undefined' 'attr = "F"' 'attr = "S"' '\(fp-8\)' 'r10\+0' 'r3\+0'
expect x86_64-v3-ibtplt.exe 'STARTPC\[m\]' '^ *0+9 +sp\+16'
expect aarch64be-v3.exe 'pauth = B key' 'c-8\[s\]'
expect aarch64-v3-outer.exe 'RA undefined' 'attr = "S"'
expect s390x-v3.exe 'RA undefined' 'attr = "S"' 'attr = "F"' 'r16\+0' 'r17\+0' 'fp\+320' 'sp\+4416'

# ABI/byte order spot checks on the raw header (byte 0-1 magic, byte 4 ABI id).
abi() { od -An -tx1 -j"$(sframe_off "$1")" -N5 "$1" | tr -d ' \n'; }
sframe_off() { printf '%d' "0x$("$(bin sid $X readelf)" -SW "$1" | sed -nE 's/.*\] \.sframe +[A-Z_]+ +[0-9a-f]+ ([0-9a-f]+) .*/\1/p')"; }
[ "$(abi aarch64be-v3.exe)" = "dee2030501" ] || { echo "gen.sh: aarch64be-v3.exe header $(abi aarch64be-v3.exe)" >&2; exit 1; }
[ "$(abi s390x-v3.exe)" = "dee2030504" ] || { echo "gen.sh: s390x-v3.exe header $(abi s390x-v3.exe)" >&2; exit 1; }

ls -l ./*.o ./*.exe ./*.so | awk '{s+=$5} END {print "gen.sh: " NR " binaries, " s " bytes"}' >&2
