#!/usr/bin/env bash
# perf-backends.sh [PAIRS] [WINDOW_SECONDS]: what sampling costs a CPU-bound
# program with each back end (issue 17), measured precisely enough to judge
# a slowdown of 0.5% on a shared VM. Defaults: 5 rounds of 2 s windows.
# Environment: FLOOR=1 (the floor rows below), STACK_KIB, SETTLE, PIN=0,
# KEEP=DIR (keep the raw figures; perf-backends.sh --report DIR prints
# the table again from them).
#
# Design: paired, rapidly alternating windows on ONE long-running target.
# bench/cpuloop runs for the whole bench and, at each SIGUSR1, reports its
# iterations, CLOCK_MONOTONIC and its own CPU time. It spins below a
# STACK_KIB (64) KiB frame, so every sampler copies its whole stack window
# (at the top of the main thread's stack a copy would end after a few
# KiB, and window sizes could not be told apart). The script attaches a
# sampler, waits until it samples (the target is traced, or the sampler
# holds perf events) and then SETTLE seconds more (start-up, symbol
# loading), marks a sampled window of WINDOW_SECONDS, stops the
# sampler (SIGINT, as Ctrl-C), waits for it to exit, and marks an unsampled
# window of the same length; then the next sampler. Each sampled window is
# paired with the unsampled windows just before and after it (seconds
# apart), so slow drifts of a shared machine (the host, other guests,
# other programs) cancel; the configurations run in a new random order in
# each of PAIRS rounds. Reported per configuration: the median of the
# paired slowdowns and their interquartile range (p25..p75), which shows
# whether a difference is real.
#
# The figure that holds on a loaded machine: "gaps", the time the target
# loses in gaps of 3 µs to 1 ms during which it was not preempted (an
# interrupt with the kernel's sample and the VM exits around it, a ptrace
# stop; cpuloop.c), per pair the sampled window's share minus the
# unsampled windows', and that time per sample. It misses what a sample
# costs after the interrupt (caches, TLB) and ptrace stops over 1 ms.
#
# Two slowdowns: "wall" is the loss of iterations per second of wall time
# (the issue's figure; it sees a ptrace stop and also every other program
# that takes the target's CPU); "CPU" is the loss per second of the
# target's own CPU time, which sees the kernel's work in the target's
# interrupts (this kernel has no IRQ time accounting: interrupt time is
# charged to the interrupted thread) but not a ptrace stop, nor time other
# programs or the host take (steal time is not charged). For the perf
# back end and perf record the CPU figure is the sampler's cost to the
# target including what the interrupt leaves behind (caches, TLB); on a
# loaded machine it still moves by a percent or so with what other
# programs and the host do to the caches, and the wall figure says
# nothing: run it on a quiet machine.
#
# Pinning: with 2 or more CPUs the target runs on the last CPU and every
# sampler (and this script) on CPU 0, the same for every configuration
# (PIN=0 turns it off). A sampler's own work then never competes with
# the target for a CPU; what remains is what it costs the target's CPU:
# the kernel's work per sample, wake-ups, ptrace stops.
#
# Configurations (all on the software cpu-clock event; this VM has no
# PMU, and perf falls back to it anyway):
#   stacktop ptrace, stacktop --backend perf (default --stack-window:
#   16 KiB for ptrace, 8 KiB for perf), perf record --call-graph dwarf
#   (perf's default: 8 KiB of stack), at 99 and 999 Hz. With FLOOR=1, also
#   at 999 Hz only, the floor: perf record with no call graph (the bare
#   cpu-clock sample), with user registers only (--user-regs), with
#   dwarf,4096/16384/32768 stack copies, and stacktop --backend perf with
#   --stack-window 4096/16384/32768.
#
# Also per configuration: samples taken and lost (whole run: settle +
# window), the output file's size, and the sampler's own CPU over the
# window (every thread's schedstat: user + system) as a share of one core.
# Issue 17's targets at 999 Hz: perf back end slowdown <= 0.5% and below
# perf record's, stacktop's CPU <= 5% of a core.
# perf comes from scripts/install-test-deps.sh (linux-perf).
if [ "${1:-}" = --report ]; then
	# --report DIR: the table again from a run's raw figures (KEEP=DIR).
	report_only=$2
	work=$2
	set --
