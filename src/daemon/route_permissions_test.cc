// Who may call each route is its row's rule (Route::rule, routes.h) and nothing else: every
// route of the table is called as every kind of caller, and each call is refused (401, 403)
// or let through as the row says, read here on its own, not through Permit. A handler that
// refused a caller its row lets in, or a row the daemon did not hold to, fails it.
//
// The daemon is one node of a cluster (a real redis-server), so that the cluster's nodes can
// call it with signed requests; nothing runs, the test only asks. Each route gets a job of
// its own, as some calls act on it (a cancel); an admin's route, a daemon of its own after it.
#include "src/daemon/daemon_impl.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/daemon/fake_shim_launcher.h"
#include "src/daemon/routes.h"
#include "src/os/fake_clock.h"
#include "src/os/gpu/fake_gpu_probe.h"
#include "src/os/state_paths.h"
#include "src/store/redis/redis_test_util.h"

namespace trainq {
namespace {

using json = nlohmann::json;

constexpr UnixMs kT0 = 1'800'000'000'000;
constexpr char kNode[] = "node-a";
constexpr char kOwner[] = "ada";
constexpr int64_t kSocketUid = 4242;  // neither root nor the daemon's user: not an admin

enum class As {
  kNoOne,         // over TCP, no Authorization header
  kReader,        // a read token of the job's owner
  kOtherUser,     // a submit token of another user
  kOwner,         // a submit token of the job's owner
  kAdmin,         // an admin token
  kSocketUser,    // another user on the Unix socket (role submit)
  kNodeWithPart,  // node-b, which runs part 1 of the job's attempt
  kNodeWithout,   // node-c, which runs no part of it
};

constexpr As kCallers[] = {As::kNoOne, As::kReader,     As::kOtherUser,    As::kOwner,
                           As::kAdmin, As::kSocketUser, As::kNodeWithPart, As::kNodeWithout};

const char* NameOf(As as) {
  constexpr const char* kNames[] = {
      "no one", "owner's read token",   "another user's token", "owner",
      "admin",  "a user on the socket", "node-b (runs part 1)", "node-c (runs no part)"};
  return kNames[static_cast<int>(as)];
}

// Whether the row lets `as` reach the route's handler: the rule as docs/api.md words it.
bool RowLets(const Rule& rule, As as) {
  switch (as) {
    case As::kNoOne:
      return false;
    case As::kNodeWithPart:
      return rule.peer != PeerMay::kNo;
    case As::kNodeWithout:
      return rule.peer == PeerMay::kYes;
    default:
      break;
  }
  switch (rule.who) {
    case Who::kReader:
      return true;
    case Who::kJobReader:
      return as == As::kReader || as == As::kOwner || as == As::kAdmin;
    case Who::kSubmitter:
    case Who::kOwnJobs:
      return as != As::kReader;
    case Who::kJobOwner:
      return as == As::kOwner || as == As::kAdmin;
    case Who::kAdmin:
      return as == As::kAdmin;
    case Who::kSocketUser:
      return as == As::kSocketUser;
    case Who::kNoUser:
      return false;
  }
  return false;
}

// A Who::kOwnJobs route that answers job by job: whether `as` may act on the owner's job.
bool MayActOnOwnersJob(As as) { return as == As::kOwner || as == As::kAdmin; }

class RoutePermissionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new redis::RedisServer();
    ASSERT_TRUE(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = ::testing::TempDir() + "trainq_permissions_test_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    paths_ = ResolveStatePaths(dir_);
    ASSERT_TRUE(MakeDirs(paths_.runs).ok());
    target_ = server_->Target("t:" + test + ":");
    Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(target_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    config_.node_name = kNode;
    config_.cpu_slots = 8;
    snapshot_->source = "fake";
    StartDaemon();
    // The socket's caller here is root or the daemon's own user: an admin, who makes tokens.
    tokens_[As::kReader] = MakeToken("reader", "read", kOwner);
    tokens_[As::kOtherUser] = MakeToken("other", "submit", "bob");
    tokens_[As::kOwner] = MakeToken("owner", "submit", kOwner);
    tokens_[As::kAdmin] = MakeToken("admin", "admin", "carol");
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A daemon on the test's store and state dir, opened as trainqd opens it.
  void StartDaemon() {
    daemon_.reset();
    Result<std::unique_ptr<ClusterStore>> store = OpenRedisStore(target_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    DaemonSeams seams{std::move(*store), ProbeChoice{std::make_unique<FakeGpuProbe>(snapshot_), ""},
                      shims_.Launcher(), &clock_};
    seams.cluster_key = ClusterKey(kKey);
    daemon_ = std::make_unique<DaemonImpl>(io_, DaemonOptions{paths_, true, 022}, config_,
                                           std::move(seams));
    ASSERT_TRUE(daemon_->Open().ok());
    Loop();
  }

  std::string MakeToken(const std::string& name, const std::string& role, const std::string& user) {
    HttpRequest req = Request("POST", "/v1/tokens");
    req.body = json{{"name", name}, {"role", role}, {"user", user}}.dump();
    req.peer_uid = static_cast<int64_t>(::getuid());
    HttpResponse r = Send(std::move(req));
    EXPECT_EQ(r.status, 201) << r.body;
    json doc = json::parse(r.body, nullptr, false);
    return "Bearer " + (doc.is_object() ? doc.value("token", "") : "");
  }

  // The owner's job, starting on this node and node-b (parts 0 and 1), written to the store
  // as the leader would.
  JobId OwnersJob() {
    JobSpec spec;
    spec.name = "train";
    spec.command = {"train"};
    spec.user = kOwner;
    spec.cwd = dir_;
    Result<std::vector<JobId>> ids = store_->Submit(std::span(&spec, 1), kT0);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    if (!ids.ok()) return 0;
    Placement p;
    p.node = kNode;
    p.parts = {{kNode, {0}, {}, "", ""}, {"node-b", {0}, {}, "", ""}};
    Status st = store_->StartAttempt(ids->front(), 0, p, kT0);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return ids->front();
  }

  // `route` called as `as`: its placeholders filled in (the job, or a name nothing has), the
  // rank of node-b's part in its query and the job's id in its body, for the routes that
  // read them.
  HttpResponse Call(const Route& route, As as, JobId job) {
    std::string path = route.pattern;
    size_t open = path.find('{');
    if (open != std::string::npos) {
      std::string value = path.compare(open, 4, "{id}") == 0 ? std::to_string(job) : "nosuch";
      path.replace(open, path.find('}', open) - open + 1, value);
    }
    HttpRequest req = Request(route.method, path);
    req.query = {{"rank", "1"}};
    req.body = json{{"ids", {job}}}.dump();
    if (as == As::kSocketUser) {
      req.peer_uid = kSocketUid;
      return Send(std::move(req));
    }
    req.tcp = true;
    req.remote = "192.0.2.7:51000";
    if (as == As::kNodeWithPart || as == As::kNodeWithout) {
      std::string node = as == As::kNodeWithPart ? "node-b" : "node-c";
      req.authorization = ClusterKey(kKey).PeerAuthorization(node, clock_.Now(), req.method,
                                                             CanonicalTarget(req.path, req.query));
    } else if (as != As::kNoOne) {
      req.authorization = tokens_[as];
    }
    return Send(std::move(req));
  }

  static HttpRequest Request(const std::string& method, const std::string& path) {
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.peer_pid = ::getpid();
    return req;
  }
  HttpResponse Send(HttpRequest req) {
    std::optional<HttpResponse> got;
    daemon_->Handle(std::move(req), [&got](HttpResponse r) { got = std::move(r); });
    Loop();
    return got.value_or(HttpResponse{599, "not answered", ""});
  }
  void Loop() {
    io_.restart();
    io_.poll();
  }

  static inline redis::RedisServer* server_ = nullptr;
  static constexpr char kKey[] = "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk";
  std::string dir_;
  StatePaths paths_;
  RedisTarget target_;
  std::unique_ptr<ClusterStore> store_;  // the test's own connection
  Config config_;
  FakeClock clock_{kT0};
  std::shared_ptr<GpuSnapshot> snapshot_ = std::make_shared<GpuSnapshot>();
  FakeShims shims_;
  boost::asio::io_context io_;
  std::map<As, std::string> tokens_;  // each token caller's Authorization header
  std::unique_ptr<DaemonImpl> daemon_;
};

TEST_F(RoutePermissionsTest, EveryRouteLetsInExactlyTheCallersItsRowNames) {
  bool restart = false;
  for (const Route& route : RouteTable()) {
    if (restart) StartDaemon();
    // What only an admin may do may change the daemon itself (a stop): the next route gets a
    // daemon of its own.
    restart = route.rule.who == Who::kAdmin;
    JobId job = OwnersJob();
    for (As as : kCallers) {
      HttpResponse r = Call(route, as, job);
      std::string call = fmt::format("{} {} as {}: {} {}", route.method, route.pattern, NameOf(as),
                                     r.status, r.body.substr(0, 300));
      ASSERT_NE(r.status, 599) << call;
      bool refused = r.status == 401 || r.status == 403;
      EXPECT_EQ(refused, !RowLets(route.rule, as)) << call;
      EXPECT_EQ(r.status == 401, as == As::kNoOne) << call;
      json doc = json::parse(r.body, nullptr, false);
      if (route.rule.who != Who::kOwnJobs || refused || !doc.contains("results")) continue;
      // Let in, the request acts on the jobs it names that the caller may act on.
      ASSERT_TRUE(doc["results"].is_array() && doc["results"].size() == 1) << call;
      bool job_refused =
          doc["results"][0].value("error", json::object()).value("code", "") == "permission";
      EXPECT_EQ(job_refused, !MayActOnOwnersJob(as)) << call;
    }
  }
}

}  // namespace
}  // namespace trainq
