#!/usr/bin/env bash
# Hand-built XRay logs (tests/data/xray/mklogs.py): FDR v1-v5 with every record kind and
# basic v1-v3, little-endian ones compared with llvm-xray-16 record for record, big-endian
# twins with their little-endian originals; threads whose records share TSCs.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 "$SRC/tests/data/xray/mklogs.py" "$W"
fail=0
for f in "$W"/*.xray; do
	b=$(basename "$f")
	cmp -s "$f" "$SRC/tests/data/xray/$b" || { echo "FAIL: tests/data/xray/$b is stale (rerun mklogs.py)"; fail=1; }
done
for v in fdr-v1 fdr-v2 fdr-v3 fdr-v4 fdr-v5 basic-v1 basic-v2 basic-v3; do
	llvm-xray-16 convert -f yaml "$W/$v.xray" >"$W/ref.yaml"
	"$TK" convert --to xray-yaml "$W/$v.xray" >"$W/out.yaml"
	"$TK" convert --to xray-yaml "$W/$v-be.xray" >"$W/be.yaml"
	if cmp -s "$W/ref.yaml" "$W/out.yaml"; then echo "ok: $v yaml = llvm-xray"
	else echo "FAIL: $v yaml"; diff "$W/ref.yaml" "$W/out.yaml" | head; fail=1; fi
	cmp -s "$W/out.yaml" "$W/be.yaml" && echo "ok: $v big-endian = little-endian" ||
		{ echo "FAIL: $v big-endian"; fail=1; }
	# fdr-dump reads a v1 buffer's unused tail as records, and leaves the closing '>'
	# off typed events; we do neither
	case $v in fdr-v[2-5])
		llvm-xray-16 fdr-dump "$W/$v.xray" | sed -E "s/^(<Typed Event: .*')$/\1>/" >"$W/ref.dump"
		"$TK" dump --no-offset "$W/$v.xray" | tail -n +2 >"$W/out.dump"
		cmp -s "$W/ref.dump" "$W/out.dump" && echo "ok: $v dump = fdr-dump" ||
			{ echo "FAIL: $v dump"; fail=1; } ;;
	esac
done
# equal TSCs across threads (five in FDR: the merge's tournament has empty leaves) in
# llvm-xray's order, in order and in blocks at once
for v in fdr-v5-ties basic-v3-ties; do
	llvm-xray-16 convert -f yaml "$W/$v.xray" >"$W/ref.yaml"
	for run in 1 "3 TK_XRAY_YAML_BLOCK=2"; do
		read -r j env <<<"$run"
		env $env "$TK" convert --to xray-yaml -j $j "$W/$v.xray" >"$W/out.yaml"
		cmp -s "$W/ref.yaml" "$W/out.yaml" && echo "ok: $v yaml -j $j = llvm-xray" ||
			{ echo "FAIL: $v yaml -j $j"; diff "$W/ref.yaml" "$W/out.yaml" | head; fail=1; }
	done
done
# the unused tail of a v1 buffer is never read, whatever it holds
"$TK" convert "$W/fdr-v1-garbage.xray" >"$W/g.yaml"
"$TK" convert "$W/fdr-v1.xray" >"$W/z.yaml"
cmp -s "$W/g.yaml" "$W/z.yaml" && echo "ok: v1 padding ignored" || { echo "FAIL: v1 padding"; fail=1; }
# -j 1 and -j 4 give the same profile and chrome trace
for f in fdr-v5-inherit fdr-v3 basic-v3; do
	"$TK" profile -j 1 --threads "$W/$f.xray" >"$W/p1"
	"$TK" profile -j 4 --threads "$W/$f.xray" >"$W/p4"
	cmp -s "$W/p1" "$W/p4" && echo "ok: $f -j1 = -j4" || { echo "FAIL: $f -j"; fail=1; }
done
[ $fail -eq 0 ] && echo "xray hand-built: all passed"
exit $fail
