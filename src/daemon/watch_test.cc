// What people watch the daemon through, on the fakes: the event stream (GET /v1/events), the
// GPU history and /metrics, and the dashboard's files and token.
#include <regex>

#include "src/daemon/daemon_test_fixture.h"
#include "src/daemon/web_assets.h"

namespace trainq {
namespace {

using namespace daemon_test;  // NOLINT: the fixture's helpers
using ::testing::ElementsAre;
using ::testing::Not;

struct Event {
  std::string type;
  json data;
};

// The events in what a stream sent: "event: T\ndata: {...}\n\n" blocks; comments skipped.
std::vector<Event> Parse(const std::string& text) {
  std::vector<Event> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find("\n\n", at);
    if (end == std::string::npos) break;
    std::string block = text.substr(at, end - at);
    at = end + 2;
    Event e;
    std::istringstream lines(block);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("event: ")) e.type = line.substr(7);
      if (line.starts_with("data: ")) e.data = json::parse(line.substr(6), nullptr, false);
    }
    if (!e.type.empty()) out.push_back(std::move(e));
  }
  return out;
}

// "kind state" of each job event about `id`.
std::vector<std::string> LifeOf(const std::vector<Event>& events, JobId id) {
  std::vector<std::string> out;
  for (const Event& e : events) {
    if (e.type == "job" && e.data["id"] == id) {
      out.push_back(e.data["kind"].get<std::string>() + " " + e.data["state"].get<std::string>());
    }
  }
  return out;
}

class DaemonWatchTest : public DaemonTest {
 protected:
  std::shared_ptr<StreamBody> Follow() {
    HttpResponse r = Call("GET", "/v1/events");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type, "text/event-stream");
    EXPECT_NE(r.stream, nullptr);
    return r.stream;
  }
  // The loop's next look, and what the stream has for its reader.
  std::vector<Event> Look(StreamBody& stream) {
    daemon_->OnWatchTimer();
    Loop();
    return Parse(stream.Take());
  }
  void Sample(int64_t after_ms = 1000) {
    clock_.Advance(after_ms);
    daemon_->OnSampleTimer();
    Loop();
  }
  HttpResponse History(const std::string& since) {
    HttpRequest req = Request("GET", "/v1/gpus/history", "");
    req.peer_uid = static_cast<int64_t>(::getuid());
    req.query["since"] = since;
    return Send(std::move(req));
  }
  std::string Metrics() {
    HttpResponse r = Call("GET", "/metrics");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    return r.body;
  }
};

TEST_F(DaemonWatchTest, AFollowerHearsAJobsWholeLifeInOrder) {
  SetGpus({Gpu(0, 80)});
  Start();
  auto stream = Follow();
  JobId id = Submit({{"gpus", 1}, {"name", "train-a"}});
  std::vector<Event> events = Look(*stream);
  ASSERT_THAT(LifeOf(events, id), ElementsAre("submitted queued", "started running"));
  EXPECT_EQ(events[0].data["name"], "train-a");
  EXPECT_EQ(events[0].data["user"], Get(id).spec.user);
  EXPECT_EQ(events[1].data["node"], "node-a");
  EXPECT_EQ(events[1].data["gpus"], json::array({0}));
  ASSERT_TRUE(shims_.Exit(RunDir(id, 1), Exited(3)));
  Loop();
  events = Look(*stream);
  ASSERT_THAT(LifeOf(events, id), ElementsAre("ended failed"));
  EXPECT_EQ(events[0].data["exit_code"], 3);
  // A retry brings it back: a change of state, then its second start.
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(id) + "/retry").status, 200);
  events = Look(*stream);
  EXPECT_THAT(LifeOf(events, id), ElementsAre("started running"));
  EXPECT_EQ(events[0].data["attempt"], 2);
  // Nothing changed: a look tells nothing.
  EXPECT_TRUE(Look(*stream).empty());
}

TEST_F(DaemonWatchTest, AJobThatStartedAndEndedBetweenTwoLooksIsToldWhole) {
  SetGpus({Gpu(0, 80)});
  Start();
  auto stream = Follow();
  JobId first = Submit({{"gpus", 1}});
  JobId second = Submit({{"gpus", 1}});  // waits behind the first
  EXPECT_THAT(LifeOf(Look(*stream), second), ElementsAre("submitted queued"));
  ASSERT_TRUE(shims_.Exit(RunDir(first, 1), Exited(0)));
  Loop();
  ASSERT_EQ(Get(second).state, JobState::kRunning);
  ASSERT_TRUE(shims_.Exit(RunDir(second, 1), Exited(0)));
  Loop();
  std::vector<Event> events = Look(*stream);
  EXPECT_THAT(LifeOf(events, first), ElementsAre("ended succeeded"));
  EXPECT_THAT(LifeOf(events, second), ElementsAre("started running", "ended succeeded"));
  // The start, told after the end, says what was true then: no exit code yet.
  std::vector<json> told;
  for (const Event& e : events) {
    if (e.data["id"] == second) told.push_back(e.data);
  }
  ASSERT_EQ(told.size(), 2u);
  EXPECT_TRUE(told[0]["exit_code"].is_null());
  EXPECT_EQ(told[0]["node"], "node-a");
  EXPECT_EQ(told[1]["exit_code"], 0);
}

