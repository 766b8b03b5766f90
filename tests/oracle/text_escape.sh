#!/usr/bin/env bash
# Text from a trace never reaches the terminal raw (issue 31 item 27): a Kanata log with
# ESC[2J, an OSC title sequence and \r in its labels and in a line the reader rejects, a
# program whose function is named with ESC and \r (objcopy --redefine-sym) recorded with
# --btrace, an XRay log whose custom and typed event payloads hold ESC, \r, BEL and the
# one-byte CSI, and a file name with ESC in it: every human-readable output and message
# (stdout and stderr) holds no C0 control character but newline and tab, no DEL, no C1
# control. The escaped names are checked too, so an output that drops them does not pass.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0

# OUT and ERR of "$TK ARGS..." hold no control characters (LC_ALL=C: byte by byte)
clean() {
	local what=$1
	shift
	"$TK" "$@" >"$W/out" 2>"$W/err" || true
	if LC_ALL=C grep -aq $'[\x01-\x08\x0b-\x1f\x7f\x80-\x9f]' "$W/out" "$W/err"; then
		# (0x80-0x9f are C1 controls only outside UTF-8 sequences; these inputs hold none)
		echo "FAIL: $what: raw control characters"; cat -A "$W/out" "$W/err" | head -20; fail=1
	else
		echo "ok: $what"
	fi
}

# Kanata
printf 'Kanata\t0004\nC=\t0\nI\t0\t0\t0\nL\t0\t0\tadd \033[2Jx\rhidden\nQ\033[2Jbad\r\n' >"$W/k.log"
printf 'S\t0\t0\tF\nC\t1\nE\t0\t0\tF\nR\t0\t0\t0\nL\t5\t0\t\033]0;title\007\n' >>"$W/k.log"
cp "$W/k.log" "$W/k"$'\033[2J'".log"
for c in dump check info stats "stats --slowest 3" "convert --to chrome"; do
	clean "kanata $c" $c "$W/k.log"
	clean "kanata $c, file name" $c "$W/k"$'\033[2J'".log"
done
"$TK" dump "$W/k.log" >"$W/out" || true
grep -qF 'add \x1b[2Jx\rhidden' "$W/out" || { echo "FAIL: kanata label not escaped as \\x1b, \\r"; fail=1; }
"$TK" check "$W/k.log" >"$W/out" 2>&1 || true
grep -qF "unknown command 'Q\\x1b[2Jbad" "$W/out" || { echo "FAIL: kanata excerpt not escaped"; cat "$W/out"; fail=1; }

# ELF symbol names (a branch trace of a program whose function is named with ESC and \r)
cat >"$W/p.c" <<'C'
#include <stdio.h>
int work(int n);
int main(void) { int s = 0; for (int i = 0; i < 50; i++) s += work(i); printf("%d\n", s); return 0; }
C
cat >"$W/w.c" <<'C'
int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += i; return s; }
C
bad=$'wo\033[2Jrk\r'
for f in p w; do
	cc -O1 -c "$W/$f.c" -o "$W/$f.o"
	objcopy --redefine-sym "work=$bad" "$W/$f.o"
done
cc "$W/p.o" "$W/w.o" -o "$W/prog"
"$TK" record --btrace -o "$W/t.tkbt" -- "$W/prog" >/dev/null 2>"$W/rec.err"
for c in "profile" "profile --to calltree" "profile --to folded" "profile --to callgrind" \
	 "profile --to lines" "profile --to blocks" "info"; do
	clean "ELF names: $c" $c "$W/t.tkbt"
done
"$TK" profile --to folded "$W/t.tkbt" >"$W/out"
grep -qF 'wo\x1b[2Jrk\r' "$W/out" || { echo "FAIL: symbol name not escaped"; cat "$W/out"; fail=1; }

# XRay custom and typed event payloads
python3 - "$W" "$SRC" <<'PY'
import sys
out, src = sys.argv[1], sys.argv[2]
sys.argv = ['mklogs', out + '/xr']
sys.path.insert(0, src + '/tests/data/xray')
import mklogs as M   # writes its own logs into out/xr as it loads
F = M.Fdr(5, False)
body = F.start(7, 42, 1700000000, 0, cpu=1, tsc=100)
body += F.f(M.ENTER, 1, 0) + F.custom(b'\x1b[2J\rGONE\x9b1m', delta=2)
body += F.typed(3, b'\x1b]0;t\x07', 1) + F.f(M.EXIT, 1, 5)
open(out + '/ctl.xray', 'wb').write(M.hdr(5, 1, False) + F.buffer(body))
PY
for c in dump info profile "convert --to xray-yaml"; do
	clean "xray $c" $c "$W/ctl.xray"
done

# messages: a file name with ESC in it that cannot be read
clean "message naming a file" info "$W/no"$'\033[2J\r'"such"
grep -qF 'no\x1b[2J\rsuch' "$W/err" || { echo "FAIL: file name in a message not escaped"; cat "$W/err"; fail=1; }

[ $fail -eq 0 ] && echo "text escape: all passed"
exit $fail
