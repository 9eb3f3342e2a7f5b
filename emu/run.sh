#!/usr/bin/env bash
# emu/run.sh ARCH: the live ptrace tests on a real s390x or arm64 kernel,
# under full-system emulation (QEMU TCG, no KVM).
#
#   ARCH = s390x   qemu-system-s390x -M s390-ccw-virtio, Debian's
#                  linux-image-s390x, console ttysclp0
#   ARCH = arm64   qemu-system-aarch64 -M virt -cpu max (pointer
#                  authentication on), Debian's linux-image-cloud-arm64,
#                  console ttyAMA0
#
# Steps: install the host packages it needs (QEMU, cross compilers; root),
# fetch the Debian kernel package with a private apt state (the host's apt
# configuration and dpkg architecture list are left alone) and unpack its
# vmlinuz, cross-build the fixtures (testdata/cross/build.sh), emu/capture
# and cmd/stacktop as static binaries, pack them into an initramfs whose
# /init is emu/capture, boot it, and read the verdict from the console:
# QEMU exits 0 on power-off and on a kernel panic alike (panic=-1 with
# -no-reboot), so only the "EMU-RESULT: PASS" line tells success.
#
# Environment:
#   STACKTOP_CACHE   download cache (default $HOME/.cache/stacktop); the
#                    kernel, its apt state and the work files live in
#                    $STACKTOP_CACHE/emu. Delete it to refetch.
#   STACKTOP_TC      SFrame toolchain directory for testdata/cross/build.sh.
#   KSUITE           Debian suite of the kernel (default bookworm).
#   CAPTURE=1        also store the snapshots the VM prints (deep, leaf and big
#                    threads of every fixture) in testdata/cross/snapshots/.
#   EMU_TIMEOUT      seconds before the VM is killed (default 600).
#   ARM_CPU          QEMU -cpu for arm64 (default max,pauth-impdef=on: with
#                    pointer authentication; cortex-a57 has none).
#   SKIP_HOST_APT=1  do not apt-get install anything on the host.
#   EMU_STEPS        all (default); prepare (packages, kernel, fixtures and
#                    initramfs, no boot); boot (only boot what prepare
#                    left). scripts/test.sh prepares the two machines one
#                    after the other (apt and the fixtures' build share
#                    state) and boots them side by side.
#
# Exit status 0 when the VM printed EMU-RESULT: PASS. The console log is
# printed and kept in $STACKTOP_CACHE/emu/ARCH/console.log.
set -euo pipefail

arch=${1:-}
case $arch in
s390x) triplet=s390x qemu=qemu-system-s390x qpkg=qemu-system-misc kmeta=linux-image-s390x ;;
arm64) triplet=aarch64 qemu=qemu-system-aarch64 qpkg=qemu-system-arm kmeta=linux-image-cloud-arm64 ;;
*)
	echo "usage: emu/run.sh s390x|arm64" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${STACKTOP_CACHE:-$HOME/.cache/stacktop}/emu
ksuite=${KSUITE:-bookworm}
work=$cache/$arch
mkdir -p "$work"

die() { echo "emu/run.sh: $*" >&2; exit 1; }
now() { date +%s.%N; }
t0=$(now)
phase() { printf '### %-10s %6.1fs\n' "$1" "$(echo "$(now) - $t0" | bc)"; }

