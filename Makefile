# The two commands of the README: `make demo` and `make test`. Everything else is CMake.
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 50
# A user's build must not fail because a compiler grew a warning: -Werror is for CI and
# development builds (`make test` turns it on for the release tree; a plain cmake tree has it).
# Unset, a new release tree gets OFF and an existing one keeps what it has, so `make` after
# `make test` does not rebuild everything for one flag.
WERROR ?=
RELEASE_WERROR = $(if $(WERROR),-DTRAINQ_WERROR=$(WERROR),$(if $(wildcard $(RELEASE)/CMakeCache.txt),,-DTRAINQ_WERROR=OFF))
RELEASE := build/release
# The version the binaries report and the package has; empty: the project's (CMakeLists.txt).
# Only the command line sets it (`make deb VERSION=X`): an environment's VERSION is not ours.
ifneq ($(origin VERSION),command line)
VERSION :=
endif
# The test tree: clang with AddressSanitizer + UBSan and the fuzzers' coverage, so one build
# serves the unit tests, the fuzzers and the sanitized daemon of the crash tests. Unoptimised
# (Debug, -O0): -O1 compiled a daemon file 2.3 times slower, and what runs in this tree is
# mostly in-process unit tests.
CHECK := build/check
# Line tables are what a sanitizer's stack trace needs; full debug information (-g) made the
# tree's objects and links several times larger. A debugger wants a tree of its own.
CHECK_DEBUG := -gline-tables-only
CMAKE_FLAGS := -G Ninja
# Both trees of `make test` parse the heavy library headers once per group of targets and
# compile each target's files in batches (cmake/BuildSpeed.cmake): a clean release build
# takes about half the CPU time.
SPEED_FLAGS := -DTRAINQ_PCH=ON -DTRAINQ_UNITY=ON

.PHONY: all deps test-deps package-deps release deb wheel package-test check test test-gpu release-tests bench bench-smoke bench-scale bench-transport bench-sched bench-cluster bench-snapshot bench-container bench-typing bench-stage bench-dashboard dashboard-screenshot torch-image unit integration fuzz demo install clean format format-check

all: release

deps:
	@scripts/deps.sh build

test-deps:
	@scripts/deps.sh test

package-deps:
	@scripts/deps.sh package

release: deps
	@cmake -S . -B $(RELEASE) $(CMAKE_FLAGS) $(SPEED_FLAGS) -DCMAKE_BUILD_TYPE=Release \
	  -DTRAINQ_TESTS=OFF -DTRAINQ_VERSION=$(VERSION) $(RELEASE_WERROR) >/dev/null
	@cmake --build $(RELEASE) -j $(JOBS)

# The Debian package of the release tree (cmake/Package.cmake, docs/operations.md):
# build/deb/trainq_VERSION_ARCH.deb. `make deb VERSION=X` packs version X (the version is one
# generated file, so this recompiles one file and relinks); a later `make` goes back.
deb: release package-deps
	@cd $(RELEASE) && cpack -B $(abspath build/deb) >/dev/null
	@ls build/deb/trainq_*.deb

