#!/usr/bin/env bash
# Intel PT errata of a named processor (tk_ipt_cpu_errata): the bytes of erratum SKD007
# (an OVF written after a CYC's first byte) read as an overflow only for a processor that
# has it, named by --cpu FAMILY/MODEL or by a perf.data file's CPUID header, in decode and
# in dump; --cpu wins over the header (auto: this machine's, none: no errata); info names
# the processor and what is read; a damaged CPUID header is said, and decoding goes on.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
hex() { printf "$(echo "$1" | sed 's/\([0-9a-f][0-9a-f]\) */\\x\1/g')"; }
# PSB, MODE.Exec 64, FUP 0x1000, PSBEND; CYC's first byte and the OVF; FUP 0x1001 (where
# tracing goes on), TIP.PGD 0x3000 at the jmp rax
{ for _ in 1 2 3 4 5 6 7 8; do hex "02 82"; done
  hex "99 01 7d 00 10 00 00 00 00 02 23 f7 02 f3 7d 01 10 00 00 00 00 61 00 30 00 00 00 00"; } >"$work/t.pt"
hex "90 90 ff e0" >"$work/code.bin"     # nop; nop; jmp rax
raw=(--raw "$work/code.bin:0x1000")

# decode: the overflow with the processor, none without (two CYCs, then the FUP)
st=0; "$TK" decode "${raw[@]}" --cpu 6/142 "$work/t.pt" >"$work/on" 2>/dev/null || st=$?
[ $st = 1 ] || { echo "decode --cpu 6/142: exit status $st, want 1 (packets lost)"; exit 1; }
printf '[overflow at offset 0x1b]\n0000000000001001  nop\n0000000000001002  jmp rax\n[disabled]\n' |
	cmp -s - "$work/on" || { echo "decode --cpu 6/142:"; cat "$work/on"; exit 1; }
"$TK" decode "${raw[@]}" --cpu 6/85 "$work/t.pt" >"$work/off" 2>/dev/null || true
if grep -q overflow "$work/off"; then echo "decode --cpu 6/85 (no SKD007) saw an overflow"; exit 1; fi
"$TK" decode "${raw[@]}" "$work/t.pt" | cmp -s - "$work/off" ||
	{ echo "decode without --cpu differs from a processor without the erratum"; exit 1; }

# dump: one OVF at the CYC's offset, the FUP after it at 0x1e
"$TK" dump --cpu 6/142 "$work/t.pt" >"$work/dump-on"
grep -qx '000000000000001b  *ovf' "$work/dump-on" && grep -q '^000000000000001e  *fup' "$work/dump-on" &&
	! grep -q cyc "$work/dump-on" || { echo "dump --cpu 6/142:"; cat "$work/dump-on"; exit 1; }
"$TK" dump "$work/t.pt" >"$work/dump-off"
[ "$(grep -c ' cyc ' "$work/dump-off")" = 2 ] || { echo "dump without --cpu:"; cat "$work/dump-off"; exit 1; }

# perf.data: the CPUID header names the processor; --cpu overrides it
python3 "$SRC/tests/tools/mkperf.py" "$work/skl.data" --queue 0:4243:"$work/t.pt" \
	--cpuid GenuineIntel,6,142,10
python3 "$SRC/tests/tools/mkperf.py" "$work/none.data" --queue 0:4243:"$work/t.pt"
overflows() {   # FILE [OPTION...]: the overflows decode reports
	local f=$1
	shift
	"$TK" decode "${raw[@]}" "$@" "$f" >"$work/listing" 2>/dev/null || true
	grep -c '^\[overflow' "$work/listing" || true
}
[ "$(overflows "$work/skl.data")" = 1 ] || { echo "perf.data of a 6/142: no overflow"; exit 1; }
[ "$(overflows "$work/none.data")" = 0 ] || { echo "perf.data without CPUID: an overflow"; exit 1; }
[ "$(overflows "$work/skl.data" --cpu 6/85)" = 0 ] ||
	{ echo "--cpu 6/85 did not override the CPUID header"; exit 1; }
