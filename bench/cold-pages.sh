#!/usr/bin/env bash
# Each command run "cold" (after GAP seconds idle) and "warm" (again at once), ROUNDS times:
# medians of wall, user and system seconds and of peak memory for each state.
#
# Why: these VMs' virtio balloon reports free memory to the host (free page reporting, in
# 2 MiB blocks, about two seconds after it is freed), and the host takes it back. Memory a
# run faults in after a pause must be backed by the host again, which the guest sees as
# slow page zeroing (clear_page_erms, system time); a run that starts at once gets the
# pages the last one freed, still backed. The same `profile -j 2` of the XRay basic-mode
# log took 0.63-0.67 s of system time after 6 s idle and 0.09-0.14 s right after another
# run (docs/PERFORMANCE.md, session 58). Whatever -j 2 adds in memory it pays for at that
# rate when cold, and hyperfine's back-to-back runs are mostly warm.
# usage: bench/cold-pages.sh ROUNDS GAP "LABEL|CMD" ...   (CMD split at spaces; output
#        discarded), e.g. in build/bench-scaling:
#   bench/cold-pages.sh 3 6 "j1|$TK profile -j 1 -o /dev/null basic-runs.xray" \
#                           "j2|$TK profile -j 2 -o /dev/null basic-runs.xray"
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rounds=${1:?usage: bench/cold-pages.sh ROUNDS GAP \"LABEL|CMD\" ...}
gap=${2:?usage: bench/cold-pages.sh ROUNDS GAP \"LABEL|CMD\" ...}
shift 2
[ $# -gt 0 ] || { echo 'usage: bench/cold-pages.sh ROUNDS GAP "LABEL|CMD" ...' >&2; exit 2; }

# whether the balloon reports free pages (virtio feature bit 5) and in blocks of what order
reporting=no
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device" 2>/dev/null)" = 0x0005 ] || continue
	[ "$(cut -c6 "$d/features" 2>/dev/null)" = 1 ] && reporting=yes
done
order=$(cat /sys/module/page_reporting/parameters/page_reporting_order 2>/dev/null || echo "?")
echo "free page reporting: $reporting (order $order); $rounds rounds, $gap s idle before each cold run"

python3 - "$rounds" "$gap" "$@" <<'PY'
import os, resource, statistics, subprocess, sys, time
rounds, gap, cmds = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
res = {}
def run(cmd):
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.Popen(cmd.split(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    if status != 0:
        sys.exit(f"cold-pages: {cmd}: exit status {status}")
    return wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss / 1024
for _ in range(rounds):
    for spec in cmds:
        label, cmd = spec.split("|", 1)
        time.sleep(gap)
        res.setdefault((label, "cold"), []).append(run(cmd))
        res.setdefault((label, "warm"), []).append(run(cmd))
for spec in cmds:
    label = spec.split("|", 1)[0]
    for state in ("cold", "warm"):
        v = res[(label, state)]
        med = [statistics.median(x[k] for x in v) for k in range(4)]
        print(f"{label:<14} {state}: wall {med[0]:.2f} s  user {med[1]:.2f} s  sys {med[2]:.2f} s"
              f"  peak {med[3]:.0f} MB  [walls {' '.join('%.2f' % x[0] for x in v)}]")
PY