TEST_F(DaemonWatchTest, ASlowFollowerMissesMessagesAndIsToldHowMany) {
  SetGpus({Gpu(0, 80)});
  Start();
  auto slow = Follow();
  auto fast = Follow();
  std::string fast_got;
  int samples = 0;
  while (slow->unsent() + 400 < 256 * 1024) {  // the slow one never reads
    Sample();
    fast_got += fast->Take();
    ++samples;
  }
  for (int i = 0; i < 10; ++i) {
    Sample();
    fast_got += fast->Take();
  }
  EXPECT_EQ(Parse(fast_got).size(), static_cast<size_t>(samples + 10));  // the fast one lost none
  std::string metrics = Metrics();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(metrics, m, std::regex("trainq_events_dropped_total (\\d+)")));
  int dropped = std::stoi(m[1]);
  EXPECT_GE(dropped, 5);
  (void)slow->Take();  // it reads at last
  Sample();
  std::vector<Event> events = Parse(slow->Take());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, "dropped");
  EXPECT_EQ(events[0].data["dropped"], dropped);
  EXPECT_EQ(events[1].type, "gpus");
}

TEST_F(DaemonWatchTest, AFollowerThatLeftIsForgotten) {
  SetGpus({Gpu(0, 80)});
  Start();
  auto stream = Follow();
  EXPECT_THAT(Metrics(), HasSubstr("trainq_event_streams 1\n"));
  stream->Close();  // the session saw its client go
  Sample();
  EXPECT_THAT(Metrics(), HasSubstr("trainq_event_streams 0\n"));
}

TEST_F(DaemonWatchTest, TheGpuHistoryKeepsAnHourOfSamplesWithTheirJobs) {
  SetGpus({Gpu(0, 80), Gpu(1, 40)});
  Start();
  JobId id = Submit({{"gpus", 1}, {"mem", "20GiB"}});
  Sample();
  Sample();
  Sample(200);  // closer than a second to the last: not kept
  HttpResponse r = Call("GET", "/v1/gpus/history");
  ASSERT_EQ(r.status, 200) << r.body;
  json doc = json::parse(r.body);
  EXPECT_EQ(doc["node"], "node-a");
  ASSERT_EQ(doc["gpus"].size(), 2u);
  EXPECT_EQ(doc["gpus"][1]["memory_total"], 40 * kGiB);
  EXPECT_EQ(doc["gpus"][0]["name"], "Fake 80GB");
  ASSERT_EQ(doc["t"].size(), 3u);  // Open's first sample and two a second apart
  EXPECT_EQ(doc["series"][0]["jobs"].back(), json::array({id}));
  EXPECT_EQ(doc["series"][0]["reserved"].back(), 20 * kGiB);
  EXPECT_EQ(doc["series"][1]["jobs"].back(), json::array());
  EXPECT_EQ(doc["series"][1]["usable"].back(), 40 * kGiB);
  UnixMs last = doc["t"].back();
  json since = json::parse(History(std::to_string(last)).body);
  EXPECT_EQ(since["t"].size(), 1u);
  HttpResponse bad = History("yesterday");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("since: 'yesterday' is not a time"));
  // Two hours of samples: an hour is kept, and what it takes is bounded.
  for (int i = 0; i < 7200; ++i) {
    clock_.Advance(1000);
    daemon_->OnSampleTimer();
  }
  Loop();
  doc = json::parse(History("0").body);
  EXPECT_LE(doc["t"].size(), 3601u);
  EXPECT_GE(doc["t"].size(), 3600u);
  EXPECT_GE(doc["t"].front().get<UnixMs>(), clock_.Now() - 3600 * 1000);
  std::smatch m;
  std::string metrics = Metrics();
  ASSERT_TRUE(std::regex_search(metrics, m, std::regex("trainq_gpu_history_bytes (\\d+)")));
  EXPECT_LT(std::stoll(m[1]), 1ll << 20);  // 2 GPUs: well under a MiB
}