else
	report_only=
	source "$(dirname "$0")/common.sh"
fi
pairs=${1:-5}
win=${2:-2}
settle=${SETTLE:-0.5}
gap=${GAP:-0.5}
floor=${FLOOR:-0}
ncpu=$(nproc)

label() {
	case $1 in
	ptrace) echo "stacktop ptrace" ;;
	perfbk) echo "stacktop --backend perf" ;;
	perfbk-*) echo "stacktop perf --stack-window ${1#perfbk-}" ;;
	perf) echo "perf record --call-graph dwarf" ;;
	perf-*) echo "perf record --call-graph dwarf,${1#perf-}" ;;
	bare) echo "perf record (no call graph)" ;;
	regs) echo "perf record --user-regs (all)" ;;
	esac
}

if [ -z "$report_only" ]; then
perf_ok=0
if command -v perf >/dev/null && perf record -e cpu-clock -F 999 --call-graph dwarf -o "$work/probe.data" -- true >/dev/null 2>&1; then
	perf_ok=1
else
	echo "perf record does not work here: $(perf record -F 999 -o "$work/probe.data" -- true 2>&1 | head -1)"
fi

pin_t=() pin_s=()
if [ "${PIN:-1}" = 1 ] && [ "$ncpu" -ge 2 ] && command -v taskset >/dev/null; then
	pin_t=(taskset -c "$((ncpu - 1))")
	pin_s=(taskset -c 0)
	taskset -pc 0 $$ >/dev/null
	pinning="target on CPU $((ncpu - 1)), samplers and this script on CPU 0"
else
	pinning="none"
fi

# configs: NAME:HZ. NAME is one of ptrace, perfbk[-WINDOW], perf[-DWARFSIZE],
# bare, regs.
configs=()
for hz in 99 999; do
	configs+=("ptrace:$hz" "perfbk:$hz")
	[ "$perf_ok" = 1 ] && configs+=("perf:$hz")
done
if [ "$floor" = 1 ]; then
	configs+=(perfbk-4096:999 perfbk-16384:999 perfbk-32768:999)
	[ "$perf_ok" = 1 ] && configs+=(bare:999 regs:999 perf-4096:999 perf-16384:999 perf-32768:999)
fi


