#include "src/core/duration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationTest, AddsUnits) {
  Result<int64_t> got = ParseDurationMs("1d2h3m4s5ms", "f");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, ((((24 + 2) * 60 + 3) * 60) + 4) * 1000 + 5);
}

// 9999999999999h times 3,600,000 does not fit in int64: it used to wrap to a negative value.
TEST(ParseDurationTest, RefusesWhatDoesNotFitNamingTheField) {
  for (const char* text : {"9999999999999h", "99999999999999999999999ms", "36500d1ms",
                           "20000d20000d", "2562047788015h"}) {
    Result<int64_t> got = ParseDurationMs(text, "config option aging_limit");
    ASSERT_FALSE(got.ok()) << text << " gave " << *got;
    EXPECT_EQ(got.status().code(), Code::kInvalid);
    EXPECT_THAT(got.status().message(), HasSubstr("config option aging_limit"));
    EXPECT_THAT(got.status().message(), HasSubstr("too long"));
  }
}

TEST(ParseDurationTest, TheLongestDurationIsAccepted) {
  Result<int64_t> got = ParseDurationMs("36500d", "f");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, kMaxDurationMs);
}

TEST(ParseDurationTest, SyntaxErrorsSayTheForm) {
  for (const char* text : {"", "5", "h", "5x", "-5s", "5 s"}) {
    Result<int64_t> got = ParseDurationMs(text, "--aging");
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_THAT(got.status().message(), HasSubstr("--aging: '"));
    EXPECT_THAT(got.status().message(), HasSubstr("use forms like"));
  }
}

}  // namespace
}  // namespace trainq
