#!/usr/bin/env bash
# lib/formats/ipt/fast_table.h is what its generator (fast_table.py beside it) writes from
# the Intel PT opcode map, byte for byte: a change goes into the generator, not the table.
set -euo pipefail
: "${SRC:?}"
h=$SRC/lib/formats/ipt/fast_table.h
if ! python3 "$SRC/lib/formats/ipt/fast_table.py" | cmp - "$h"; then
	echo "$h differs from its generator's output:"
	python3 "$SRC/lib/formats/ipt/fast_table.py" | diff "$h" - | head -20
	exit 1
fi
echo "ipt fast table: $(grep -c '^	{' "$h") entries, as generated"
