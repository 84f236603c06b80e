// The fixture of the daemon's unit tests (daemon_test.cc, daemon_workflow_test.cc): a daemon
// on fakes (clock, GPUs, shims) driven through its API and timer callbacks.
#pragma once

#include "src/daemon/daemon_impl.h"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/core/oom.h"
#include "src/daemon/fake_shim_launcher.h"
#include "src/os/crypto/token_crypto.h"
#include "src/os/fake_clock.h"
#include "src/os/gpu/fake_gpu_probe.h"
#include "src/os/run_dir.h"
#include "src/os/state_paths.h"
#include "src/os/user_test_util.h"
#include "src/os/users.h"
#include "src/store/faulty_store.h"

namespace trainq {
namespace daemon_test {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr uint64_t kGiB = 1ull << 30;
constexpr UnixMs kT0 = 1'800'000'000'000;
constexpr int64_t kMinute = 60'000;

inline GpuInfo Gpu(int index, uint64_t total_gib, bool processes_known = true) {
  GpuInfo g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.name = "Fake 80GB";
  g.total_bytes = total_gib * kGiB;
  g.free_bytes = g.total_bytes;
  g.processes_known = processes_known;
  return g;
}

inline ExitRecord Exited(int code) {
  ExitRecord r;
  r.exit_code = code;
  r.started_at = kT0;
  r.ended_at = kT0;
  return r;
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "trainq_daemon_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    paths_ = ResolveStatePaths(dir_);
    ASSERT_TRUE(MakeDirs(paths_.runs).ok());
    config_.node_name = "node-a";
    config_.cpu_slots = 8;
    config_.policy.headroom_bytes = 0;
    config_.oom_patterns = DefaultOomPatterns();
    snapshot_->source = "fake";
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }

  void SetGpus(std::vector<GpuInfo> gpus) { snapshot_->gpus = std::move(gpus); }

  // Starts a daemon on the state dir, as trainqd would after a restart.
  void Start() {
    daemon_.reset();  // the previous one "crashed": nothing stopped, its shims live on
    Result<std::unique_ptr<Store>> sqlite = OpenSqliteStore(paths_.db);
    ASSERT_TRUE(sqlite.ok()) << sqlite.status().ToString();
    auto faulty = std::make_unique<FaultyStore>(std::move(*sqlite));
    store_ = faulty.get();
    DaemonSeams seams{std::move(faulty),
                      ProbeChoice{std::make_unique<FakeGpuProbe>(snapshot_, probe_error_), ""},
                      shims_.Launcher(), &clock_};
    seams.deliver = [this](const Delivery& d) {
      std::lock_guard lock(delivered_mu_);
      delivered_.push_back(d);
      return Status::Ok();
    };
    daemon_ = std::make_unique<DaemonImpl>(io_, DaemonOptions{paths_, true, 022}, config_,
                                           std::move(seams));
    ASSERT_TRUE(daemon_->Open().ok());
    Loop();
  }

  // Runs what the loop has ready (submits to commit, passes to run).
  void Loop() {
    io_.restart();
    io_.poll();
  }

  HttpResponse Call(const std::string& method, const std::string& path,
                    const std::string& body = "") {
    return CallAs(static_cast<int64_t>(::getuid()), method, path, body);
  }
  // A request from a peer with `uid` (SO_PEERCRED's).
  HttpResponse CallAs(int64_t uid, const std::string& method, const std::string& path,
                      const std::string& body = "") {
    HttpRequest req = Request(method, path, body);
    req.peer_uid = uid;
    req.peer_pid = ::getpid();
    return Send(std::move(req));
  }
  // A request over TCP carrying `authorization` as its Authorization header ("": none).
  HttpResponse CallTcp(const std::string& authorization, const std::string& method,
                       const std::string& path, const std::string& body = "") {
    HttpRequest req = Request(method, path, body);
    req.tcp = true;
    req.authorization = authorization;
    req.remote = "192.0.2.7:51000";
    return Send(std::move(req));
  }
  static HttpRequest Request(const std::string& method, const std::string& path,
                             const std::string& body) {
    HttpRequest req;
    req.method = method;
    req.path = path.substr(0, path.find('?'));
    req.body = body;
    if (size_t q = path.find('?'); q != std::string::npos)
      req.query = ParseQuery(path.substr(q + 1));
    return req;
  }
  HttpResponse Send(HttpRequest req) {
    std::string method = req.method, path = req.path;
    std::optional<HttpResponse> got;
    daemon_->Handle(std::move(req), [&got](HttpResponse r) { got = std::move(r); });
    Loop();
    EXPECT_TRUE(got.has_value()) << method << " " << path << " was not answered";
    return got.value_or(HttpResponse{599, "", ""});
  }

