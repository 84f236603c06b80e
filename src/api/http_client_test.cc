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

}  // namespace
}  // namespace trainq
