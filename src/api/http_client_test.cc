#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/api/http.h"

namespace trainq {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(JudgeListenerTest, OurOwnDaemonOrRootsMayListen) {
  EXPECT_TRUE(JudgeListener("/s/trainq.sock", 1000, "ann", 1000).ok());
  EXPECT_TRUE(JudgeListener("/s/trainq.sock", 0, "root", 1000).ok());  // a shared daemon
}

// Defect: the client sent its whole environment to whoever listened on its socket path.
TEST(JudgeListenerTest, AnotherUsersListenerIsRefusedNamingThePathAndTheUser) {
  Status st = JudgeListener("/tmp/x/a.sock", 2001, "mallory", 1000);
  EXPECT_EQ(st.code(), Code::kPermission);  // not kUnavailable: no daemon may be started
  EXPECT_THAT(st.message(), AllOf(HasSubstr("/tmp/x/a.sock"), HasSubstr("user mallory (uid 2001)"),
                                  HasSubstr("nothing was sent"), HasSubstr("remove")));
  EXPECT_THAT(JudgeListener("/tmp/x/a.sock", 2001, "", 1000).message(), HasSubstr("uid 2001"));
}

// A request is never built by pasting: a target or header that would end the request line
// early (and start a smuggled request on the same connection) is refused before connecting.
TEST(HttpCallTest, TargetsAndHeadersWithLineBreaksAreRefusedBeforeConnecting) {
  Endpoint nowhere;
  nowhere.kind = Endpoint::Kind::kHttp;
  nowhere.host = "127.0.0.1";
  nowhere.port = 1;  // nobody listens: a call that got as far as connecting is kUnavailable
  CallOptions plain;
  plain.timeout_ms = 2000;
  for (const std::string& target : std::vector<std::string>{
           "/v1/jobs/1/log?size=1 HTTP/1.1\r\nHost: n2\r\n\r\nPOST /v1/daemon/stop HTTP/1.1",
           "/v1/jobs/1/log?size=1\nX: y", std::string("/v1/jobs\0/1", 10), "/a b", "v1/jobs"}) {
    Result<HttpResponse> r = HttpCall(nowhere, "GET", target, "", plain);
    EXPECT_EQ(r.status().code(), Code::kInvalid) << target;
    EXPECT_THAT(r.status().message(), HasSubstr("request target")) << target;
  }
  CallOptions bad = plain;
  bad.authorization = "TrainqNode n1 1 x\r\nX-Admin: 1";
  EXPECT_THAT(HttpCall(nowhere, "GET", "/v1/status", "", bad).status().message(),
              HasSubstr("request header"));
  bad = plain;
  bad.bearer_token = "tq_x\ny";
  EXPECT_EQ(HttpCall(nowhere, "GET", "/v1/status", "", bad).status().code(), Code::kInvalid);
  EXPECT_EQ(HttpCall(nowhere, "GET", "/v1/status", "", plain).status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace trainq
