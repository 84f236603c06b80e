#include "src/core/auth.h"

#include <gtest/gtest.h>

namespace trainq {
namespace {

Caller Ada(Role role, std::string token = "") { return {"ada", 1001, role, std::move(token)}; }

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

}  // namespace
}  // namespace trainq
