#!/usr/bin/env bash
# Install the Debian 12 packages tracekit needs to build and test, skipping those present.
# Safe to run repeatedly; needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
	build-essential cmake pkg-config
	libzydis-dev libelf-dev libdw-dev zlib1g-dev libzstd-dev zstd
	libisal-dev              # gzip read by ISA-L: three times zlib's speed
	libcmocka-dev libiberty-dev
	clang-16 llvm-16 llvm-16-dev libclang-rt-16-dev
	libipt-dev linux-perf valgrind protobuf-compiler hyperfine bc time
	strace                   # delays one system call in a test (btrace_clock)
	libc6-dbg pandoc man-db
	golang-go                # go tool pprof, which the pprof test runs on the output
	qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
	chromium
	libopenmpi-dev openmpi-bin
)
# Node.js (for the pprof reader in tests) may come from another repository; only add
# Debian's when there is none at all.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -gt 0 ]; then
	echo "install-deps: installing ${missing[*]}" >&2
	sudo_cmd=()
	[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
	export DEBIAN_FRONTEND=noninteractive
	"${sudo_cmd[@]}" apt-get update -qq
	"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The output tests' npm tools (tests/tools/package.json: the pprof reader, puppeteer-core
# that drives Debian's chromium for the report pages, eslint for the page's script), kept
# inside the source tree.
here=$(cd "$(dirname "$0")/.." && pwd)
npm_missing=0
for m in pprof-format puppeteer-core eslint; do
	[ -d "$here/tests/tools/node_modules/$m" ] || npm_missing=1
done
if command -v npm >/dev/null 2>&1 && [ -f "$here/tests/tools/package.json" ] && [ $npm_missing = 1 ]; then
	(cd "$here/tests/tools" && npm install --silent --no-audit --no-fund >/dev/null 2>&1) ||
		echo "install-deps: npm install of test tools failed" >&2
fi
exit 0
