#!/usr/bin/env bash
# A stripped executable has no symbols for the functions the loader and libc call from
# untraced code (_init, _fini, frame_dummy, __do_global_dtors_aux, register_tm_clones):
# the recorder takes their entries from DT_INIT, DT_FINI, the init/fini arrays and e_entry,
# and code entered after a ret starts past the padding. The stripped program's trace has
# as many instructions as the unstripped one's, and every re-entry is placed.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/full" "$TESTS/data/btrace/calls.c"
cp "$work/full" "$work/stripped"
strip "$work/stripped"
insns() { awk '/^insn: / { n += $2 } END { print n }' "$1"; }
for p in full stripped; do
	"$TK" record --btrace -q -o "$work/$p.tkbt" -- "$work/$p" 2000 >/dev/null
	"$TK" decode --stat "$work/$p.tkbt" >"$work/$p.stat"
	"$TK" info "$work/$p.tkbt" >"$work/$p.info"
	grep -q '(0 unresolved)' "$work/$p.info" || { echo "$p: re-entries not placed"; cat "$work/$p.info"; exit 1; }
done
a=$(insns "$work/full.stat") b=$(insns "$work/stripped.stat")
[ "$a" = "$b" ] || { echo "stripped: $b instructions, unstripped $a"; exit 1; }
echo "ok ($a instructions)"
