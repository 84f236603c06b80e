// GPU types (--gpu-type) match whole words of a GPU's model name or its node's label; node
// features (--constraint) are clauses that all hold.
#include "src/core/gpu_select.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(GpuTypeTest, MatchesWordsOfTheModelNameInAnyCase) {
  EXPECT_TRUE(GpuTypeMatches("a100", "NVIDIA A100-SXM4-80GB", ""));
  EXPECT_TRUE(GpuTypeMatches("A100 80gb", "NVIDIA A100-SXM4-80GB", ""));
  EXPECT_TRUE(GpuTypeMatches("a100-80gb", "NVIDIA A100-SXM4-80GB", ""));
  EXPECT_TRUE(GpuTypeMatches("rtx 4090", "NVIDIA GeForce RTX 4090", ""));
  EXPECT_TRUE(GpuTypeMatches("v100", "Tesla V100-SXM2-16GB", ""));
  EXPECT_TRUE(GpuTypeMatches("", "anything", ""));  // no type: any GPU
  // A substring is not a word: an A10 job never lands on an A100, nor the other way.
  EXPECT_FALSE(GpuTypeMatches("a10", "NVIDIA A100-SXM4-80GB", ""));
  EXPECT_TRUE(GpuTypeMatches("a10", "NVIDIA A10", ""));
  EXPECT_FALSE(GpuTypeMatches("a100", "NVIDIA A10", ""));
  EXPECT_FALSE(GpuTypeMatches("h100", "NVIDIA A100-SXM4-80GB", ""));
  EXPECT_FALSE(GpuTypeMatches("a100 40gb", "NVIDIA A100-SXM4-80GB", ""));
  EXPECT_FALSE(GpuTypeMatches("a100", "", ""));  // an unknown model matches no type
}

TEST(GpuTypeTest, MatchesTheNodesLabel) {
  EXPECT_TRUE(GpuTypeMatches("big", "NVIDIA Graphics Device", "big"));
  EXPECT_TRUE(GpuTypeMatches("BIG", "NVIDIA Graphics Device", "big"));
  EXPECT_FALSE(GpuTypeMatches("small", "NVIDIA Graphics Device", "big"));
  EXPECT_EQ(GpuTypeShown("rtx 4090"), "RTX 4090");
}

TEST(GpuTypeTest, CheckNamesTheFieldAndForm) {
  EXPECT_TRUE(CheckGpuType("a100", "--gpu-type").ok());
  EXPECT_TRUE(CheckGpuType("rtx 4090", "--gpu-type").ok());
  for (const char* bad : {"", " ", "a100;rm", "a/b", "a100\n"}) {
    Status st = CheckGpuType(bad, "--gpu-type");
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_THAT(st.message(), HasSubstr("--gpu-type: '"));
    EXPECT_THAT(st.message(), HasSubstr("like a100"));
  }
  EXPECT_FALSE(CheckGpuType(std::string(kMaxGpuTypeBytes + 1, 'a'), "t").ok());
}

TEST(ConstraintTest, AndsSplitOrsStayOneClause) {
  EXPECT_THAT(ParseConstraint("ib", "c").value(), ElementsAre("ib"));
  EXPECT_THAT(ParseConstraint("ib&nvlink", "c").value(), ElementsAre("ib", "nvlink"));
  EXPECT_THAT(ParseConstraint("a100|h100", "c").value(), ElementsAre("a100|h100"));
}

TEST(ConstraintTest, RefusesWhatItDoesNotReadNamingWhy) {
  auto message = [](const char* text) {
    Result<std::vector<std::string>> r = ParseConstraint(text, "--constraint");
    return r.ok() ? std::string("(accepted)") : r.status().message();
  };
  EXPECT_THAT(message("[ib|eth]"), HasSubstr("brackets"));
  EXPECT_THAT(message("ib*2"), HasSubstr("counts nodes"));
  EXPECT_THAT(message("ib&a|b"), HasSubstr("mixes & and |"));
  EXPECT_THAT(message("ib&&x"), HasSubstr("empty feature"));
  EXPECT_THAT(message(""), HasSubstr("empty feature"));
  EXPECT_THAT(message("i b"), HasSubstr("'i b', not a feature name"));
  EXPECT_THAT(message("x y"), HasSubstr("--constraint: 'x y'"));
}

TEST(ConstraintTest, EveryClauseMustHoldAnyNameOfOne) {
  std::vector<std::string> node = {"IB", "nvlink"};
  EXPECT_TRUE(MeetsConstraints(node, {}));
  EXPECT_TRUE(MeetsConstraints(node, {"ib"}));  // names ignore case
  EXPECT_TRUE(MeetsConstraints(node, {"ib", "nvlink"}));
  EXPECT_TRUE(MeetsConstraints(node, {"eth|ib"}));
  EXPECT_FALSE(MeetsConstraints(node, {"ib", "eth"}));
  EXPECT_FALSE(MeetsConstraints({}, {"ib"}));
  EXPECT_THAT(UnmetConstraints(node, {"ib", "eth", "a|b"}), ElementsAre("eth", "a|b"));
  EXPECT_THAT(UnmetConstraints(node, {"ib"}), IsEmpty());
}

}  // namespace
}  // namespace trainq
