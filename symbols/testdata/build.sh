#!/bin/sh
# Rebuilds the test binaries from the sources in this directory. Run from
# anywhere; it works in its own directory with relative paths so no host
# path ends up in the binaries. No -g: the tests are about symbol tables.
set -eu
cd "$(dirname "$0")"

# Classic lazy PLT (PLT0 + 16-byte entries), PIE, with .symtab.
gcc -O1 -fPIE -pie -fcf-protection=none -Wl,-z,lazy -o cprog-lazy cprog.c asmlabels.S
# IBT PLT: .plt with endbr64 stubs plus .plt.sec (-z ibtplt forces it even
# if crt objects lack the IBT property).
gcc -O1 -fPIE -pie -fcf-protection=full -Wl,-z,ibtplt -Wl,-z,lazy -o cprog-ibt cprog.c
# Stripped: only .dynsym is left; -rdynamic exports the global functions.
gcc -O1 -fPIE -pie -rdynamic -o cprog-stripped cprog.c
strip --strip-all cprog-stripped
# C++ for demangling.
g++ -O1 -fPIE -pie -fno-exceptions -fno-asynchronous-unwind-tables -o cxxprog cxxprog.cc
