#!/usr/bin/env bash
# The shared library's ABI is the stable API and nothing else: libtracekit.so (built with
# -fvisibility=hidden) exports exactly the functions the public headers mark TK_API, all
# named tk_*, none of the internal tier (include/tracekit/internal/); a program built
# against the public headers links with it and runs; one calling an internal function does
# not link.
set -euo pipefail
: "${SRC:?}" "${BUILD:?}" "${TESTS:?}" "${CC:?}"
so=$BUILD/libtracekit.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# (a fuzzing build's coverage sections add their linker-made bounds, __start/__stop___sancov_*)
nm -D --defined-only "$so" | awk '{print $NF}' | grep -v '^__st\(art\|op\)___sancov_' |
	sort -u >"$work/exported"
if grep -v '^tk_' "$work/exported" >"$work/other"; then
	echo "libtracekit.so exports names outside tk_*:"; head -20 "$work/other"; exit 1
fi
# what the public headers mark TK_API (declarations start a line)
sed -n 's/^TK_API [^(]*\btk_\([a-z0-9_]*\) *(.*/tk_\1/p' "$SRC"/include/tracekit/*.h | sort -u >"$work/api"
[ "$(wc -l <"$work/api")" -ge 200 ] || { echo "only $(wc -l <"$work/api") TK_API functions found"; exit 1; }
diff -u "$work/api" "$work/exported" >"$work/diff" || {
	echo "exported symbols (+) and TK_API declarations (-) differ:"; grep '^[-+]tk' "$work/diff" | head -20; exit 1; }
sed -n 's/^[^ #/].*\b\(tk_[a-z0-9_]*\) *(.*/\1/p' "$SRC"/include/tracekit/internal/*.h | sort -u >"$work/internal"
[ -s "$work/internal" ] || { echo "no functions found in include/tracekit/internal/"; exit 1; }
if comm -12 "$work/internal" "$work/exported" | grep .; then
	echo "libtracekit.so exports the internal functions above"; exit 1
fi

# a program of the public API against the shared library (with the sanitizers when the
# library has them, whose runtime the program must bring)
flags=()
[ "${TK_SANITIZE:-0}" = 1 ] && flags=(-fsanitize=address,undefined)
"$CC" "${flags[@]}" -I"$SRC/include" -o "$work/detect" "$TESTS/data/abi/detect.c" \
	-L"$BUILD" -ltracekit -Wl,-rpath,"$BUILD"
ldd "$work/detect" >"$work/ldd"   # whole: grep -q would stop reading it (pipefail)
grep -q "libtracekit.so.0 => $BUILD/" "$work/ldd" ||
	{ echo "detect is not linked with $so:"; cat "$work/ldd"; exit 1; }
out=$(cd "$TESTS/data" && "$work/detect" xray/basic-v1.xray kanata/gem5-2cpu.txt)
want=$'xray/basic-v1.xray: xray\nkanata/gem5-2cpu.txt: gem5'
[ "$out" = "$want" ] || { echo "detect printed:"; echo "$out"; echo "want:"; echo "$want"; exit 1; }
if "$CC" "${flags[@]}" -I"$SRC/include" -o "$work/internal" "$TESTS/data/abi/internal.c" \
	-L"$BUILD" -ltracekit -Wl,-rpath,"$BUILD" 2>"$work/ld.err"; then
	echo "a program calling tk_u64set_add (internal) links with $so"; exit 1
fi
grep -q 'undefined reference to .tk_u64set_add' "$work/ld.err" ||
	{ echo "internal.c did not link for another reason:"; cat "$work/ld.err"; exit 1; }
echo "abi: $(wc -l <"$work/exported") tk_* functions exported, = the TK_API ones; shared link ok"
