# The two commands of the README: `make demo` and `make test`. Everything else is CMake.
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 50
RELEASE := build/release
ASAN := build/asan
CMAKE_FLAGS := -G Ninja

.PHONY: all deps test-deps release asan test test-gpu release-tests bench bench-transport bench-sched bench-cluster bench-snapshot unit integration fuzz fuzz-build demo install clean format format-check

all: release

deps:
	@scripts/deps.sh build

test-deps:
	@scripts/deps.sh test

release: deps
	@cmake -S . -B $(RELEASE) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Release -DTRAINQ_TESTS=OFF >/dev/null
	@cmake --build $(RELEASE) -j $(JOBS)

asan: test-deps
	@cmake -S . -B $(ASAN) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Debug -DTRAINQ_SANITIZE=ON \
	  -DCMAKE_CXX_FLAGS="-O1" >/dev/null
	@cmake --build $(ASAN) -j $(JOBS)

# Formatting first (it fails in seconds), then the whole suite under ASan+UBSan, then the
# fuzzers for a bounded time.
test: format-check asan fuzz
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) --timeout 600 -LE gpu

# Needs an NVIDIA GPU, its driver and a CUDA build of PyTorch (python3 -c 'import torch').
test-gpu: release-tests
	@cd build/gpu && ctest --output-on-failure -L gpu

release-tests:
	@cmake -S . -B build/gpu $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build/gpu -j $(JOBS) --target trainq trainqd fake_nvml

unit: asan
	@cd $(ASAN) && ctest --output-on-failure -j $(JOBS) -L unit

integration: asan
	@cd $(ASAN) && ctest --output-on-failure -j $(JOBS) -L integration

# The libFuzzer targets (fuzz/): one clang build in build/fuzz compiles each library once
# with coverage and the sanitizers. Each target runs FUZZ_SECONDS/5 seconds from its seeds
# (fuzz/NAME_seeds) and its corpus; a crash or a broken invariant fails with the log's tail.
FUZZ := build/fuzz
FUZZERS := spec_fuzz trace_fuzz placement_fuzz config_fuzz records_fuzz auth_fuzz endpoint_fuzz redis_url_fuzz sbatch_fuzz
FUZZ_EACH = $(shell echo $$(( ($(FUZZ_SECONDS) + 4) / 5 )))
fuzz-build: test-deps
	@CC=clang CXX=clang++ cmake -S . -B $(FUZZ) $(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_CXX_FLAGS="-O1" -DTRAINQ_FUZZ=ON -DTRAINQ_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ) -j $(JOBS) --target fuzzers

fuzz: fuzz-build
	@for f in $(FUZZERS); do \
	  mkdir -p $(FUZZ)/corpus/$$f; \
	  $(FUZZ)/$$f -max_total_time=$(FUZZ_EACH) -timeout=10 -max_len=4096 \
	    $(FUZZ)/corpus/$$f fuzz/$${f%_fuzz}_seeds >$(FUZZ)/$$f.log 2>&1 \
	    || { tail -40 $(FUZZ)/$$f.log; exit 1; }; \
	  echo "$$f: $$(grep -E '^#[0-9]+' $(FUZZ)/$$f.log | tail -1)"; \
	done

# trainq beside task-spooler and Slurm (../shared/bench/peers.sh); BENCH_PEERS=0 skips them.
bench: release
	@python3 bench/bench.py $(RELEASE)/trainq

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
