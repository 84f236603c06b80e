#include "src/core/words.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Case {
  std::string line;
  std::vector<std::string> words;
};

TEST(SplitWordsTest, QuotesAndEscapesAsShDoes) {
  const Case kCases[] = {
      {"python train.py --lr 3e-4", {"python", "train.py", "--lr", "3e-4"}},
      {"  a \t b  ", {"a", "b"}},
      {"", {}},
      {"echo 'a b' \"c d\"", {"echo", "a b", "c d"}},
      {"echo a\\ b", {"echo", "a b"}},
      {"echo 'it''s'", {"echo", "its"}},
      {"echo \"say \\\"hi\\\"\"", {"echo", "say \"hi\""}},
      {"echo \"keep \\n as is\"", {"echo", "keep \\n as is"}},
      {"echo '' x", {"echo", "", "x"}},
      {"echo $HOME *.py ~", {"echo", "$HOME", "*.py", "~"}},  // no expansion
      {"a'b'\"c\"d", {"abcd"}},
  };
  for (const Case& c : kCases) {
    Result<std::vector<std::string>> got = SplitWords(c.line, "line 1");
    ASSERT_TRUE(got.ok()) << c.line << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.words) << c.line;
  }
}

TEST(SplitWordsTest, UnbalancedInputIsRefusedNamingTheField) {
  for (const char* bad : {"echo 'open", "echo \"open", "echo trailing\\"}) {
    Result<std::vector<std::string>> got = SplitWords(bad, "--from jobs.txt:3");
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), Code::kInvalid);
    EXPECT_THAT(got.status().message(), HasSubstr("--from jobs.txt:3"));
  }
}

}  // namespace
}  // namespace trainq