# The target runs for the whole bench: every window is of the same process.
per_cfg=$((win * 2 + 8)) # settle, window, stop, unsampled window; generous
total=$(((per_cfg + 2) * ${#configs[@]} * pairs + 30))
total=$((total * 3)) # a loaded machine is slower; the target is killed at the end anyway
"${pin_t[@]}" "$work/cpuloop" "$total" "${STACK_KIB:-64}" >"$work/marks" &
target=$!
sleep 0.5

nmark=0
# mark LABEL: ask the target for a mark, and file its label in order.
mark() {
	kill -USR1 "$target"
	echo "$1" >>"$work/labels"
	nmark=$((nmark + 1))
	# The target prints at its next pass, within about a millisecond of
	# its CPU time: seconds on a machine loaded enough.
	local i
	for i in $(seq 3000); do
		[ "$(grep -c '^mark' "$work/marks")" -ge "$nmark" ] && return
		sleep 0.02
	done
	echo "perf-backends: the target did not answer a mark within a minute: stopping, the figures so far follow" >&2
	stop=1
}

# cpu_ns PID: the CPU time (ns) of every thread of PID, from schedstat.
cpu_ns() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'
}

# ready NAME PID: wait (at most 20 s) until the sampler PID samples: the
# target is traced (ptrace), or PID holds perf events.
ready() {
	local i
	for i in $(seq 400); do
		if [ "$1" = ptrace ]; then
			[ "$(awk '/^TracerPid:/ {print $2}' /proc/"$target"/status)" != 0 ] && return
		else
			ls -l /proc/"$2"/fd 2>/dev/null | grep -q 'perf_event' && return
		fi
		kill -0 "$2" 2>/dev/null || return
		sleep 0.05
	done
}

# sample CFG HZ ROUND: one sampled window of a configuration and the
# unsampled window after it.
sample() {
	local cfg=$1 hz=$2 r=$3 name=${1%%-*} size=${1#*-} err=$work/sampler.err file
	[ "$size" = "$1" ] && size=
	local cmd=()
	case $name in
	ptrace) file=$work/s.pb.gz cmd=("$stacktop" record --rate "$hz" -p "$target" -o "$file") ;;
	perfbk)
		file=$work/s.pb.gz cmd=("$stacktop" record --backend perf --rate "$hz" -p "$target" -o "$file")
		[ -n "$size" ] && cmd+=(--stack-window "$size")
		;;
	perf) file=$work/perf.data cmd=(perf record -e cpu-clock -F "$hz" --call-graph "dwarf${size:+,$size}" -p "$target" -o "$file") ;;
	bare) file=$work/perf.data cmd=(perf record -e cpu-clock -F "$hz" -p "$target" -o "$file") ;;
	regs) file=$work/perf.data cmd=(perf record -e cpu-clock -F "$hz" --user-regs=AX,BX,CX,DX,SI,DI,BP,SP,IP,FLAGS,CS,SS,R8,R9,R10,R11,R12,R13,R14,R15 -p "$target" -o "$file") ;;
	esac
	rm -f "$file"
	"${pin_s[@]}" "${cmd[@]}" >/dev/null 2>"$err" &
	local spid=$! t0=$EPOCHREALTIME
	ready "$name" "$spid"
	sleep "$settle"
	local c0 c1
	c0=$(cpu_ns "$spid")
	mark "on $cfg:$hz $r"
	sleep "$win"
	mark "end"
	c1=$(cpu_ns "$spid")
	kill -INT "$spid"
	wait "$spid" || true
	local t1=$EPOCHREALTIME
	sleep "$gap"
	mark "off"
	sleep "$win"
	mark "end"
	local samples lost
	if [ "$name" = ptrace ] || [ "$name" = perfbk ]; then
		samples=$(grep -o '^stacktop: [0-9]* samples' "$err" | grep -o '[0-9]*' || true)
		# ptrace: ticks missed and threads not taken; perf: lost samples.
		lost=$(grep -Eo '[0-9]+ (lost|not taken \(no stop)' "$err" | awk '{s += $1} END {print s + 0}')
	else
		samples=$(grep -o '([0-9]* samples)' "$err" | tr -dc 0-9 || true)
		lost=$(perf report -i "$file" --stats 2>/dev/null | awk '/LOST.* events:/ {sub(/.*events: */, ""); s += $1} END {print s + 0}' || true)
	fi
	[ -n "$samples" ] || { echo "perf-backends: $(label "$name") gave no sample count: $(head -c 300 "$err")" >&2; }
	echo "$cfg $hz ${samples:-0} ${lost:-0} $(stat -c %s "$file" 2>/dev/null || echo 0) $(awk -v a="$c0" -v b="$c1" -v w="$win" 'BEGIN {print (b - a) / 1e9 / w}') $(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >>"$work/runs"
}

: >"$work/labels"
: >"$work/runs"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "perf-backends: ${#configs[@]} configurations x $pairs rounds, ${win}s windows (settle ${settle}s); pinning: $pinning"
mark "off"
sleep "$win"
mark "end"
stop=0
for r in $(seq "$pairs"); do
	for c in $(printf '%s\n' "${configs[@]}" | shuf); do
		[ "$stop" = 1 ] && break 2
		sample "${c%%:*}" "${c##*:}" "$r"
	done
	echo "round $r of $pairs done (load $(cut -d' ' -f1 /proc/loadavg))"
