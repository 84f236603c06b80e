// How a request finds its route, or is told there is none: the answers clients and scripts
// see for a method or path the API does not serve, and the checks that come before a route's
// own work.
#include <gtest/gtest.h>

#include "src/daemon/daemon_test_fixture.h"

namespace trainq {
namespace daemon_test {
namespace {

using ::testing::Not;

class RoutesDispatchTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    SetGpus({Gpu(0, 80)});
    Start();
  }
  static std::string Message(const HttpResponse& r) {
    json doc = json::parse(r.body, nullptr, false);
    return doc.is_object() && doc.contains("error") ? doc["error"].value("message", "") : "";
  }
  // A read-only caller: a token made over the socket, where the test's user is an admin.
  std::string ReadToken() {
    HttpResponse r = Call("POST", "/v1/tokens", R"({"name": "viewer", "role": "read"})");
    EXPECT_EQ(r.status, 201) << r.body;
    json doc = json::parse(r.body, nullptr, false);
    return "Bearer " + (doc.is_object() ? doc.value("token", "") : "");
  }
};

TEST_F(RoutesDispatchTest, AnotherMethodOrAnUnknownPathIsNoRoute) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"DELETE", "/v1/jobs"},
           {"PUT", "/v1/jobs/1"},
           {"GET", "/v1/daemon/stop"},
           {"POST", "/v1/gpus"},
           {"GET", "/v1/tokens/x"},
           {"GET", "/v1/nodes/node-a/drain"},
           {"GET", "/v1/nope"},
           {"POST", "/"},
           {"GET", "/assets/nope.js"},
       }) {
    HttpResponse r = Call(method, path);
    EXPECT_EQ(r.status, 404) << method << " " << path;
    EXPECT_EQ(Message(r), "no route " + method + " " + path);
  }
}

// Below /v1/jobs/, a malformed id or an unknown job is reported before an unknown action:
// that is what a mistyped command needs to hear first.
TEST_F(RoutesDispatchTest, AJobsIdIsCheckedBeforeItsAction) {
  JobId id = Submit({{"mem", "1GiB"}});
  std::string job = "/v1/jobs/" + std::to_string(id);
  HttpResponse bad = Call("GET", "/v1/jobs/abc/bogus");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Message(bad), "job id: 'abc' is not a job id; use a positive integer");
  EXPECT_EQ(Call("POST", "/v1/jobs//cancel").status, 400);
  EXPECT_EQ(Call("GET", "/v1/jobs/").status, 400);
  EXPECT_EQ(Call("GET", "/v1/jobs/clean").status, 400);
  HttpResponse gone = Call("POST", "/v1/jobs/999/bogus");
  EXPECT_EQ(gone.status, 404);
  EXPECT_THAT(Message(gone), Not(HasSubstr("no route")));
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", job + "/bogus"},
           {"POST", job},
           {"POST", job + "/"},
           {"POST", job + "/explain"},
           {"GET", job + "/cancel"},
           {"GET", job + "/log/x"},
           {"POST", job + "/cancel/"},
       }) {
    HttpResponse r = Call(method, path);
    EXPECT_EQ(r.status, 404) << method << " " << path;
    EXPECT_EQ(Message(r), "no route " + method + " " + path);
  }
  HttpResponse slash = Call("GET", job + "/");
  EXPECT_EQ(slash.status, 200) << slash.body;
  EXPECT_EQ(json::parse(slash.body)["id"], id);
}

