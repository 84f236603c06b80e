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

TEST(TerminalSafeTest, ControlCharactersAreShownNotObeyed) {
  EXPECT_EQ(TerminalSafe("train \x1b]0;owned\x07 \x1b[2J"), "train \\x1b]0;owned\\x07 \\x1b[2J");
  EXPECT_EQ(TerminalSafe("a\nb\tc\rd\x7f"), "a\\nb\\tc\\rd\\x7f");
  EXPECT_EQ(TerminalSafe("csi \xc2\x9b"
                         "31m"),
            "csi \\u009b31m");  // C1 CSI as UTF-8
  EXPECT_EQ(TerminalSafe("r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93 a\\b"),
            "r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93 a\\b");
  EXPECT_EQ(TerminalSafe(std::string_view("nul\0x", 5)), "nul\\x00x");
}

TEST(Utf8ProblemTest, UnicodeTextPassesAndOtherBytesAreNamed) {
  for (std::string_view ok : {"", "plain", "r\xc3\xa9sum\xc3\xa9", "\xe2\x9c\x93",
                              "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_EQ(Utf8Problem(ok), std::nullopt) << ok;
  }
  EXPECT_EQ(Utf8Problem("ab\xff"), "byte 0xff at offset 2 is not UTF-8");
  EXPECT_EQ(Utf8Problem("\xe9t\xe9"), "byte 0xe9 at offset 0 is not UTF-8");     // Latin-1
  EXPECT_EQ(Utf8Problem("x\xc0\xaf"), "byte 0xc0 at offset 1 is not UTF-8");     // overlong '/'
  EXPECT_EQ(Utf8Problem("\xed\xa0\x80"), "byte 0xed at offset 0 is not UTF-8");  // surrogate
  EXPECT_EQ(Utf8Problem("\xf4\x90\x80\x80"), "byte 0xf4 at offset 0 is not UTF-8");
  EXPECT_EQ(Utf8Problem("\xe2\x9c"), "byte 0xe2 at offset 0 is not UTF-8");  // cut short
}

}  // namespace
}  // namespace trainq
