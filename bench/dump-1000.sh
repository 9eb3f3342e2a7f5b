#!/usr/bin/env bash
# dump-1000.sh: wall time of one stack dump of a 1,000-thread process
# (manythreads 1000), stacktop dump against gdb "thread apply all bt" and
# eu-stack, on the same process. stacktop also prints the longest time any
# thread stayed stopped. Targets: <= 250 ms, no thread stopped > 2 ms.
source "$(dirname "$0")/common.sh"
"$targets/manythreads-sframe3" 1000 >/dev/null &
mt=$!
sleep 2
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>"$work/err" || true; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
for r in 1 2 3; do
	st=$(ms "$stacktop" dump -p "$mt")
	echo "round $r: stacktop dump ${st} ms; $(tail -1 "$work/err")"
	if command -v gdb >/dev/null; then
		echo "round $r: gdb thread apply all bt $(ms gdb -batch -p "$mt" -ex 'thread apply all bt') ms"
	fi
	if command -v eu-stack >/dev/null; then
		echo "round $r: eu-stack -p $(ms eu-stack -p "$mt") ms"
	else
		echo "eu-stack missing (apt-get install elfutils)"
	fi
done