# A wheel of the Python client (python/, docs/python.md) in build/wheel, built from a copy so
# the source tree gets no build folders; no network: Debian's python3, setuptools and wheel.
wheel: package-deps
	@rm -rf build/wheel && mkdir -p build/wheel && cp -r python build/wheel/src
	@/usr/bin/python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w build/wheel build/wheel/src
	@rm -rf build/wheel/src && ls build/wheel/*.whl

# The package's own tests (tests/package): they build the package twice,
# install it with apt-get on this machine, upgrade it under a running job and purge it,
# so they run alone, after the other integration tests (which use the release tree).
package-test: release check
	@cd $(CHECK) && ctest --output-on-failure --timeout 900 -L package

# The integration tests run the release tree's binaries (TRAINQ_TEST_BINARIES) but for the
# few CMakeLists.txt keeps sanitized; `make release` must have run first.
check: test-deps
	@CC=clang CXX=clang++ cmake -S . -B $(CHECK) $(CMAKE_FLAGS) $(SPEED_FLAGS) \
	  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=$(CHECK_DEBUG) \
	  -DCMAKE_C_FLAGS_DEBUG=$(CHECK_DEBUG) -DTRAINQ_SANITIZE=ON -DTRAINQ_FUZZ=ON \
	  -DTRAINQ_TEST_BINARIES=$(abspath $(RELEASE)) >/dev/null
	@cmake --build $(CHECK) -j $(JOBS)

# Everything CI checks, phase by phase, with each phase's time at the end (scripts/test.sh):
# formatting, the release build with -Werror, the test tree, the unit tests under the
# sanitizers, the fuzzers, the integration tests.
test: test-deps
	@scripts/test.sh

# Needs an NVIDIA GPU, its driver and a CUDA build of PyTorch (python3 -c 'import torch').
test-gpu: release-tests
	@cd build/gpu && ctest --output-on-failure -L gpu

release-tests:
	@cmake -S . -B build/gpu $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build/gpu -j $(JOBS) --target trainq trainqd fake_nvml

SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Each test binary runs in a few shards (CMakeLists.txt, trainq_tests); then the 15 slowest
# tests are printed with their times (cmake/slowest_tests.py).
unit: check
	@rm -rf $(CHECK)/unit
	@cd $(CHECK) && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS) -L unit
	@python3 cmake/slowest_tests.py 15 $(CHECK)/unit/*.xml

# Integration tests wait on processes more than they compute: two per core.
integration: release check
	@cd $(CHECK) && $(SANITIZER_ENV) ctest --output-on-failure -j $$(( $(JOBS) * 2 )) \
	  --timeout 600 -L integration --output-junit integration.xml
	@python3 cmake/slowest_tests.py 15 $(CHECK)/integration.xml

# The libFuzzer targets (fuzz/), built in the test tree, JOBS at a time. Each runs
# FUZZ_SECONDS/5 seconds from its seeds (fuzz/NAME_seeds) and its corpus; a crash or a
# broken invariant fails with the log's tail.
FUZZERS := spec_fuzz trace_fuzz placement_fuzz config_fuzz records_fuzz auth_fuzz endpoint_fuzz redis_url_fuzz sbatch_fuzz manifest_fuzz session_fuzz
FUZZ_EACH = $(shell echo $$(( ($(FUZZ_SECONDS) + 4) / 5 )))
fuzz: check
	@$(MAKE) -s -j $(JOBS) $(addprefix run-,$(FUZZERS))

run-%_fuzz:
	@mkdir -p $(CHECK)/corpus/$*_fuzz
	@$(CHECK)/$*_fuzz -max_total_time=$(FUZZ_EACH) -timeout=10 -max_len=4096 \
	  $(CHECK)/corpus/$*_fuzz fuzz/$*_seeds >$(CHECK)/$*_fuzz.log 2>&1 \
	  || { tail -40 $(CHECK)/$*_fuzz.log; exit 1; }
	@echo "$*_fuzz: $$(grep -E '^#[0-9]+' $(CHECK)/$*_fuzz.log | tail -1)"

# trainq beside task-spooler and Slurm (../shared/bench/peers.sh); BENCH_PEERS=0 skips them.
bench: release
	@python3 bench/bench.py $(RELEASE)/trainq

# Under a minute: the goals' ratios beside task-spooler, rounds interleaved (bench/smoke.py).
# CI prints it for information; APPEND=1 adds the line to docs/benchmarks.md's history.
bench-smoke: release test-deps
	@python3 bench/smoke.py $(RELEASE)/trainq

# A million queued jobs (bench/scale.py; N=... for another count): submit, ls, show, memory,
# the database, a restart.
bench-scale: release
	@python3 bench/scale.py $(RELEASE)/trainq

# Google Benchmark: the placement policy's pass and one-pod placement (bench/sched_bench.cc),
# then the daemon's whole pass on SQLite (bench/daemon_bench.cc). Medians of repetitions:
# single runs on a shared machine vary by tens of percent.
BENCH_ARGS ?= --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
bench-sched: test-deps
	@cmake -S . -B $(RELEASE) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Release -DTRAINQ_TESTS=OFF >/dev/null
	@cmake --build $(RELEASE) -j $(JOBS) --target sched_bench daemon_bench
	@$(RELEASE)/sched_bench $(BENCH_ARGS)
	@$(RELEASE)/daemon_bench $(BENCH_ARGS)

# What a cluster user pays: submit rate and submit -> start latency through a real Redis
# (AOF fsync everysec and always, one node and three) beside SQLite (bench/cluster.py); also
# part of `make bench`.
bench-cluster: release test-deps
	@python3 bench/cluster.py $(RELEASE)/trainq

# What `submit --snapshot` costs on a 10,000-file git tree: first, again unchanged, after one
# edit, beside a submit without one (bench/snapshot.py).
bench-snapshot: release test-deps
	@python3 bench/snapshot.py $(RELEASE)/trainq

# What a container adds to a job's start: `trainq run -- true` on the host, in a container
# from the image store and from an archive (bench/container_start.py; needs podman).
bench-container: release test-deps
	@python3 bench/container_start.py $(RELEASE)/trainq

# Typing latency of `trainq shell`: key to echo, beside a local terminal and script(1).
bench-typing: release test-deps
	@python3 bench/typing.py $(RELEASE)/trainq

# Code and data shipped to another node (docs/cluster.md): the first copy beside rsync, the
# bytes a 1 % change sends, what a cached dataset adds to a start. MIB=256 for a quick run.
bench-stage: release test-deps
	@python3 bench/stage.py $(RELEASE)/trainq $(MIB)

# What watching costs: the dashboard's load with 10,000 jobs waiting (headless Chromium), a
# submit with 100 event-stream followers that never read, the GPU history's memory
# (bench/dashboard.py).
bench-dashboard: release test-deps
	@/usr/bin/python3 bench/dashboard.py $(RELEASE)/trainq

# docs/images/dashboard.png: the real page after a few minutes of simulated jobs
# (scripts/dashboard_screenshot.py).
dashboard-screenshot: release test-deps
	@/usr/bin/python3 scripts/dashboard_screenshot.py $(RELEASE)/trainq docs/images/dashboard.png

# An image of Debian's Python and python3-torch made from this machine's files, no registry
# (scripts/torch-image.sh): PyTorch in a container without a download.
torch-image: test-deps
	@scripts/torch-image.sh

demo: release
	@scripts/demo.sh $(RELEASE)/trainq

install: release
	cmake --install $(RELEASE) --prefix $(PREFIX)

# Every C and C++ file the repository tracks, as .clang-format says.
FORMAT_FILES = $(shell git ls-files '*.cc' '*.h' '*.c')
format-check: test-deps
	@clang-format --dry-run --Werror $(FORMAT_FILES) || \
	  { echo "trainq: run 'make format' to fix the formatting above"; exit 1; }

format: test-deps
	@clang-format -i $(FORMAT_FILES)

clean:
	rm -rf build
