#include "src/store/sqlite/json_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

namespace trainq::sqlite {
namespace {

std::string Encode(std::string_view text) {
  std::string out;
  return AppendJsonString(out, text) ? out : "<invalid>";
}

TEST(JsonTextTest, EscapesWhatJsonRequires) {
  EXPECT_EQ(Encode(""), R"("")");
  EXPECT_EQ(Encode("plain text"), R"("plain text")");
  EXPECT_EQ(Encode("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Encode("\t\n\r\b\f"), R"("\t\n\r\b\f")");
  EXPECT_EQ(Encode(std::string("\x01\x1f\x00", 3)), R"("\u0001\u001f\u0000")");
  EXPECT_EQ(Encode("\x7f"), "\"\x7f\"");
  EXPECT_EQ(Encode("日本 ☃ 𝄞"), "\"日本 ☃ 𝄞\"");
}

TEST(JsonTextTest, RefusesMalformedUtf8) {
  EXPECT_EQ(Encode("caf\xe9"), "<invalid>");                      // Latin-1
  EXPECT_EQ(Encode("\xc0\xaf"), "<invalid>");                     // overlong '/'
  EXPECT_EQ(Encode("\xe0\x80\xaf"), "<invalid>");                 // overlong, 3 bytes
  EXPECT_EQ(Encode("\xed\xa0\x80"), "<invalid>");                 // surrogate U+D800
  EXPECT_EQ(Encode("\xf4\x90\x80\x80"), "<invalid>");             // U+110000
  EXPECT_EQ(Encode("\xe6\x97"), "<invalid>");                     // truncated
  EXPECT_EQ(Encode("\x80"), "<invalid>");                         // lone continuation
  EXPECT_EQ(Encode("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");  // U+10FFFF is fine
}

// Against nlohmann::json on random byte strings: the same strings are refused, and what
// is written parses back to the input.
TEST(JsonTextTest, AgreesWithNlohmannOnRandomBytes) {
  std::mt19937 rng(20261122);
  const uint8_t interesting[] = {0x00, 0x1f, 0x20, '"',  '\\', 'a',  0x7f, 0x80,
                                 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0,
                                 0xf4, 0xf5, 0xff, 0x9f, 0xa0, 0x8f, 0x90};
  int accepted = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string text(rng() % 8, '\0');
    for (char& c : text) {
      c = static_cast<char>(rng() % 2 ? interesting[rng() % sizeof(interesting)] : rng() % 256);
    }
    std::string ours;
    bool ok = AppendJsonString(ours, text);
    bool theirs = true;
    try {
      (void)nlohmann::json(text).dump();
    } catch (const nlohmann::json::exception&) {
      theirs = false;
    }
    ASSERT_EQ(ok, theirs) << ::testing::PrintToString(text);
    if (!ok) continue;
    ++accepted;
    nlohmann::json back = nlohmann::json::parse(ours, nullptr, false);
    ASSERT_TRUE(back.is_string()) << ours;
    ASSERT_EQ(back.get<std::string>(), text);
  }
  EXPECT_GT(accepted, 200);  // the generator reaches both sides
  EXPECT_LT(accepted, 3900);
}

}  // namespace
}  // namespace trainq::sqlite
