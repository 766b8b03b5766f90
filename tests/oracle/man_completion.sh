#!/usr/bin/env bash
# The manual pages and the shell completion the build writes and `cmake --install`
# installs: a page per docs/tracekit*.md that man renders at 80 columns without a warning,
# named and summarised as `tracekit help` names the command; bash completion that offers
# the command names `tracekit help` lists and, after `profile --to`, the outputs profile
# accepts (each tried) including every one its help names.
set -euo pipefail
: "${SRC:?}" "${BUILD:?}" "${TK:?}"
command -v man >/dev/null || { echo "SKIP: no man (Debian package man-db)"; exit 77; }
command -v pandoc >/dev/null || { echo "SKIP: no pandoc (scripts/install-deps.sh installs it)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# every page, installed, renders without warnings
cmake --install "$BUILD" --prefix "$work/inst" >/dev/null
for md in "$SRC"/docs/tracekit*.md; do
	name=$(basename "$md" .md)
	page=$work/inst/share/man/man1/$name.1
	[ -f "$page" ] || { echo "$name: not installed as $page"; fail=1; continue; }
	w=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	[ -z "$w" ] || { echo "$name: man warns: $w"; fail=1; }
	# NAME: "tracekit-CMD - summary", the summary `tracekit help` prints
	got=$(MANWIDTH=200 man -l "$page" 2>/dev/null | sed -n '/^NAME/{n;p;q}' | sed 's/^ *//')
	if [ "$name" != tracekit ]; then
		cmd=${name#tracekit-}
		want="$name - $("$TK" help | awk -v c="$cmd" '$1 == c { $1 = ""; sub(/^ +/, ""); print }')"
		[ "$got" = "$want" ] || { echo "$name: NAME is '$got', want '$want'"; fail=1; }
	fi
done
for f in share/bash-completion/completions/tracekit share/zsh/vendor-completions/_tracekit; do
	[ -s "$work/inst/$f" ] || { echo "$f: not installed"; fail=1; }
done

# bash: complete WORDS... (the last one the word being completed)
complete_words() {
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tracekit
		printf "%s\n" "${COMPREPLY[@]}"' sh "$work/inst/share/bash-completion/completions/tracekit" "$@" | sort
}
cd "$work"
"$TK" help | awk '/^commands:/ { on = 1; next } on && NF == 0 { on = 0 } on { print $1 }' | sort >want.cmds
complete_words tracekit "" >got.cmds
cmp -s want.cmds got.cmds || { echo "command names:"; diff want.cmds got.cmds; fail=1; }
[ "$(complete_words tracekit re)" = "$(printf 'record\nreport')" ] || { echo "'re' completes to $(complete_words tracekit re)"; fail=1; }

complete_words tracekit profile --to "" >to.got
[ -s to.got ] || { echo "profile --to: nothing offered"; fail=1; }
# each value profile's help names is offered ...
"$TK" help profile | sed -n '/--to FMT/,/^  --[a-z]/p' | sed '$d' | sed 's/.*--to FMT//' |
	tr ', ' '\n\n' | grep -v '^$' | sort >to.help
comm -23 to.help to.got | sed 's/^/profile --to: not offered: /' | grep . && fail=1
# ... and each value offered is one profile takes
while read -r v; do
	if "$TK" profile --to "$v" "$SRC/tests/data/xray/fdr-v5.xray" 2>&1 >/dev/null | grep -q "unknown output"; then
		echo "profile --to $v: offered, but profile does not know it"
		fail=1
	fi
done <to.got
# options: those profile's help names
complete_words tracekit profile --sor >opt.got
[ "$(cat opt.got)" = "--sort" ] || { echo "profile --sor: $(cat opt.got)"; fail=1; }

if command -v zsh >/dev/null; then
	zsh -n "$work/inst/share/zsh/vendor-completions/_tracekit" || { echo "zsh: syntax error"; fail=1; }
fi
[ $fail = 0 ] && echo "man pages and completion: ok ($(ls "$work/inst/share/man/man1" | wc -l) pages)"
exit $fail
