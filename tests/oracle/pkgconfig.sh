#!/usr/bin/env bash
# `pkg-config tracekit` works after `cmake --install --prefix P` on Debian 12: the prefix is
# P (not the configured one), nothing names a package without a .pc file (zydis), and a
# program of the public API builds and runs with `pkg-config --cflags --libs`, against the
# shared library and (with --static) the static one. The internal tier is not installed.
set -euo pipefail
: "${SRC:?}" "${BUILD:?}" "${TESTS:?}" "${CC:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$BUILD" --prefix "$prefix" >"$work/install.log"
pc=$(find "$prefix" -name tracekit.pc)
[ -n "$pc" ] || { echo "no tracekit.pc under $prefix"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
pkg-config --exists --print-errors tracekit
got=$(realpath "$(pkg-config --variable=prefix tracekit)")
[ "$got" = "$(realpath "$prefix")" ] || { echo "pkg-config's prefix is $got, installed to $prefix"; exit 1; }
[ ! -e "$prefix/include/tracekit/internal" ] || { echo "include/tracekit/internal was installed"; exit 1; }
libdir=$(pkg-config --variable=libdir tracekit)

flags=()
[ "${TK_SANITIZE:-0}" = 1 ] && flags=(-fsanitize=address,undefined)
want=$'xray/basic-v1.xray: xray\nkanata/gem5-2cpu.txt: gem5'
# shared
# shellcheck disable=SC2046
"$CC" "${flags[@]}" -o "$work/detect" "$TESTS/data/abi/detect.c" \
	$(pkg-config --cflags --libs tracekit) -Wl,-rpath,"$libdir"
# (ldd's output is taken whole first: grep -q would stop reading and, with pipefail, fail it)
ldd "$work/detect" >"$work/ldd"
grep -q "libtracekit.so.0 => $(realpath "$libdir")/\|libtracekit.so.0 => $libdir/" "$work/ldd" ||
	{ echo "detect does not use the installed libtracekit.so:"; cat "$work/ldd"; exit 1; }
out=$(cd "$TESTS/data" && "$work/detect" xray/basic-v1.xray kanata/gem5-2cpu.txt)
[ "$out" = "$want" ] || { echo "shared: detect printed:"; echo "$out"; exit 1; }
# static: the archive by name, the private dependencies from --static
# shellcheck disable=SC2046
"$CC" "${flags[@]}" -o "$work/detect-static" "$TESTS/data/abi/detect.c" \
	$(pkg-config --cflags tracekit) \
	$(pkg-config --static --libs tracekit | sed 's/-ltracekit\b/-l:libtracekit.a/')
ldd "$work/detect-static" >"$work/ldd"
if grep -q libtracekit "$work/ldd"; then
	echo "detect-static uses the shared library"; cat "$work/ldd"; exit 1
fi
out=$(cd "$TESTS/data" && "$work/detect-static" xray/basic-v1.xray kanata/gem5-2cpu.txt)
[ "$out" = "$want" ] || { echo "static: detect printed:"; echo "$out"; exit 1; }
echo "pkg-config: prefix $prefix, shared and static builds run"