done
kill "$target" 2>/dev/null || true
wait "$target" 2>/dev/null || true
load1=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%s\n' "pairs=$pairs" "win=$win" "pinning='$pinning'" "load0='$load0'" "load1='$load1'" \
	"perf_ok=$perf_ok" "stack_kib=${STACK_KIB:-64}" "configs=(${configs[*]})" >"$work/meta"
fi
source "$work/meta"

# Windows: label, then between a window's two marks the target's speed
# (iterations per ns of wall time and per ns of its CPU time), the time
# lost in short gaps (cpuloop.c: interrupts, stops) as a share of its CPU
# time (an interrupt is charged to the thread it interrupts, and a thread
# that gets less of its CPU takes fewer samples and ticks), the window's
# CPU time over its wall time, gaps per CPU second and their mean (µs).
grep '^mark' "$work/marks" | paste -d' ' "$work/labels" - | awk '
	$1 == "end" { if (open) printf "%s %.9f %.9f %.6f %.6f %.1f %.2f\n", lab, ($4 - it) / ($3 - mono), ($4 - it) / ($5 - cpu),
		($6 > tsc) ? ($7 - gc) / ($6 - tsc) * ($3 - mono) / ($5 - cpu) : 0, ($5 - cpu) / ($3 - mono), 1e9 * ($8 - ng) / ($5 - cpu),
		($8 > ng && $6 > tsc) ? ($7 - gc) / ($8 - ng) / (($6 - tsc) / ($3 - mono) * 1e3) : 0; open = 0; next }
	{ lab = $1 == "on" ? $2 : "off"; n = NF - 6; mono = $(n + 1); it = $(n + 2); cpu = $(n + 3); tsc = $(n + 4); gc = $(n + 5); ng = $(n + 6); open = 1 }' >"$work/windows"

# Pairs: each sampled window against the mean of the unsampled windows
# just before and after it: slowdown per wall and per CPU second (%), the
# extra share of CPU time lost in short gaps (percentage points), and that
# time per sample (µs: the sampler asks HZ samples per second of the
# target's CPU time).
awk '
	$1 == "off" { if (pend != "") { split(pend, k, ":"); extra = pg - (og + $4) / 2
			printf "%s %.4f %.4f %.4f %.2f\n", pend, 100 * (1 - pw / ((ow + $2) / 2)), 100 * (1 - pc / ((oc + $3) / 2)),
				100 * extra, 1e6 * extra / k[2]; pend = "" }
		ow = $2; oc = $3; og = $4; next }
	{ pend = $1; pw = $2; pc = $3; pg = $4; pf = $5 }' "$work/windows" >"$work/pairs"

# q FILE P: the P-quantile (0..1) of the numbers in FILE (linear).
q() { sort -g "$1" | awk -v p="$2" '{v[NR] = $1} END { if (!NR) { print "nan"; exit } x = 1 + p * (NR - 1); i = int(x); f = x - i; print (i < NR) ? v[i] + f * (v[i + 1] - v[i]) : v[NR] }'; }