host_packages() {
	local need=()
	command -v $qemu >/dev/null || need+=($qpkg)
	command -v cpio >/dev/null || need+=(cpio)
	command -v bc >/dev/null || need+=(bc)
	[ ${#need[@]} -eq 0 ] && return 0
	[ -n "${SKIP_HOST_APT:-}" ] && die "missing ${need[*]}"
	[ "$(id -u)" = 0 ] || die "missing ${need[*]} (install them, or run as root)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# The Debian mirror from the machine's apt configuration (deb822 first).
find_mirror() {
	local m
	m=$(grep -h -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
		tr ' ' '\n' | grep -E '^[a-z+]+://.*/debian/?$' | head -1 || true)
	if [ -z "$m" ]; then
		m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			grep -E '^deb[[:space:]]' | tr ' ' '\n' | grep -E '^[a-z+]+://.*/debian/?$' | head -1 || true)
	fi
	echo "${m%/}"
}

# kernel: $work/vmlinuz from Debian's kernel package for ARCH, fetched
# once with a private apt state and only unpacked, never installed.
kernel() {
	[ -s "$work/vmlinuz" ] && return 0
	local A=$cache/apt-$arch mirror pkg
	mirror=$(find_mirror)
	[ -n "$mirror" ] || die "no Debian mirror in /etc/apt"
	rm -rf "$A"
	mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs"
	echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $ksuite main" >"$A/sources.list"
	local O=(-o Dir::Etc::sourcelist="$A/sources.list" -o Dir::Etc::sourceparts=-
		-o Dir::State::lists="$A/lists" -o Dir::State::status=/dev/null
		-o Dir::Cache="$A/cache" -o Debug::NoLocking=1 -o Acquire::Languages=none
		-o Acquire::Check-Valid-Until=false -o APT::Architecture="$arch"
		-o APT::Architectures::="$arch" -o APT::Sandbox::User=root)
	apt-get "${O[@]}" update -qq >/dev/null || die "apt-get update (private state) failed"
	pkg=$(apt-cache "${O[@]}" depends "$kmeta" | awk '/Depends: linux-image-/{print $2; exit}')
	[ -n "$pkg" ] || die "no kernel package behind $kmeta in $ksuite"
	echo "kernel package: $pkg ($ksuite)"
	(cd "$A/debs" && apt-get "${O[@]}" download -qq "$pkg") || die "apt-get download $pkg failed"
	local tmp=$A/unpacked
	mkdir -p "$tmp"
	dpkg-deb --fsys-tarfile "$A"/debs/linux-image-*.deb | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
	cp "$(ls "$tmp"/boot/vmlinuz-* | head -1)" "$work/vmlinuz.tmp"
	basename "$(ls "$tmp"/boot/vmlinuz-* | head -1)" >"$work/kernel-version"
	mv "$work/vmlinuz.tmp" "$work/vmlinuz"
	rm -rf "$A/debs" "$tmp" "$A/cache/archives"
}

build() {
	"$root/testdata/cross/build.sh" >"$work/build.log" 2>&1 || { cat "$work/build.log"; die "testdata/cross/build.sh failed"; }
	local ir=$work/initramfs
	rm -rf "$ir"
	mkdir -p "$ir"
	(cd "$root" && CGO_ENABLED=0 GOARCH=$arch go build -trimpath -ldflags=-s -o "$ir/init" ./emu/capture)
	if (cd "$root" && CGO_ENABLED=0 GOARCH=$arch go build -trimpath -ldflags=-s -o "$ir/stacktop" ./cmd/stacktop) 2>"$work/stacktop-build.log"; then
		:
	else
		echo "note: cmd/stacktop does not build for $arch; the VM runs without it:"
		cat "$work/stacktop-build.log"
	fi
	cp "$root"/testdata/cross/bin/spin-"$arch"-* "$ir/"
	# The Go target, with its DWARF (gort reads the runtime's types).
	(cd "$root/testdata/targets/goprog" && GOFLAGS= CGO_ENABLED=0 GOARCH=$arch go build -trimpath -buildvcs=false -o "$ir/goprog" .)
	(cd "$ir" && find . | cpio -o -H newc --owner=0:0 2>/dev/null | gzip -1 >"$work/initramfs.cpio.gz")
	ls "$ir" | tr '\n' ' '
	echo "($(du -k "$work/initramfs.cpio.gz" | cut -f1) KiB)"
}

boot() {
	local q con args
	case $arch in
	s390x) q=($qemu -M s390-ccw-virtio -smp 2) con=ttysclp0 ;;
	arm64) q=($qemu -M virt -cpu "${ARM_CPU:-max,pauth-impdef=on}" -smp 2) con=ttyAMA0 ;;
	esac
	args="console=$con rdinit=/init panic=-1 quiet loglevel=3"
	[ -n "${CAPTURE:-}" ] && args="$args capture.snapshots"
	local rc=0
	timeout "${EMU_TIMEOUT:-600}" "${q[@]}" -m 768 -nographic -no-reboot -nic none \
		-kernel "$work/vmlinuz" -initrd "$work/initramfs.cpio.gz" -append "$args" \
		</dev/null >"$work/console.log" 2>&1 || rc=$?
	tr -d '\r' <"$work/console.log" | grep -v -E '^[A-Za-z0-9+/=]{76}$|^[A-Za-z0-9+/=]+$' || true
	[ $rc -eq 0 ] || echo "qemu exit status $rc (124: timed out)"
}

# extract: the snapshots printed between CAPTURE-BEGIN/END markers.
extract() {
	local dir=$root/testdata/cross/snapshots name
	mkdir -p "$dir"
	for name in $(tr -d '\r' <"$work/console.log" | awk '/^CAPTURE-BEGIN /{print $2}'); do
		tr -d '\r' <"$work/console.log" |
			awk -v n="$name" '$0 == "CAPTURE-END " n {p=0} p {print} $0 == "CAPTURE-BEGIN " n {p=1}' |
			base64 -d | gunzip >"$dir/$name"
		echo "stored testdata/cross/snapshots/$name ($(stat -c %s "$dir/$name") bytes)"
	done
}

steps=${EMU_STEPS:-all}
case $steps in all | prepare | boot) ;; *) die "EMU_STEPS=$steps: want all, prepare or boot" ;; esac
if [ "$steps" != boot ]; then
	host_packages
	phase packages
	kernel
	echo "kernel: $(cat "$work/kernel-version")"
	phase kernel
	build
	phase build
	[ "$steps" = prepare ] && exit 0
fi
[ -f "$work/initramfs.cpio.gz" ] || die "no initramfs for $arch: run EMU_STEPS=prepare first"
boot
phase boot
[ -n "${CAPTURE:-}" ] && extract
if tr -d '\r' <"$work/console.log" | grep -q '^EMU-RESULT: PASS'; then
	echo "emu/run.sh $arch: PASS"
	exit 0
fi
echo "emu/run.sh $arch: FAIL (no EMU-RESULT: PASS on the console; log: $work/console.log)"
exit 1
