# shellcheck shell=bash
# Sourced by the tests that start MPI jobs (after setting $work): mpi_run NP PROGRAM
# ARGS..., mpirun on NP ranks with the caller's stdout and stderr.
#
# Open MPI 4.1's mpirun at times fails in its own teardown after every rank has ended:
# it crashes (PMIx_server_finalize or orte_finalize, SIGSEGV, exit 139) or hangs (a
# deadlock in PMIx_server_finalize, its ranks left as zombies); seen about once in 100
# launches on a loaded machine. Such a launch is run again, once, and counted in
# $launcher_retries; any other failure stands. A launch still running after 120 s while a
# rank is alive is killed (TERM, then KILL: a hang fails its own step, not the test's
# timeout).
launcher_retries=0
: "${work:?mpi-run.sh: set work first}"
ranks_state() {   # PID: "none", "ended" (every child of mpirun a zombie) or "running"
	local c st n=0
	for c in $(pgrep -P "$1" || true); do
		st=
		read -r _ _ st _ <"/proc/$c/stat" 2>/dev/null || true
		[ -z "$st" ] || [ "$st" = Z ] || { echo running; return; }
		n=$((n + 1))
	done
	[ "$n" = 0 ] && echo none || echo ended
}
watch_launch() {   # PID: kill a launcher hung in its teardown, or running past 120 s
	local pid=$1 seen=0 ended=0 st
	for _ in $(seq 1 240); do
		sleep 0.5
		kill -0 "$pid" 2>/dev/null || return 0
		st=$(ranks_state "$pid")
		[ "$st" = none ] || seen=1
		if [ "$seen" = 1 ] && [ "$st" != running ]; then ended=$((ended + 1)); else ended=0; fi
		if [ "$ended" -ge 20 ]; then   # 10 s after every rank ended
			touch "$work/teardown_hang"
			kill -KILL "$pid" 2>/dev/null || true
			return 0
		fi
	done
	kill -TERM "$pid" 2>/dev/null || true
	sleep 10
	kill -KILL "$pid" 2>/dev/null || true
}
mpi_run() {
	local rc try pid watcher
	for try in 1 2; do
		rc=0
		rm -f "$work/teardown_hang"
		mpirun --oversubscribe --allow-run-as-root -np "$@" 2>"$work/run.err" &
		pid=$!
		watch_launch "$pid" &
		watcher=$!
		{ wait "$pid" || rc=$?; } 2>/dev/null   # (no notice of the shell's about a killed launch)
		kill "$watcher" 2>/dev/null || true
		wait "$watcher" 2>/dev/null || true
		[ "$try" = 1 ] || break
		[ -e "$work/teardown_hang" ] ||
			{ [ "$rc" = 139 ] && grep -q 'PMIx_server_finalize\|orte_finalize' "$work/run.err"; } ||
			break
		launcher_retries=$((launcher_retries + 1))
	done
	cat "$work/run.err" >&2
	return "$rc"
}