TEST_F(DaemonWatchTest, MetricsCountJobsGpusAndEnds) {
  SetGpus({Gpu(0, 80)});
  Start();
  JobId running = Submit({{"gpus", 1}, {"mem", "30GiB"}});
  JobId waiting = Submit({{"gpus", 1}, {"mem", "70GiB"}});
  JobId oom = Submit({{"gpus", 0}, {"retries", 2}});
  ASSERT_EQ(Get(waiting).state, JobState::kQueued);
  ASSERT_TRUE(
      shims_.Exit(RunDir(oom, 1), Exited(1),
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"));
  Loop();
  Sample();
  std::string m = Metrics();
  EXPECT_THAT(m, HasSubstr("trainq_jobs{state=\"running\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainq_jobs{state=\"queued\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("trainq_jobs_submitted_total 3\n"));
  EXPECT_THAT(m, HasSubstr("trainq_oom_retries_total 1\n"));
  EXPECT_THAT(m, HasSubstr("trainq_jobs_waiting{reason=\"oom_backoff\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainq_jobs_waiting{reason=\"gpu_memory\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainq_gpu_memory_total_bytes{gpu=\"0\",UUID=\"GPU-0\",Hostname=\""));
  EXPECT_THAT(m, HasSubstr(",model_name=\"Fake 80GB\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainq_gpu_memory_reserved_bytes{gpu=\"0\""));
  EXPECT_THAT(m, HasSubstr("trainq_queue_wait_seconds_count 2\n"));  // two starts
  EXPECT_THAT(m, HasSubstr("# TYPE trainq_scheduling_pass_duration_seconds histogram\n"));
  EXPECT_THAT(m, HasSubstr("process_open_fds "));
  EXPECT_THAT(m, Not(HasSubstr("user=")));  // per-user series only when asked
  ASSERT_TRUE(shims_.Exit(RunDir(running, 1), Exited(0)));
  Loop();
  m = Metrics();
  EXPECT_THAT(m, HasSubstr("trainq_jobs_finished_total{state=\"succeeded\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainq_jobs_finished_total{state=\"failed\"} 0\n"));
}

TEST_F(DaemonWatchTest, PerUserMetricsOnlyWhenAsked) {
  config_.metrics_per_user = true;
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}});
  std::string user = Get(id).spec.user;
  std::string m = Metrics();
  EXPECT_THAT(m, HasSubstr("trainq_user_jobs{user=\"" + user + "\",state=\"running\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("trainq_user_jobs_submitted_total{user=\"" + user + "\"} 1\n"));
}

TEST_F(DaemonWatchTest, AnAttemptsGpuTimeHeldAndUsedIsKeptWithIt) {
  GpuInfo busy = Gpu(0, 80);
  busy.utilization_pct = 40;
  GpuInfo idle = Gpu(1, 80);
  idle.utilization_pct = 0;
  SetGpus({busy, idle});
  Start();
  JobId two = Submit({{"gpus", 2}});
  for (int i = 0; i < 61; ++i) Sample();
  // Written each minute while it runs: a crash loses at most that.
  AttemptUsage mid = Get(two).attempts.at(0).usage;
  EXPECT_GE(mid.held_gpu_ms, 2u * 60000);
  Sample();
  ASSERT_TRUE(shims_.Exit(RunDir(two, 1), Exited(0)));
  Loop();
  AttemptUsage u = Get(two).attempts.at(0).usage;
  EXPECT_EQ(u.held_gpu_ms, 2u * 62000);  // two GPUs, 62 samples a second apart
  EXPECT_EQ(u.util_known_ms, 2u * 62000);
  EXPECT_EQ(u.busy_gpu_ms, 62000u * 40 / 100);  // GPU 0 at 40 %, GPU 1 idle
  json shown = json::parse(Call("GET", "/v1/jobs/" + std::to_string(two)).body);
  json usage = shown["attempts"][0]["usage"];
  EXPECT_DOUBLE_EQ(usage["gpu_seconds_held"].get<double>(), 124.0);
  EXPECT_DOUBLE_EQ(usage["utilization_mean"].get<double>(), 0.2);
  json acct = json::parse(Call("GET", "/v1/acct").body);
  ASSERT_EQ(acct["jobs"].size(), 1u);
  EXPECT_NEAR(acct["jobs"][0]["gpu_hours_used"].get<double>(), 24.8 / 3600, 1e-9);
  EXPECT_DOUBLE_EQ(acct["jobs"][0]["utilization"].get<double>(), 0.2);
  EXPECT_NEAR(acct["users"][0]["gpu_hours_used"].get<double>(), 24.8 / 3600, 1e-9);
}

TEST_F(DaemonWatchTest, DcgmExportersJobMappingFilesNameTheJobsOnEachGpu) {
  config_.hpc_job_mapping_dir = dir_ + "/hpc-jobs";
  SetGpus({Gpu(0, 80), Gpu(1, 80)});
  Start();
  JobId a = Submit({{"gpus", 1}, {"mem", "10GiB"}});
  JobId b = Submit({{"gpus", 1}, {"mem", "10GiB"}});
  Sample();
  auto read = [&](int gpu) -> std::string {
    std::ifstream f(config_.hpc_job_mapping_dir + "/" + std::to_string(gpu));
    return f ? std::string(std::istreambuf_iterator<char>(f), {}) : "(none)";
  };
  std::map<int, std::string> want;
  for (JobId id : {a, b})
    want[Get(id).attempts.at(0).gpu_indices.at(0)] += std::to_string(id) + "\n";
  for (int gpu : {0, 1}) EXPECT_EQ(read(gpu), want.count(gpu) ? want[gpu] : "(none)") << gpu;
  struct stat st {};
  std::string one_file = config_.hpc_job_mapping_dir + "/" + std::to_string(want.begin()->first);
  ASSERT_EQ(::stat(one_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_TRUE(shims_.Exit(RunDir(a, 1), Exited(0)));
  ASSERT_TRUE(shims_.Exit(RunDir(b, 1), Exited(0)));
  Loop();
  Sample();
  EXPECT_EQ(read(0), "(none)");
  EXPECT_EQ(read(1), "(none)");
}

TEST_F(DaemonWatchTest, TheDashboardsFilesAreServedToAnyoneAndRevalidated) {
  Start();
  HttpResponse page = CallTcp("", "GET", "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_THAT(page.body, HasSubstr("/assets/app.js"));
  std::string etag, csp;
  for (const auto& [name, value] : page.headers) {
    if (name == "ETag") etag = value;
    if (name == "Content-Security-Policy") csp = value;
  }
  EXPECT_THAT(csp, HasSubstr("default-src 'self'"));
  ASSERT_FALSE(etag.empty());
  HttpRequest again = Request("GET", "/", "");
  again.tcp = true;
  again.if_none_match = etag;
  HttpResponse cached = Send(std::move(again));
  EXPECT_EQ(cached.status, 304);
  EXPECT_TRUE(cached.body.empty());
  for (const char* path : {"/assets/app.js", "/assets/app.css", "/assets/uPlot.iife.min.js",
                           "/assets/uPlot.min.css"}) {
    const WebAsset* asset = FindWebAsset(path);
    ASSERT_NE(asset, nullptr) << path;
    HttpResponse r = CallTcp("", "GET", path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body.size(), asset->size) << path;
  }
  // The data is not: without a token, 401.
  EXPECT_EQ(CallTcp("", "GET", "/v1/events").status, 401);
  EXPECT_EQ(CallTcp("", "GET", "/metrics").status, 401);
}

TEST_F(DaemonWatchTest, ADashboardTokenReadsAndNothingMore) {
  Start();
  HttpResponse none = Call("POST", "/v1/tokens/dashboard", "{}");
  EXPECT_EQ(none.status, 409);
  EXPECT_THAT(none.body, HasSubstr("listen"));
  config_.listen = {"0.0.0.0:7070"};
  config_.node_address = "gpu1.lab";
  SetGpus({Gpu(0, 80)});
  Start();
  JobId id = Submit({{"gpus", 1}});
  HttpResponse made = Call("POST", "/v1/tokens/dashboard", "{}");
  ASSERT_EQ(made.status, 201) << made.body;
  json doc = json::parse(made.body);
  EXPECT_EQ(doc["role"], "read");
  EXPECT_EQ(doc["urls"], json::array({"http://gpu1.lab:7070/"}));
  EXPECT_EQ(doc["expires_at"], FormatTime(kT0 + TokenRoutes::kDashboardTokenMs));
  std::string bearer = "Bearer " + doc["token"].get<std::string>();
  HttpResponse status = CallTcp(bearer, "GET", "/v1/status");
  ASSERT_EQ(status.status, 200);
  EXPECT_EQ(json::parse(status.body)["caller"]["role"], "read");
  EXPECT_EQ(CallTcp(bearer, "GET", "/v1/jobs").status, 200);
  HttpResponse cancel = CallTcp(bearer, "POST", "/v1/jobs/" + std::to_string(id) + "/cancel");
  EXPECT_EQ(cancel.status, 403);
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  // A token's holder cannot make itself another.
  EXPECT_EQ(CallTcp(bearer, "POST", "/v1/tokens/dashboard", "{}").status, 403);
  clock_.Advance(TokenRoutes::kDashboardTokenMs);
  EXPECT_EQ(CallTcp(bearer, "GET", "/v1/jobs").status, 401);
}

}  // namespace
}  // namespace trainq
