#!/usr/bin/env bash
# Interleaved rounds of several commands (two builds, or -j 1 and -j 2 of one): each
# round runs every command once, in turn (in reverse every other round), so the host's
# drift from minute to minute touches all alike. Prints per command the median wall and
# CPU seconds (user + system), the medians of user and system time apart (this VM's system
# time, mostly zeroing fresh pages, swings several-fold between runs of one command), and
# every round's wall time, and for each later command the medians of its per-round ratios
# to the first command's wall and CPU; per round (on stderr) the two CPUs' distance and speeds
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
declare -A wall cpu user sys
for ((r = 0; r < rounds; r++)); do
	echo "round $r: cores $(bench_core_distance) ns, speed $(bench_core_speed)" >&2
	# odd rounds in reverse: a run's speed depends on the run before it (the memory it
	# freed, which the host takes back: bench_interleaved_ratio), so no command always
	# follows the same one
	order=("$@")
	if ((r % 2)); then
		order=()
		for ((k = $#; k >= 1; k--)); do
			order+=("${!k}")
		done
	fi
	for spec in "${order[@]}"; do
		label=${spec%%|*}
		# wall and CPU (user + system) to 0.1 ms: /usr/bin/time's hundredths were as coarse
		# as the differences measured (session 69)
		# shellcheck disable=SC2086  # the command is split at spaces on purpose
		read -r e c u k < <(python3 -c 'import os, sys, time
t = time.perf_counter()
p = os.fork()
if p == 0:
    fd = os.open("/dev/null", os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.execvp(sys.argv[1], sys.argv[1:])
r = os.wait4(p, 0)[2]
print("%.4f %.4f %.4f %.4f" % (time.perf_counter() - t, r.ru_utime + r.ru_stime, r.ru_utime, r.ru_stime))' ${spec#*|})
		wall[$label]+="$e "
		cpu[$label]+="$c "
		user[$label]+="$u "
		sys[$label]+="$k "
	done
done
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for spec in "$@"; do
	label=${spec%%|*}
	printf '%-16s wall %s s  cpu %s s (user %s, system %s)  [%s]\n' "$label" \
		"$(median <<<"${wall[$label]}")" "$(median <<<"${cpu[$label]}")" \
		"$(median <<<"${user[$label]}")" "$(median <<<"${sys[$label]}")" "${wall[$label]% }"
done
# against the first command, round by round (both ran within seconds of each other): the
# medians of those ratios, steadier than ratios of medians when the host drifts
first=${1%%|*}
for spec in "${@:2}"; do
	label=${spec%%|*}
	python3 - "$label" "$first" "${wall[$label]}" "${wall[$first]}" "${cpu[$label]}" "${cpu[$first]}" <<'PY'
import statistics, sys
label, first, w, w0, c, c0 = sys.argv[1:]
def ratio(a, b):
    r = [x / y for x, y in zip(map(float, a.split()), map(float, b.split())) if y > 0]
    return statistics.median(r) if r else float('nan')
print(f"{label:16} / {first}: wall {ratio(w, w0):.3f}, cpu {ratio(c, c0):.3f} (median of the rounds' ratios)")
PY
done