  // A one-GPU job running when the daemon crashed; its shim died leaving process 6001, and
  // its run dir was removed before the daemon started again. Returns the job.
  JobId RestartWithARunningJobsRunDirGone() {
    SetGpus({Gpu(0, 80)});
    Start();
    JobId id = Submit({{"gpus", 1}});
    std::string run = RunDir(id, 1);
    shims_.leftovers[run] = {ProcStat{6001, 1, 6001, 'S', 5}};
    daemon_.reset();
    std::filesystem::remove_all(run);
    Start();
    return id;
  }

  JobId Submit(json spec) {
    spec["command"] = {"train"};
    spec["cwd"] = dir_;
    HttpResponse r = Call("POST", "/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    json ids = json::parse(r.body, nullptr, false);
    return ids.is_object() && ids.contains("ids") ? ids["ids"][0].get<JobId>() : 0;
  }

  Job Get(JobId id) {
    Result<Job> job = store_->Get(id);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : Job{};
  }
  std::string RunDir(JobId id, int attempt) {
    return paths_.runs + "/" + std::to_string(id) + "/" + std::to_string(attempt);
  }

  // The attempt ends as its shim ends the stop the daemon asked for (a preemption, a resize).
  void EndStopped(JobId id, int attempt) {
    Result<ShimControl> control = ReadShimControl(RunDir(id, attempt));
    ASSERT_TRUE(control.ok()) << "job " << id << " was asked nothing";
    ExitRecord rec;
    rec.signal = SIGTERM;
    rec.stop = control->stop;
    rec.stop_reason = control->reason;
    rec.started_at = rec.ended_at = clock_.Now();
    ASSERT_TRUE(shims_.Exit(RunDir(id, attempt), rec));
    Loop();
  }
  // The attempt exits 0 now.
  void Finish(JobId id, int attempt) {
    ExitRecord rec = Exited(0);
    rec.started_at = rec.ended_at = clock_.Now();
    ASSERT_TRUE(shims_.Exit(RunDir(id, attempt), rec));
    Loop();
  }
  // The job's reason as the API gives it.
  std::string Reason(JobId id) {
    HttpResponse r = Call("GET", "/v1/jobs/" + std::to_string(id));
    return nlohmann::json::parse(r.body)["reason"].get<std::string>();
  }

  // Moves the clock to the daemon's next wake-up and lets its timer fire.
  void WakeUp() {
    UnixMs at = daemon_->NextWakeup();
    ASSERT_GT(at, clock_.Now()) << "the daemon armed no wake-up";
    clock_.Set(at);
    daemon_->OnWakeupTimer();
    Loop();
  }

  std::string dir_;
  StatePaths paths_;
  Config config_;
  FakeClock clock_{kT0};
  std::shared_ptr<GpuSnapshot> snapshot_ = std::make_shared<GpuSnapshot>();
  std::shared_ptr<std::string> probe_error_ = std::make_shared<std::string>();  // "": samples work
  FakeShims shims_;
  boost::asio::io_context io_;
  FaultyStore* store_ = nullptr;
  std::mutex delivered_mu_;
  std::vector<Delivery> delivered_;  // what the notifier sent, on its thread
  std::unique_ptr<DaemonImpl> daemon_;
};

}  // namespace daemon_test
}  // namespace trainq
