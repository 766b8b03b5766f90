#!/usr/bin/env bash
# Interleaved rounds of several commands (two builds, or -j 1 and -j 2 of one): each
# round runs every command once, in turn, so the host's drift from minute to minute
# touches all alike. Prints per command the median wall and CPU seconds (user + system)
# and every round's wall time; per round (on stderr) the two CPUs' distance and speeds
# (bench_core_distance, bench_core_speed), to tell near, far and uneven rounds apart.
# usage: bench/rounds.sh ROUNDS "LABEL|CMD" ...   (CMD split at spaces; output discarded)
# e.g. the before/after rows of docs/PERFORMANCE.md, session 48 (OLD: a build of the
# commit before, from `git worktree add`):
#   bench/rounds.sh 5 "old-j2|$OLD/tracekit report -j 2 -o /dev/null inflight.log" \
#                     "new-j2|build/tracekit report -j 2 -o /dev/null inflight.log"
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rounds=${1:?usage: bench/rounds.sh ROUNDS "LABEL|CMD" ...}
shift
[ $# -gt 0 ] || { echo 'usage: bench/rounds.sh ROUNDS "LABEL|CMD" ...' >&2; exit 2; }
declare -A wall cpu
tf=$(mktemp)
trap 'rm -f "$tf"' EXIT
for ((r = 0; r < rounds; r++)); do
	echo "round $r: cores $(bench_core_distance) ns, speed $(bench_core_speed)" >&2
	for spec in "$@"; do
		label=${spec%%|*}
		# shellcheck disable=SC2086  # the command is split at spaces on purpose
		/usr/bin/time -o "$tf" -f "%e %U %S" ${spec#*|} >/dev/null 2>&1 || true
		read -r e u s < <(tail -n 1 "$tf")
		wall[$label]+="$e "
		cpu[$label]+="$(awk -v u="$u" -v s="$s" 'BEGIN {printf "%.2f", u + s}') "
	done
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for spec in "$@"; do
	label=${spec%%|*}
	printf '%-16s wall %s s  cpu %s s  [%s]\n' "$label" "$(median <<<"${wall[$label]}")" \
		"$(median <<<"${cpu[$label]}")" "${wall[$label]% }"
done
