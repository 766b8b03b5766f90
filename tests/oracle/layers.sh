#!/usr/bin/env bash
# The dependency rule (tests/tools/layers.rules, explained in docs/DESIGN.md) holds on the
# tree: every #include "..." and every call between the object files of the library and the
# command. And the checker does reject what the rule forbids: a fake tree with one use of each
# forbidden kind (tests/data/layers/bad, compiled here for its calls) must be refused with
# exactly the messages listed in its file "expected", each naming the edge.
set -euo pipefail
: "${SRC:?}" "${BUILD:?}" "${TESTS:?}"
rules=$TESTS/tools/layers.rules
check=$TESTS/tools/layers.py
python3 "$check" --rules "$rules" --root "$SRC" \
	--objects "$BUILD/CMakeFiles/tracekit_obj.dir" --objects "$BUILD/CMakeFiles/tracekit.dir"

bad=$TESTS/data/layers/bad
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# one compiler run (the fixture's file names are unique), then each object where the
# checker looks for it: beside its source's path
mkdir "$work/cc"
(cd "$bad" && find . -name '*.c' | sort) >"$work/list"
(cd "$work/cc" && sed "s|^|$bad/|" "$work/list" | xargs cc -c -I"$bad/include" -I"$bad/lib")
while read -r c; do
	mkdir -p "$work/obj/$(dirname "$c")"
	mv "$work/cc/$(basename "$c" .c).o" "$work/obj/$c.o"
done <"$work/list"
if python3 "$check" --rules "$rules" --root "$bad" --objects "$work/obj" >"$work/out"; then
	echo "the checker accepts $bad"; cat "$work/out"; exit 1
fi
sed 's/^layers: //' "$work/out" | grep -v ' uses against ' | sort >"$work/got"
grep -v '^#' "$bad/expected" | sort >"$work/want"
diff -u "$work/want" "$work/got" || { echo "the checker's messages on $bad differ from its expected file"; exit 1; }
echo "layers: the bad tree is refused with its $(wc -l <"$work/want") messages"
