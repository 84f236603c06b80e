// The daemon's whole pass (`make bench-sched`): what trainqd pays per turn of its loop, not
// the placement policy alone (bench/sched_bench.cc). The daemon runs on its seams: a real
// SQLite store in a temporary state dir, shims and GPUs faked (no process, no NVML), the
// clock moved by hand. One daemon manages one node: 8 GPUs of 80 GiB.
//
// The queue is mixed: 1, 2, 4 and 8 GPUs; shares in bytes and in percent and whole GPUs;
// three priorities; 24 users submitting unequal amounts, so fair share reorders them. Each
// job carries a 3 KiB environment, as `trainq submit` sends the caller's, and the store
// keeps it in the job's row.
//  - BM_TurnAfterExits: 4 running jobs exit; the daemon records their ends, samples, and
//    runs a pass (fair share, node build, placement, the starts it decides, the first
//    changed reasons written to SQLite, the wake-up scan). The reasons it leaves for later
//    loop turns, a chunk every 100 ms, are written untimed, and what they took is counted
//    apart (deferred_ms: loop time spent on later turns; deferred: rows). The jobs that
//    started are replaced, untimed, so the queue keeps its size.
//  - BM_WakeupNothingStarts: a wake-up on time alone with every GPU as full as the policy
//    lets it be: the pass a long queue costs when nothing can change.
// CPU time is the loop thread's; wall time adds the store's fsyncs.
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/oom.h"
#include "src/daemon/daemon_impl.h"
#include "src/daemon/fake_shim_launcher.h"
#include "src/os/fake_clock.h"
#include "src/os/gpu/fake_gpu_probe.h"
#include "src/os/run_dir.h"
#include "src/os/state_paths.h"
#include "src/store/faulty_store.h"

namespace trainq {
namespace {

using json = nlohmann::json;

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kT0 = 1'800'000'000'000;
constexpr int kGpus = 8;
constexpr int kUsers = 24;
constexpr int kExitsPerTurn = 4;
constexpr int64_t kTurnMs = 30'000;

// A job of the mix: mostly single-GPU shares, some whole GPUs, a few multi-GPU jobs.
json RandomJob(std::mt19937& rng) {
  static const char* kShares[] = {"10G", "20G", "30G", "40G", "25%", "50%"};
  json job = json::object();
  int roll = static_cast<int>(rng() % 100);
  if (roll < 60) {
    job["mem"] = kShares[rng() % 6];
  } else if (roll < 72) {
    job["gpus"] = 1;  // no share: the whole GPU
  } else if (roll < 86) {
    job["gpus"] = 2;
    if (rng() % 2) job["mem"] = "40G";
  } else if (roll < 95) {
    job["gpus"] = 4;
  } else {
    job["gpus"] = 8;
  }
  int p = static_cast<int>(rng() % 20);
  if (p == 0) job["priority"] = 10;
  if (p == 1) job["priority"] = -10;
  return job;
}

// About 3 KiB of variables, the size of a shell environment with conda and CUDA set up.
json Environment() {
  json env = json::object();
  env["PATH"] =
      "/home/ann/.conda/envs/train/bin:/opt/conda/bin:/usr/local/cuda/bin:"
      "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  env["LD_LIBRARY_PATH"] = "/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64";
  for (int i = 0; i < 40; ++i) {
    env["VAR_" + std::to_string(i)] = std::string(60, static_cast<char>('a' + i % 26));
  }
  return env;
}

class Lab {
 public:
  explicit Lab(int waiting) {
    dir_ = std::filesystem::temp_directory_path().string() + "/trainq_daemon_bench_" +
           std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    paths_ = ResolveStatePaths(dir_);
    if (!MakeDirs(paths_.runs).ok()) std::abort();
    // The daemon logs every start and end; it pays for that, into a file as under systemd.
    auto log = spdlog::basic_logger_st("trainq-bench", dir_ + "/daemon.log", true);
    log->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    spdlog::set_default_logger(log);

    snapshot_->source = "fake";
    for (int i = 0; i < kGpus; ++i) {
      GpuInfo g;
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i);
      g.name = "Fake 80GB";
      g.total_bytes = g.free_bytes = 80 * kGiB;
      g.processes_known = true;
      snapshot_->gpus.push_back(g);
    }
    Config config;
    config.node_name = "node-a";
    config.cpu_slots = 64;
    config.max_waiting_jobs_per_user = 0;  // a million waiting from 24 users
    config.oom_patterns = DefaultOomPatterns();
    Result<std::unique_ptr<Store>> sqlite = OpenSqliteStore(paths_.db);
    if (!sqlite.ok()) std::abort();
    auto store = std::make_unique<FaultyStore>(std::move(*sqlite));
    store_ = store.get();
    DaemonSeams seams{std::move(store), ProbeChoice{std::make_unique<FakeGpuProbe>(snapshot_), ""},
                      shims_.Launcher(), &clock_};
    daemon_ =
        std::make_unique<DaemonImpl>(io_, DaemonOptions{paths_, false}, config, std::move(seams));
    if (!daemon_->Open().ok()) std::abort();
    Submit(waiting);
    clock_.Advance(kTurnMs);
    Loop();
    Settle();
  }
  ~Lab() {
    daemon_.reset();
    spdlog::drop("trainq-bench");
    std::filesystem::remove_all(dir_);
  }