"$TK" dump "$work/skl.data" >"$work/dump-skl"
grep -q ' ovf' "$work/dump-skl" || { echo "dump of the 6/142 perf.data: no ovf"; exit 1; }
"$TK" info "$work/skl.data" >"$work/info-skl"
"$TK" info "$work/none.data" >"$work/info-none"
grep -qx '  cpu:      GenuineIntel,6,142,10 (errata read: SKD007, SKD022, SKL168, SKL014)' "$work/info-skl" ||
	{ echo "info:"; cat "$work/info-skl"; exit 1; }
grep -qx '  cpu:      not recorded (errata read: none)' "$work/info-none" ||
	{ echo "info without CPUID:"; cat "$work/info-none"; exit 1; }

# a damaged CPUID header (its string longer than its section): said with its offset, the
# trace decoded all the same (without errata), the exit status saying data was skipped
at=$(python3 - "$work/skl.data" "$work/bad.data" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
data_off, data_size = struct.unpack_from('<QQ', b, 40)
off, size = struct.unpack_from('<QQ', b, data_off + data_size)   # the one feature: CPUID
struct.pack_into('<I', b, off, size + 100)
open(sys.argv[2], 'wb').write(b)
print(hex(off))
PY
)
st=0; "$TK" decode "${raw[@]}" "$work/bad.data" >"$work/bad.out" 2>"$work/bad.err" || st=$?
[ $st = 1 ] && grep -q "offset $at: CPUID header of 68 bytes holds no string" "$work/bad.err" &&
	grep -q '^0000000000001000  nop' "$work/bad.out" ||
	{ echo "damaged CPUID header: status $st"; cat "$work/bad.err" "$work/bad.out"; exit 1; }
st=0; "$TK" info "$work/bad.data" >"$work/info-bad" 2>"$work/info-bad.err" || st=$?
[ $st = 1 ] && grep -qx '  cpu:      damaged header, not read (errata read: none)' "$work/info-bad" ||
	{ echo "info on a damaged CPUID header: status $st"; cat "$work/info-bad" "$work/info-bad.err"; exit 1; }

# --cpu auto: this machine's processor (as /proc/cpuinfo names it, apart from CPUID);
# none: no errata, whatever the header says
vendor=$(awk -F': ' '$1 ~ /^vendor_id/ { print $2; exit }' /proc/cpuinfo)
family=$(awk -F': ' '$1 ~ /^cpu family/ { print $2; exit }' /proc/cpuinfo)
model=$(awk -F': ' '$1 ~ /^model[ \t]*$/ { print $2; exit }' /proc/cpuinfo)
host=()
[ "$vendor" = GenuineIntel ] && host=(--cpu "$family/$model")
"$TK" decode "${raw[@]}" --cpu auto "$work/t.pt" >"$work/auto" 2>/dev/null || true
"$TK" decode "${raw[@]}" "${host[@]}" "$work/t.pt" >"$work/host" 2>/dev/null || true
cmp -s "$work/auto" "$work/host" || { echo "--cpu auto differs from this machine's ${host[*]:-(no errata)}"; exit 1; }
[ "$(overflows "$work/skl.data" --cpu none)" = 0 ] || { echo "--cpu none read the header's errata"; exit 1; }

# a processor that is not one: refused, saying what is wanted
st=0; "$TK" decode "${raw[@]}" --cpu 6/x "$work/t.pt" >/dev/null 2>"$work/err" || st=$?
[ $st = 2 ] && grep -q 'FAMILY/MODEL' "$work/err" || { echo "--cpu 6/x: status $st"; cat "$work/err"; exit 1; }
# dump dumps every queue: a CPU list there is refused
st=0; "$TK" dump --cpu 0 "$work/skl.data" >/dev/null 2>"$work/err" || st=$?
[ $st = 2 ] && grep -q 'FAMILY/MODEL' "$work/err" || { echo "dump --cpu 0: status $st"; cat "$work/err"; exit 1; }
# and its help offers none (decode's does)
"$TK" help dump | grep -q -- '--cpu FAMILY/MODEL' && ! "$TK" help dump | grep -q -- '--cpu LIST' &&
	"$TK" help decode | grep -q -- '--cpu LIST|FAMILY/MODEL' ||
	{ echo "help dump / decode: --cpu"; "$TK" help dump | grep -A1 -- --cpu; exit 1; }
echo "ipt errata: ok"
