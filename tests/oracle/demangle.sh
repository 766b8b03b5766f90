#!/usr/bin/env bash
# Names are demangled in every output, exactly as c++filt (binutils) prints them: a C++
# program (namespaces, templates, operators, a lambda, an anonymous namespace) and a symbol
# table of Rust names (legacy and v0), recorded with record --btrace. Each function the
# trace calls shows as c++filt's name (a PLT stub's "@plt" kept after it) in the text, CSV,
# JSON, folded, call-tree, blocks and pprof reports and the Chrome and Perfetto timelines,
# and its mangled name nowhere; --no-demangle keeps the mangled names; --short-names drops
# template arguments and parameters.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
g++ -O1 -g -o names "$SRC/tests/data/demangle/names.cc"
cc -O1 -g -o rust_names "$SRC/tests/data/demangle/rust_names.c"

for prog in names rust_names; do
	"$TK" record --btrace -q -o $prog.tkbt -- ./$prog >/dev/null
	"$TK" profile --no-demangle --to csv -o raw.csv $prog.tkbt
	# the mangled names the trace calls, each with c++filt's name
	python3 - raw.csv > mangled.txt <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r['function'].startswith(('_Z', '_R')):
        print(r['function'])
PY
	[ "$(wc -l < mangled.txt)" -ge 6 ] || { echo "$prog: too few mangled names called"; exit 1; }
	sed 's/@.*//' mangled.txt | c++filt > base.txt
	paste -d '\t' mangled.txt base.txt | while IFS=$'\t' read -r m d; do
		case $m in *@*) printf '%s\t%s@%s\n' "$m" "$d" "${m#*@}" ;; *) printf '%s\t%s\n' "$m" "$d" ;; esac
	done > expect.tsv
	for to in text csv json folded calltree blocks pprof; do
		"$TK" profile --to $to -o out.$to $prog.tkbt
	done
	node "$SRC/tests/tools/pprof-folded.js" out.pprof > out.pprof.txt
	"$TK" convert --to chrome -o out.chrome $prog.tkbt
	"$TK" convert --to perfetto -o out.perfetto $prog.tkbt
	python3 - expect.tsv out.text out.csv out.json out.folded out.calltree out.blocks \
		out.pprof.txt out.chrome out.perfetto <<'PY'
import json, sys
expect = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
bad = []
for path in sys.argv[2:]:
    text = open(path, 'rb').read().decode('utf-8', 'replace')
    if path.endswith('.json') or path.endswith('.chrome'):
        text = json.dumps(json.loads(text), ensure_ascii=False)   # names unescaped
        text = text.replace('\\"', '"')
    for m, d in expect:
        if m == d:
            bad.append(f'{m}: c++filt leaves it as it is')
        elif d not in text:
            bad.append(f'{path}: no {d!r} (c++filt of {m})')
        elif m in text:
            bad.append(f'{path}: {m} left mangled')
if bad:
    sys.exit('\n'.join(bad))
print(f'{len(expect)} names x {len(sys.argv) - 2} outputs as c++filt prints them')
PY
	# --no-demangle: the names as the binary has them
	cut -f1 expect.tsv | while read -r m; do grep -qF "\"$m\"" raw.csv; done
done

# --short-names: no template arguments, no parameters (operators and qualified paths kept)
"$TK" profile --short-names --to csv -o short.csv names.tkbt
"$TK" profile --short-names --to csv -o short_r.csv rust_names.tkbt
for n in 'geo::Ring::push' 'geo::Vec::operator<' 'geo::Vec::operator+' 'twice' \
	'(anonymous namespace)::hidden' 'main::{lambda#1}::operator()' 'std::vector::_M_realloc_insert'; do
	grep -qxF "\"$n\"" <(cut -d, -f1 short.csv) || { echo "--short-names: no $n"; cat short.csv; exit 1; }
done
for n in 'r::main' '<r::shapes::Sq>::area' 'r::main' 'std::rt::lang_start::{{closure}}' \
	'std::rt::lang_start_internal::{closure#0}::{closure#0}::{closure#1}'; do
	grep -qxF "\"$n\"" <(cut -d, -f1 short_r.csv) || { echo "--short-names: no $n"; cat short_r.csv; exit 1; }
done
! grep -q '[<(]' <(cut -d, -f1 short.csv | grep -v 'operator\|anonymous') || { echo "--short-names left < or ("; exit 1; }
echo "demangle: ok"
