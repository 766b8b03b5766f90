#!/usr/bin/env bash
# The report page's JavaScript (lib/output/report/report.js) and its browser test's: parsed
# by node and checked with ESLint's recommended rules (npm, tests/tools); the template
# names nothing on the network (no URL, no external script, style or font).
set -euo pipefail
: "${SRC:?}"
tpl=$SRC/lib/output/report
for f in "$tpl/report.js" "$SRC/tests/oracle/report_browser.js"; do
	node --check "$f" || { echo "$f: node cannot parse it"; exit 1; }
done
if grep -nE 'https?://|//[a-z0-9.-]+\.[a-z]{2,}/|@import|url\(|<link|<script[^>]*src=' \
	"$tpl/report.html" "$tpl/report.css" "$tpl/report.js"; then
	echo "the template refers to something outside the page"
	exit 1
fi
eslint=$SRC/tests/tools/node_modules/.bin/eslint
if [ ! -x "$eslint" ]; then
	echo "SKIP: eslint is not installed in tests/tools (scripts/install-deps.sh installs it)"
	exit 77
fi
cd "$SRC"
"$eslint" --max-warnings 0 -c tests/tools/eslint.config.js lib/output/report/report.js \
	tests/oracle/report_browser.js
echo "report JS: node --check, no network references, eslint: ok"