  // Submits `n` jobs, one batch request per user (users submit unequal shares).
  void Submit(int n) {
    std::vector<json> per_user(kUsers, json::array());
    for (int i = 0; i < n; ++i) {
      int user = static_cast<int>(rng_() % (kUsers * (kUsers + 1) / 2));
      int u = 0;
      while (user >= u + 1) user -= ++u;  // user u gets a share in proportion to u + 1
      per_user[u].push_back(RandomJob(rng_));
    }
    for (int u = 0; u < kUsers; ++u) {
      if (per_user[u].empty()) continue;
      json body = {{"defaults", {{"command", {"train"}}, {"cwd", dir_}, {"env", env_}}},
                   {"jobs", std::move(per_user[u])}};
      HttpRequest req;
      req.method = "POST";
      req.path = "/v1/jobs";
      req.body = body.dump();
      req.peer_uid = 20'000 + u;
      req.peer_pid = ::getpid();
      daemon_->Handle(std::move(req), [](HttpResponse r) {
        if (r.status != 201) std::abort();
      });
    }
    Loop();
  }

  // Ends the `k` oldest running jobs (exit 0), as their shims would; returns how many ended.
  int ExitSome(int k) {
    std::vector<std::string> dirs = shims_.alive_run_dirs();
    int ended = 0;
    for (const std::string& dir : dirs) {
      if (ended == k) break;
      ExitRecord r;
      r.exit_code = 0;
      r.started_at = clock_.Now() - kTurnMs;
      r.ended_at = clock_.Now();
      ended += shims_.Exit(dir, r) ? 1 : 0;
    }
    return ended;
  }

  void Loop() {
    io_.restart();
    io_.poll();
  }

  // Writes the reasons a pass left for later loop turns, without the pauses between the
  // chunks; returns the thread's CPU seconds that took.
  double Settle() {
    double before = ThreadCpuSeconds();
    daemon_->WriteReasonsNow();
    return ThreadCpuSeconds() - before;
  }

  static double ThreadCpuSeconds() {
    timespec t = {};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
  }

  FakeClock& clock() { return clock_; }
  DaemonImpl& daemon() { return *daemon_; }
  FakeShims& shims() { return shims_; }
  size_t reasons_written() const { return store_->reasons_written(); }

 private:
  std::string dir_;
  StatePaths paths_;
  FakeClock clock_{kT0};
  std::shared_ptr<GpuSnapshot> snapshot_ = std::make_shared<GpuSnapshot>();
  FakeShims shims_;
  boost::asio::io_context io_;
  FaultyStore* store_ = nullptr;
  std::unique_ptr<DaemonImpl> daemon_;
  std::mt19937 rng_{42};
  json env_ = Environment();
};

void BM_TurnAfterExits(benchmark::State& state) {
  Lab lab(static_cast<int>(state.range(0)));
  size_t written = 0, deferred = 0;
  double deferred_s = 0;
  int64_t started = 0;
  for (auto _ : state) {
    int alive_before = lab.shims().alive_count();
    size_t written_before = lab.reasons_written();
    lab.clock().Advance(kTurnMs);
    int ended = lab.ExitSome(kExitsPerTurn);
    lab.Loop();
    state.PauseTiming();
    written += lab.reasons_written() - written_before;
    size_t in_turn = lab.reasons_written();
    deferred_s += lab.Settle();
    deferred += lab.reasons_written() - in_turn;
    int now_started = lab.shims().alive_count() - alive_before + ended;
    started += now_started;
    lab.Submit(now_started);  // the queue keeps its size
    state.ResumeTiming();
  }
  double turns = static_cast<double>(state.iterations());
  state.counters["started"] = static_cast<double>(started) / turns;
  state.counters["reasons"] = static_cast<double>(written) / turns;
  state.counters["deferred"] = static_cast<double>(deferred) / turns;
  state.counters["deferred_ms"] = deferred_s * 1000 / turns;
}

void BM_WakeupNothingStarts(benchmark::State& state) {
  Lab lab(static_cast<int>(state.range(0)));
  int running = lab.shims().alive_count();
  lab.clock().Advance(kTurnMs);
  lab.daemon().OnWakeupTimer();
  lab.Loop();
  lab.Settle();
  size_t written = lab.reasons_written();
  for (auto _ : state) {
    lab.clock().Advance(1'000);
    lab.daemon().OnWakeupTimer();
    lab.Loop();
  }
  if (lab.shims().alive_count() != running) state.SkipWithError("a job started");
  double turns = static_cast<double>(state.iterations());
  state.counters["running"] = running;
  state.counters["reasons"] = static_cast<double>(lab.reasons_written() - written) / turns;
}

// Queue sizes; BENCH_MILLION=1 adds 1,000,000 (its set-up takes minutes).
void QueueSizes(benchmark::internal::Benchmark* b) {
  for (int n : {1'000, 10'000, 100'000}) b->Arg(n);
  const char* million = std::getenv("BENCH_MILLION");
  if (million != nullptr && std::string_view(million) == "1") b->Arg(1'000'000);
}

BENCHMARK(BM_TurnAfterExits)->Apply(QueueSizes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WakeupNothingStarts)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace trainq

BENCHMARK_MAIN();
