# tracekit: the README's two commands are `make run` and `make test`.
# Both install missing Debian packages first (scripts/install-deps.sh), so they work on a
# fresh Debian 12 machine.

JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_SECONDS ?= 10
CMAKE_FLAGS ?=

.PHONY: all deps build run test unit asan tsan clean bench

all: build

deps:
	@bash scripts/install-deps.sh

# (after deps: cmake needs the packages it installs, also under make -j)
$(BUILD)/Makefile: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -DCMAKE_C_COMPILER=gcc -DTK_WERROR=ON $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/Makefile
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# The main job on bundled examples.
run: build
	@bash scripts/run-example.sh $(BUILD)/tracekit

# Unit, golden, oracle and fuzz-replay tests in the gcc -Werror build.
unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang-16), plus every
# fuzz target run for FUZZ_SECONDS.
asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_C_COMPILER=clang-16 -DCMAKE_BUILD_TYPE=Debug \
		-DTK_WERROR=ON -DTK_SANITIZE=ON -DTK_FUZZ=ON -DTK_FUZZ_SECONDS=$(FUZZ_SECONDS) \
		$(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) -- --no-print-directory
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# The parallel commands under ThreadSanitizer (clang-16), against -j 1 (scripts/tsan.sh).
tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_C_COMPILER=clang-16 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DTK_WERROR=ON -DTK_TSAN=ON -DTK_TESTS=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target tracekit tkbtrace -- --no-print-directory
	bash scripts/tsan.sh $(TSAN_BUILD)

test: unit asan tsan
	@echo "tracekit: all test suites passed"

bench: build
	@for b in bench/*.sh; do [ "$$b" = bench/lib.sh ] || bash "$$b"; done

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
