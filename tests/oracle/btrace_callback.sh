#!/usr/bin/env bash
# A callback from untraced code into a local function of a stripped program: qsort (libc,
# not traced) calls the program's static comparator. .dynsym does not list it, so only
# the unwind table's FDE starts tell the profile that tracing resumed at a function entry.
# Ground truth: the comparator counts its own calls and the program prints the count; the
# unstripped program's profile (comparator and main named by .symtab) gives the same rows
# for the comparator, main and qsort@plt as the stripped one (named by module offset).
# Then a copy whose unwind table is damaged.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/cb.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
static unsigned long ncmp;
static __attribute__((noinline)) int cmp_ints(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	ncmp++;
	return (x > y) - (x < y);
}
int main(void)
{
	int v[500];
	unsigned s = 1;
	for (int i = 0; i < 500; i++) {
		s = s * 1103515245u + 12345u;
		v[i] = (int)(s >> 16);
	}
	qsort(v, 500, sizeof v[0], cmp_ints);
	printf("%lu\n", ncmp);
	return 0;
}
C
cc -O1 -o "$work/cb" "$work/cb.c"
strip -o "$work/cbs" "$work/cb"
if nm "$work/cbs" >/dev/null 2>&1 && nm "$work/cbs" 2>/dev/null | grep -q cmp_ints; then
	echo "strip left the comparator's symbol"; exit 1
fi
ncmp=$("$work/cb")
cmp_off=$(nm "$work/cb" | awk '$3 == "cmp_ints" {sub(/^0+/, "", $1); print $1}')
main_off=$(nm "$work/cb" | awk '$3 == "main" {sub(/^0+/, "", $1); print $1}')

for b in cb cbs; do
	got=$("$TK" record --btrace -o "$work/$b.tkbt" -- "$work/$b" 2>"$work/$b.err") ||
		{ echo "$b: record failed"; cat "$work/$b.err"; exit 1; }
	[ "$got" = "$ncmp" ] || { echo "$b printed '$got', not '$ncmp'"; exit 1; }
	"$TK" profile --to csv "$work/$b.tkbt" >"$work/$b.csv" 2>"$work/$b.perr" ||
		{ echo "$b: profile failed"; cat "$work/$b.perr"; exit 1; }
done

# row FILE NAME: calls, inclusive and exclusive instructions of function NAME
row() { awk -F, -v n="\"$2\"" '$1 == n {print $2, $5, $6}' "$1"; }
want_cmp=$(row "$work/cb.csv" cmp_ints)
want_main=$(row "$work/cb.csv" main)
want_qsort=$(row "$work/cb.csv" qsort@plt)
[ "${want_cmp%% *}" = "$ncmp" ] ||
	{ echo "unstripped: cmp_ints has '$want_cmp', not $ncmp calls"; cat "$work/cb.csv"; exit 1; }
got_cmp=$(row "$work/cbs.csv" "cbs+0x$cmp_off")
got_main=$(row "$work/cbs.csv" "cbs+0x$main_off")
got_qsort=$(row "$work/cbs.csv" qsort@plt)
[ "$got_cmp" = "$want_cmp" ] ||
	{ echo "stripped: comparator cbs+0x$cmp_off '$got_cmp', want '$want_cmp'"; cat "$work/cbs.csv"; exit 1; }
[ "$got_main" = "$want_main" ] ||
	{ echo "stripped: main cbs+0x$main_off '$got_main', want '$want_main'"; cat "$work/cbs.csv"; exit 1; }
[ "$got_qsort" = "$want_qsort" ] ||
	{ echo "stripped: qsort@plt '$got_qsort', want '$want_qsort'"; cat "$work/cbs.csv"; exit 1; }

# The same program with its unwind table's count damaged (billions of FDEs): the recorder
# reads the loaded table and must not follow the count past the segment (it crashed the
# program); the profile warns with the table's offset and still decodes.
cp "$work/cbs" "$work/cbd"
hdr=$(readelf -lW "$work/cbd" | awk '$1 == "GNU_EH_FRAME" {print $2}')
printf '\360\377\377\177' | dd of="$work/cbd" bs=1 seek=$((hdr + 8)) conv=notrunc status=none
got=$("$TK" record --btrace -o "$work/cbd.tkbt" -- "$work/cbd" 2>"$work/cbd.err") ||
	{ echo "damaged table: record failed"; cat "$work/cbd.err"; exit 1; }
[ "$got" = "$ncmp" ] || { echo "damaged table: printed '$got', not '$ncmp'"; cat "$work/cbd.err"; exit 1; }
"$TK" profile --to csv "$work/cbd.tkbt" >"$work/cbd.csv" 2>"$work/cbd.perr" ||
	{ echo "damaged table: profile failed"; cat "$work/cbd.perr"; exit 1; }
grep -q "cbd: .eh_frame_hdr at offset $(printf 0x%x $((hdr))) claims" "$work/cbd.perr" ||
	{ echo "damaged table: no warning with the offset"; cat "$work/cbd.perr"; exit 1; }
grep -q '^"qsort@plt",1,' "$work/cbd.csv" || { echo "damaged table: no qsort@plt call"; cat "$work/cbd.csv"; exit 1; }
echo ok
