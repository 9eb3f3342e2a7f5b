# common.sh: sourced by the bench scripts. Builds stacktop and the C helpers
# into a temporary directory and provides helpers. Needs root (ptrace), gcc
# and go.
set -euo pipefail
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(git -C "$bench_dir" rev-parse --show-toplevel)
work=$(mktemp -d)
cleanup() {
	kill $(jobs -p) 2>/dev/null || true
	rm -rf "$work"
	restore_halt_poll
}
trap cleanup EXIT
(cd "$root" && CGO_ENABLED=0 go build -o "$work/stacktop" ./cmd/stacktop) # as scripts/demo.sh builds it
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

# add KEY NUMBER: sum[KEY] += NUMBER, in the caller's associative array sum.
add() { sum[$1]=$(awk -v a="${sum[$1]:-0}" -v b="$2" 'BEGIN{print a+b}'); }

# The guest's idle policy decides most of a sample's cost on a VM: the
# sampled thread's CPU idles while the thread is stopped, and a vCPU that
# halted must be woken by the host before the thread can run again. Scripts
# that measure a cost per sample print it (halt_poll_init) and, given
# HALT_POLL_NS=N (root, cpuidle haltpoll driver), run each round twice:
# as the machine is, and with the guest polling N ns before it halts (the
# haltpoll driver's default is 200000). The setting is restored on exit.
halt_poll_param=/sys/module/haltpoll/parameters/guest_halt_poll_ns
halt_poll_saved=
halt_poll_settings=()

# halt_poll_init: prints the idle policy and fills halt_poll_settings.
halt_poll_init() {
	local driver now
	driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown)
	now=$(cat "$halt_poll_param" 2>/dev/null || echo -)
	echo "cpuidle driver: $driver; guest_halt_poll_ns: $now"
	halt_poll_settings=("$now")
	if [ -n "${HALT_POLL_NS:-}" ]; then
		if [ ! -w "$halt_poll_param" ]; then
			echo "HALT_POLL_NS needs root and the haltpoll cpuidle driver" >&2
			exit 2
		fi
		halt_poll_saved=$now
		halt_poll_settings+=("$HALT_POLL_NS")
	fi
}

# set_halt_poll SETTING: one of halt_poll_settings ("-": nothing to set).
set_halt_poll() {
	if [ "$1" != - ] && [ -n "$halt_poll_saved" ]; then
		echo "$1" >"$halt_poll_param"
	fi
}

restore_halt_poll() {
	if [ -n "$halt_poll_saved" ]; then
		echo "$halt_poll_saved" >"$halt_poll_param"
	fi
}

# build_collector: the OpenTelemetry Collector of testdata/otelcol, into
# $work/otelcol (go build caches it after the first time).
build_collector() {
	echo "building the Collector..."
	(cd "$root/testdata/otelcol" && GOWORK=off go build -trimpath -o "$work/otelcol" .)
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_collector PORT: a Collector with its gRPC receiver on PORT.
start_collector() {
	cat >"$work/otelcol.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$1
exporters:
  file:
    path: $work/received.pb
    format: proto
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
YAML
	"$work/otelcol" --config "file:$work/otelcol.yaml" --feature-gates=service.profilesSupport >"$work/otelcol.log" 2>&1 &
	collector=$!
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return; fi
		sleep 0.1
	done
	echo "the Collector did not start:" >&2
	cat "$work/otelcol.log" >&2
	exit 1
}