TEST_F(RoutesDispatchTest, ANodeActionIsDrainResumeOrRemove) {
  for (const std::string path : {"/v1/nodes/node-a/bogus", "/v1/nodes/node-a/drain/",
                                 "/v1/nodes/node-a", "/v1/nodes/node-a/"}) {
    HttpResponse r = Call("POST", path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(Message(r),
              "no route POST " + path + "; use /v1/nodes/NAME/drain, /resume or /remove");
  }
}

// What follows /v1/tokens/ is the name, slashes and all, and checked as one.
TEST_F(RoutesDispatchTest, ATokensNameIsTheRestOfThePath) {
  ASSERT_NE(ReadToken(), "Bearer ");
  for (const std::string path : {"/v1/tokens/viewer/", "/v1/tokens/a/b", "/v1/tokens/"}) {
    HttpResponse r = Call("DELETE", path);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_THAT(Message(r), HasSubstr("name")) << path;
  }
  EXPECT_EQ(Call("DELETE", "/v1/tokens/viewer").status, 200);
}

// Every route judges its caller before it reads the body: a read-only caller is told so, not
// that its request is malformed.
TEST_F(RoutesDispatchTest, TheCallerIsJudgedBeforeTheBody) {
  std::string reader = ReadToken();
  JobId id = Submit({{"mem", "1GiB"}});
  HttpResponse clean = CallTcp(reader, "POST", "/v1/jobs/clean", "[]");
  EXPECT_EQ(clean.status, 403) << clean.body;
  EXPECT_THAT(Message(clean), HasSubstr("may only read; to clean jobs needs the role submit"));
  HttpResponse many = CallTcp(reader, "POST", "/v1/jobs/cancel", json{{"ids", {id}}}.dump());
  EXPECT_EQ(many.status, 403) << many.body;
  EXPECT_EQ(CallTcp(reader, "POST", "/v1/jobs/retry", "{}").status, 403);
  HttpResponse config = CallTcp(reader, "PUT", "/v1/config", "not json");
  EXPECT_EQ(config.status, 403);
  EXPECT_EQ(CallTcp(reader, "POST", "/v1/nodes/node-a/bogus").status, 404);
  EXPECT_EQ(CallTcp(reader, "POST", "/v1/nodes/node-a/drain").status, 403);
  EXPECT_EQ(CallTcp(reader, "GET", "/v1/jobs/" + std::to_string(id) + "/explain").status, 200);
  EXPECT_EQ(Get(id).state, JobState::kRunning);
}

// A request for many jobs acts on those of the caller's own user (MayActOn): another's are
// refused one by one, and an admin's reach every user's.
TEST_F(RoutesDispatchTest, ManyJobsAreJudgedJobByJob) {
  JobId id = Submit({{"mem", "1GiB"}});
  HttpResponse made =
      Call("POST", "/v1/tokens", R"({"name": "b", "role": "submit", "user": "bob"})");
  ASSERT_EQ(made.status, 201) << made.body;
  std::string bob = "Bearer " + json::parse(made.body)["token"].get<std::string>();
  HttpResponse many = CallTcp(bob, "POST", "/v1/jobs/cancel", json{{"ids", {id}}}.dump());
  ASSERT_EQ(many.status, 200) << many.body;
  EXPECT_EQ(json::parse(many.body)["results"][0]["error"]["code"], "permission");
  HttpResponse every = CallTcp(bob, "POST", "/v1/jobs/clean", R"({"all_users": true})");
  EXPECT_EQ(every.status, 403) << every.body;
  EXPECT_THAT(Message(every), HasSubstr("only an admin may clean every user's jobs"));
  EXPECT_EQ(CallTcp(bob, "POST", "/v1/jobs/clean", "{}").status, 200);
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  EXPECT_EQ(Call("POST", "/v1/jobs/clean", R"({"all_users": true})").status, 200);
}

// Who may do what to a job is judged once the job is found, by its owner.
TEST_F(RoutesDispatchTest, AJobsRoutesCheckTheCallerAgainstItsOwner) {
  std::string reader = ReadToken();
  JobId id = Submit({{"mem", "1GiB"}});
  std::string job = "/v1/jobs/" + std::to_string(id);
  EXPECT_EQ(CallTcp(reader, "POST", "/v1/jobs/999/cancel").status, 404);
  EXPECT_EQ(CallTcp(reader, "GET", job).status, 200);
  for (const std::string action : {"/cancel", "/retry", "/release"}) {
    HttpResponse r = CallTcp(reader, "POST", job + action);
    EXPECT_EQ(r.status, 403) << action;
  }
  EXPECT_EQ(Get(id).state, JobState::kRunning);
}

}  // namespace
}  // namespace daemon_test
}  // namespace trainq
