# Thin wrapper over CMake. The README's two commands: `make demo`, `make test`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_OPTS ?=
FUZZ_SECONDS ?= 20
SOAK_SECONDS ?= 60
# make test's bounded fuzz and soak stages (docs/reliability.md)
CI_FUZZ_SECONDS ?= 4
CI_SOAK_SECONDS ?= 25
CI_TSAN_SECONDS ?= 20
CI_HYBRID_SOAK_SECONDS ?= 12

.PHONY: all deps build test test-arm test-release test-asan demo fleet-demo bench fuzz soak format format-check func-lengths lint layers clean

all: build

deps:
	@scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_OPTS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: deps format-check func-lengths lint
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_OPTS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@scripts/layers.py $(BUILD)
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTPS_SANITIZE=ON $(CMAKE_OPTS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@echo "== soak: $(CI_SOAK_SECONDS) s, the ASan server under load with cancels =="
	@scripts/soak.sh $(CI_SOAK_SECONDS) $(ASAN_BUILD)
	@echo "== soak: $(CI_HYBRID_SOAK_SECONDS) s, a hybrid mixture of experts (qwen35moe tiny) =="
	@SOAK_ARCH=qwen35moe scripts/soak.sh $(CI_HYBRID_SOAK_SECONDS) $(ASAN_BUILD)
	@echo "== soak: $(CI_HYBRID_SOAK_SECONDS) s, latent attention and experts (deepseek2 tiny) =="
	@SOAK_ARCH=deepseek2 scripts/soak.sh $(CI_HYBRID_SOAK_SECONDS) $(ASAN_BUILD)
	@$(MAKE) --no-print-directory tsan TSAN_SECONDS=$(CI_TSAN_SECONDS)
	@echo "== fuzz: every harness for $(CI_FUZZ_SECONDS) s =="
	@scripts/fuzz.sh $(CI_FUZZ_SECONDS)
	@echo "== tests: Release =="
	@cd $(BUILD) && ctest -j $(JOBS) --output-on-failure
	@echo "== tests: AddressSanitizer + UndefinedBehaviorSanitizer =="
	@# the npm packages the Release suite fetched (tests/support/test_data.h)
	@cd $(ASAN_BUILD) && TPS_FETCH_DIR=$(abspath $(BUILD)) ctest -j $(JOBS) --output-on-failure
	@$(MAKE) --no-print-directory test-arm

# The ARM tier: aarch64 cross build, kernel and greedy-token tests under
# qemu-aarch64 with and without dotprod and i8mm (scripts/test-arm.sh)
ARM_BUILD ?= build-aarch64
test-arm: deps
	@echo "== tests: aarch64 under qemu (NEON dotprod, i8mm, scalar fallback) =="
	@JOBS=$(JOBS) scripts/test-arm.sh $(ARM_BUILD)

# builds only the tps binary the demo runs (make test builds the rest)
demo: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_OPTS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target tps
	@scripts/demo.sh $(BUILD)/tps

# replicas behind nginx: affinity vs round robin, SIGKILL failover, SIGTERM
# drain (docs/deploy.md); writes fleet/summary.json
fleet-demo: deps build
	@scripts/fleet-demo.sh $(BUILD)/tps

bench: deps build
	@scripts/bench.sh $(BUILD)

fuzz: deps
	@scripts/fuzz.sh $(FUZZ_SECONDS)

soak: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTPS_SANITIZE=ON $(CMAKE_OPTS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) --target tps
	@scripts/soak.sh $(SOAK_SECONDS) $(ASAN_BUILD)

# ThreadSanitizer: the engine thread, the HTTP thread, its worker pool, the
# kernels' pool and the bench's event loops, raced for real by the soak's
# load (Criterion's runner cannot start under TSan: Snaipe/Criterion#274).
TSAN_SECONDS ?= 30
tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTPS_TSAN=ON $(CMAKE_OPTS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target tps
	@echo "== tsan: $(TSAN_SECONDS) s soak, server and bench under ThreadSanitizer =="
	@SOAK_TSAN=1 scripts/soak.sh $(TSAN_SECONDS) $(TSAN_BUILD)
	@echo "== tsan: $(CI_HYBRID_SOAK_SECONDS) s, a hybrid mixture of experts (qwen35moe tiny) =="
	@SOAK_TSAN=1 SOAK_ARCH=qwen35moe scripts/soak.sh $(CI_HYBRID_SOAK_SECONDS) $(TSAN_BUILD)
	@echo "== tsan: $(CI_HYBRID_SOAK_SECONDS) s, latent attention and experts (deepseek2 tiny) =="
	@SOAK_TSAN=1 SOAK_ARCH=deepseek2 scripts/soak.sh $(CI_HYBRID_SOAK_SECONDS) $(TSAN_BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

# Fails on clang-format drift (make format fixes it); make test runs it first.
format-check:
	@clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h') && echo "format-check: clean"

# Fails on a function over 80 lines outside src/kernels that is not in
# scripts/long-functions.txt (the known ones, still to be split).
func-lengths:
	@scripts/func-lengths.sh --check
# Fails on files that call each other (a cycle) or a module that calls one
# above it (docs/architecture.md), read from the built objects with nm.
layers: build
	@scripts/layers.py $(BUILD)

# cppcheck over src/, microbench/ and fuzz/ (tests/ need Criterion's macros
# configured): every check of severity warning (undefined behaviour, bad
# arguments, uninitialised reads, leaks on error paths) and portability, less
# invalidPointerCast, which flags the byte-addressed tensor rows the kernels
# read as float by design. A false positive is suppressed inline
# (cppcheck-suppress ID) with a comment saying why. ~40 s on 2 busy cores.
LINT_CHECKS ?= --enable=warning,portability --suppress=invalidPointerCast
lint:
	@cppcheck -q --std=c11 $(LINT_CHECKS) --inline-suppr --suppress=missingIncludeSystem \
		--error-exitcode=1 -j $(JOBS) -D__GNUC__ -D_GNU_SOURCE -I src -I microbench \
		src microbench fuzz && echo "lint: clean"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(ARM_BUILD) build-fuzz
