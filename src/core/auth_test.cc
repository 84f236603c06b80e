#include "src/core/auth.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace trainq {
namespace {

Caller Ada(Role role, std::string token = "") { return {"ada", 1001, role, std::move(token), ""}; }

// Another node's signed request reads any job's log (for its own caller) and nothing else.
TEST(AuthorizeTest, ANodeReadsLogsAndNothingElse) {
  Caller node{"", -1, Role::kRead, "", "gpu2"};
  EXPECT_TRUE(Authorize(node, Action::kReadLog, "bob", "read the log of", 3).ok());
  EXPECT_TRUE(Authorize(node, Action::kRead).ok());
  for (Action a : {Action::kSubmit, Action::kChangeJob, Action::kAdmin}) {
    Status st = Authorize(node, a, "bob", "cancel", 3);
    EXPECT_EQ(st.code(), Code::kPermission);
    EXPECT_EQ(st.message(), "node gpu2 may only read jobs and their logs; it asked to cancel");
  }
  node.role = Role::kAdmin;  // a role never widens a node's request
  EXPECT_EQ(Authorize(node, Action::kAdmin, "", "stop the daemon").code(), Code::kPermission);
}

TEST(AuthorizeTest, OwnersChangeTheirJobsOthersAreToldWhose) {
  EXPECT_TRUE(Authorize(Ada(Role::kSubmit), Action::kChangeJob, "ada", "cancel", 12).ok());
  Status st = Authorize(Ada(Role::kSubmit), Action::kChangeJob, "bob", "cancel", 12);
  EXPECT_EQ(st.code(), Code::kPermission);
  EXPECT_EQ(st.message(), "job 12 belongs to bob; only bob or an admin may cancel it");
  EXPECT_TRUE(Authorize(Ada(Role::kAdmin), Action::kChangeJob, "bob", "cancel", 12).ok());
}

TEST(AuthorizeTest, ReadRoleReadsButNeverWrites) {
  Caller reader = Ada(Role::kRead, "laptop");
  EXPECT_TRUE(Authorize(reader, Action::kRead).ok());
  EXPECT_TRUE(Authorize(reader, Action::kReadLog, "ada", "read the log of", 3).ok());
  EXPECT_EQ(Authorize(reader, Action::kReadLog, "bob", "read the log of", 3).code(),
            Code::kPermission);
  Status st = Authorize(reader, Action::kSubmit);
  EXPECT_EQ(st.code(), Code::kPermission);
  EXPECT_NE(st.message().find("token 'laptop'"), std::string::npos) << st.message();
  EXPECT_EQ(Authorize(reader, Action::kChangeJob, "ada", "retry", 3).code(), Code::kPermission);
  EXPECT_EQ(Authorize(reader, Action::kAdmin, "", "stop the daemon").code(), Code::kPermission);
}

TEST(AuthorizeTest, OnlyAdminsAdminister) {
  EXPECT_EQ(Authorize(Ada(Role::kSubmit), Action::kAdmin, "", "create tokens").code(),
            Code::kPermission);
  EXPECT_TRUE(Authorize(Ada(Role::kAdmin), Action::kAdmin, "", "create tokens").ok());
}

TEST(RoleTest, NamesRoundTripAndOthersAreRefused) {
  for (Role r : {Role::kRead, Role::kSubmit, Role::kAdmin}) EXPECT_EQ(ParseRole(RoleName(r)), r);
  EXPECT_EQ(ParseRole("root"), std::nullopt);
  EXPECT_EQ(ParseRole(""), std::nullopt);
}

TEST(ParseBearerTest, TakesTheTokenOfABearerHeader) {
  for (auto [header, token] :
       std::vector<std::pair<std::string, std::string>>{{"Bearer tq_0123abcd", "tq_0123abcd"},
                                                        {"bearer tq_x", "tq_x"},
                                                        {"BEARER    abc+/~.-_==", "abc+/~.-_=="}}) {
    Result<std::string> got = ParseBearer(header);
    ASSERT_TRUE(got.ok()) << header << ": " << got.status().ToString();
    EXPECT_EQ(*got, token);
  }
}

TEST(ParseBearerTest, RefusesOtherSchemesAndMalformedTokensWithoutEchoingThem) {
  const std::string secret = "tq_secretsecretsecret";
  for (const std::string& header : std::vector<std::string>{
           "", "Bearer", "Bearer ", "Bearer    ", "Basic " + secret, "Bearer" + secret,
           "Bearer " + secret + " ", "Bearer " + secret + " extra", "Bearer " + secret + "\t",
           "Bearer =" + secret, "Bearer " + secret + "=x", "Bearer\t" + secret,
           "Bearer " + secret + "\xff", " Bearer " + secret, "Bearerx " + secret}) {
    Result<std::string> got = ParseBearer(header);
    ASSERT_FALSE(got.ok()) << header;
    EXPECT_EQ(got.status().code(), Code::kUnauthenticated) << header;
    EXPECT_EQ(got.status().message().find("secret"), std::string::npos) << got.status().message();
    EXPECT_NE(got.status().message().find("Bearer TOKEN"), std::string::npos);
  }
}

TEST(TokenNameTest, AcceptsTheDocumentedFormOnly) {
  EXPECT_TRUE(CheckTokenName("ada-laptop.v2_1").ok());
  EXPECT_TRUE(CheckTokenName(std::string(64, 'a')).ok());
  for (const std::string& bad :
       std::vector<std::string>{"", std::string(65, 'a'), "a b", "a/b", "tok\n", "\xc3\xa9"}) {
    Status st = CheckTokenName(bad);
    EXPECT_EQ(st.code(), Code::kInvalid) << bad;
    EXPECT_EQ(st.message().rfind("name: ", 0), 0u) << st.message();
  }
}

}  // namespace
}  // namespace trainq
