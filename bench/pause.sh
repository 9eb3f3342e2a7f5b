#!/usr/bin/env bash
# pause.sh [ROUNDS]: how long stacktop keeps a thread stopped per sample,
# against the physical floor (bench/ptrace-floor.c: INTERRUPT -> waitpid ->
# GETREGSET -> process_vm_readv 16 KiB -> CONT) on the same busy thread in
# the same run. Rounds alternate floor and stacktop so machine load hits
# both alike. Target: stacktop's median <= 1.2x the floor's.
#
# The floor is run twice: as shipped (it sleeps in waitpid) and with SPIN=1
# (it polls, as stacktop does while it has a CPU to itself). A polling wait
# returns as soon as the thread reports its stop, before the kernel has
# switched it out; PTRACE_GETREGSET then waits for that, so part of the
# time moves from "waiting" into "stopped". Compare stopped with stopped
# of the same kind of wait.
#
# stacktop runs at 999 Hz, the floor's own cadence (1 ms between samples),
# and at 499 Hz. The cadence matters on a VM whose idle CPUs halt: the
# longer the tracer's CPU sleeps between samples, the colder its caches and
# the slower the same system calls (here 499 Hz gave a stopped median some
# 8 µs above 999 Hz's). The target is judged at the same cadence.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
"$work/cpuloop" 600 >/dev/null &
busy=$!
sleep 0.5
for r in $(seq "$rounds"); do
	floor=$("$work/ptrace-floor" "$busy" 2000 16384)
	spin=$(SPIN=1 "$work/ptrace-floor" "$busy" 2000 16384)
	fs=$(awk '{print $4}' <<<"$floor")
	ft=$(awk '{print $11}' <<<"$floor")
	echo "round $r: $floor"
	echo "round $r: SPIN=1 $spin"
	for rate in 999 499; do
		sum=$("$stacktop" record -p "$busy" --rate "$rate" --duration 3s -o "$work/p.folded" 2>&1)
		ss=$(pause_field "$sum" 1)
		st=$(pause_field "$sum" 4)
		echo "round $r: stacktop $rate Hz stopped median $ss p99 $(pause_field "$sum" 2) max $(pause_field "$sum" 3) total median $st p99 $(pause_field "$sum" 5) (us)"
		awk -v a="$ss" -v b="$fs" -v c="$st" -v d="$ft" -v e="$(awk '{print $4}' <<<"$spin")" -v f="$(awk '{print $11}' <<<"$spin")" \
			'BEGIN { printf "round %d: ratio stacktop %d Hz/floor: stopped %.2fx, interrupt->cont %.2fx; /floor SPIN=1: stopped %.2fx, interrupt->cont %.2fx\n", '"$r"', '"$rate"', a / b, c / d, a / e, c / f }'
	done
done