base_wall=$(awk '$1 == "off" {s += $2; n++} END {printf "%.3f", s / n * 1e3}' "$work/windows")
base_cpu=$(awk '$1 == "off" {s += $3; n++} END {printf "%.3f", s / n * 1e3}' "$work/windows")
base_gap=$(awk '$1 == "off" {s += $4; n++} END {printf "%.2f", 100 * s / n}' "$work/windows")
base_gaps=$(awk '$1 == "off" {print $6}' "$work/windows" | q /dev/stdin .5)
base_gapus=$(awk '$1 == "off" {print $7}' "$work/windows" | q /dev/stdin .5)
# med COLUMN KEY: "median [p25..p75]" of a column of the pairs of KEY.
med() {
	awk -v k="$2" -v c="$1" '$1 == k {print $c}' "$work/pairs" >"$work/col"
	printf '%+.2f [%+.2f..%+.2f]' "$(q "$work/col" .5)" "$(q "$work/col" .25)" "$(q "$work/col" .75)"
}
echo
echo "Cost of sampling to the target: medians of $pairs paired windows of ${win}s, [p25..p75 of the pairs]."
echo "  wall %: slowdown per second of wall time (ISSUE 17's FIGURE; needs a quiet machine)"
echo "  CPU %:  slowdown per second of the target's own CPU time (blind to ptrace stops)"
echo "  gaps pp: extra share of CPU time lost in gaps of 3 us-1 ms not due to preemption (interrupts, stops),"
echo "           in percentage points; us/smp: that time per sample. The gap figures hold on a loaded"
echo "           machine (other programs' runs on the target's CPU are left out); the speeds do not."
printf '%-34s %4s  %-22s %-22s %-22s %7s %7s %5s %9s %8s\n' configuration Hz "wall %" "CPU %" "gaps pp" "us/smp" "samp/s" lost output "CPU/core"
for c in "${configs[@]}"; do
	cfg=${c%%:*} hz=${c##*:}
	awk -v k="$cfg" -v hz="$hz" '$1 == k && $2 == hz {print 100 * $6}' "$work/runs" >"$work/cpu"
	rest=$(awk -v k="$cfg" -v hz="$hz" '$1 == k && $2 == hz {s += $3 / $7; l += $4; z += $5; n++}
		END {printf "%7.0f %5.0f %6.0f KB", s / n, l / n, z / n / 1024}' "$work/runs")
	usmp=$(awk -v k="$c" '$1 == k {print $5}' "$work/pairs" | q /dev/stdin .5)
	printf '%-34s %4s  %-22s %-22s %-22s %7.1f %s %7.2f%%\n' "$(label "$cfg")" "$hz" "$(med 2 "$c")" "$(med 3 "$c")" "$(med 4 "$c")" \
		"$usmp" "$rest" "$(q "$work/cpu" .5)"
done
echo
echo "unsampled target (spinning below a ${STACK_KIB:-64} KiB frame): $base_wall Mit/s wall, $base_cpu Mit/cpus, ${base_gap}% of its CPU time in short gaps; pinning: $pinning;"
printf 'unsampled, the floor of any interrupt here: %.0f gaps a second of its CPU time (the timer tick, other interrupts), %.1f us each (medians)\n' "$base_gaps" "$base_gapus"
echo "load average (1, 5, 15 min) before: $load0, after: $load1. samp/s: over the sampler's whole run (settle included);"
echo "CPU/core: the sampler's own CPU (user + system) over the sampled window."
pk() { awk -v k="$1" -v c="$2" '$1 == k {print $c}' "$work/pairs" | q /dev/stdin .5; }
printf 'ISSUE 17 TARGET (<= 0.5%%, and below perf record --call-graph dwarf): at 999 Hz stacktop --backend perf %.2f%% wall, %.2f%% CPU, %.2f pp in gaps;' \
	"$(pk perfbk:999 2)" "$(pk perfbk:999 3)" "$(pk perfbk:999 4)"
if [ "$perf_ok" = 1 ]; then
	printf ' perf record --call-graph dwarf %.2f%%, %.2f%%, %.2f pp.\n' "$(pk perf:999 2)" "$(pk perf:999 3)" "$(pk perf:999 4)"
else
	echo
fi
if grep -q '^bare:999 ' "$work/pairs"; then
	printf 'THE FLOOR here: a bare cpu-clock sample (perf record, no call graph) at 999 Hz: %.2f%% wall, %.2f%% CPU, %.2f pp in gaps (%.1f us a sample).\n' \
		"$(pk bare:999 2)" "$(pk bare:999 3)" "$(pk bare:999 4)" "$(pk bare:999 5)"
fi
if [ -n "${KEEP:-}" ]; then
	mkdir -p "$KEEP" && cp "$work"/{meta,marks,labels,windows,pairs,runs} "$KEEP"/ && echo "raw figures in $KEEP/"
fi
