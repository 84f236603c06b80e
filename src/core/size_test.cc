#include "trainq/size.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kTiB = 1ull << 40;

struct SizeCase {
  const char* text;
  uint64_t bytes;
};

TEST(ParseSizeTest, AcceptsEveryDocumentedForm) {
  const SizeCase cases[] = {
      {"20GiB", 20 * kGiB},
      {"20G", 20 * kGiB},
      {"20g", 20 * kGiB},
      {"20gib", 20 * kGiB},
      {"20GIB", 20 * kGiB},
      {"512MiB", 512 * kMiB},
      {"512M", 512 * kMiB},
      {"512mb", 512'000'000},
      {"1.5TiB", kTiB + kTiB / 2},
      {"2T", 2 * kTiB},
      {"1TB", 1'000'000'000'000},
      {"20GB", 20'000'000'000},
      {"20gb", 20'000'000'000},
      {"4K", 4096},
      {"4KiB", 4096},
      {"4kb", 4000},
      {"300b", 300},
      {"300B", 300},
      {"1024", 1024 * kMiB},  // bare number: MiB
      {"1.5", kMiB + kMiB / 2},
      {"0.5G", kGiB / 2},
      {" 20 GiB ", 20 * kGiB},
      {"9007199254740993B", 9007199254740993ull},  // beyond double precision: exact
      {"9000000000000000000B", 9'000'000'000'000'000'000ull},
  };
  for (const SizeCase& c : cases) {
    Result<uint64_t> got = ParseSize(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().message();
    EXPECT_EQ(*got, c.bytes) << c.text;
  }
}

struct RejectCase {
  const char* text;
  const char* why;
};

TEST(ParseSizeTest, RejectsWithAMessageNamingFieldAndForms) {
  const RejectCase cases[] = {
      {"20XB", "unknown unit 'XB'"},
      {"-1G", "negative"},
      {"0", "more than zero"},
      {"0G", "more than zero"},
      {"0.0G", "more than zero"},
      {"0.1B", "more than zero"},
      {"", "empty"},
      {"   ", "empty"},
      {"G", "not a size"},
      {".5G", "not a size"},
      {"5.G", "not a size"},
      {"1..5G", "not a size"},
      {"1.2.3G", "not a size"},
      {"abc", "not a size"},
      {"+5G", "not a size"},
      {"1e3G", "unknown unit"},
      {"20 G B", "unknown unit"},
      {"9000000000000000001B", "too large"},
      {"99999999999999999999999", "too large"},
      {"16777216T", "too large"},
      {"8388608.5T", "too large"},
      {"100000000000000000000000000000000000000.5G", "too large"},
  };
  for (const RejectCase& c : cases) {
    Result<uint64_t> got = ParseSize(c.text, "--mem");
    ASSERT_FALSE(got.ok()) << c.text << " parsed as " << *got;
    EXPECT_EQ(got.status().code(), Code::kInvalid);
    EXPECT_THAT(got.status().message(), HasSubstr(c.why)) << c.text;
    EXPECT_THAT(got.status().message(), HasSubstr("--mem: '")) << c.text;
    EXPECT_THAT(got.status().message(), HasSubstr("20GiB")) << c.text;
  }
}

TEST(ParseMemRequestTest, PercentagesAndSizes) {
  struct Case {
    const char* text;
    std::optional<uint64_t> bytes;
    std::optional<double> percent;
  };
  const Case cases[] = {
      {"40%", std::nullopt, 40.0},        {"100%", std::nullopt, 100.0},
      {"0.5%", std::nullopt, 0.5},        {" 12.5 % ", std::nullopt, 12.5},
      {"20GiB", 20 * kGiB, std::nullopt}, {"2048", 2 * kGiB, std::nullopt},
  };
  for (const Case& c : cases) {
    Result<MemRequest> got = ParseMemRequest(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().message();
    EXPECT_EQ(got->bytes, c.bytes) << c.text;
    EXPECT_EQ(got->percent, c.percent) << c.text;
  }
}

TEST(ParseMemRequestTest, RejectsBadPercentagesAndSizes) {
  const RejectCase cases[] = {
      {"0%", "not a percentage"},
      {"101%", "not a percentage"},
      {"100.01%", "not a percentage"},
      {"abc%", "not a percentage"},
      {"%", "not a percentage"},
      {"-5%", "not a percentage"},
      {"nan%", "not a percentage"},
      {"inf%", "not a percentage"},
      {"20XB", "or a percentage of the GPU like 40%"},
      {"", "or a percentage of the GPU like 40%"},
  };
  for (const RejectCase& c : cases) {
    Result<MemRequest> got = ParseMemRequest(c.text);
    ASSERT_FALSE(got.ok()) << c.text;
    EXPECT_EQ(got.status().code(), Code::kInvalid);
    EXPECT_THAT(got.status().message(), HasSubstr(c.why)) << c.text;
    EXPECT_THAT(got.status().message(), HasSubstr("--mem")) << c.text;
  }
}

TEST(FormatBytesTest, BinaryUnitsOneDecimal) {
  const std::pair<uint64_t, const char*> cases[] = {
      {0, "0 B"},
      {300, "300 B"},
      {1023, "1023 B"},
      {1024, "1.0 KiB"},
      {1536, "1.5 KiB"},
      {512 * kMiB, "512.0 MiB"},
      {20 * kGiB, "20.0 GiB"},
      {kTiB + kTiB / 2, "1.5 TiB"},
      {kMiB - 1, "1.0 MiB"},  // 1023.999 KiB must not print as "1024.0 KiB"
      {kGiB - kMiB, "1023.0 MiB"},
      {1ull << 50, "1.0 PiB"},
      {UINT64_MAX, "16384.0 PiB"},
  };
  for (const auto& [bytes, text] : cases) EXPECT_EQ(FormatBytes(bytes), text) << bytes;
}

TEST(FormatBytesTest, RoundTripsThroughParseSizeWithinRounding) {
  for (uint64_t bytes : {3 * kGiB / 2, 20 * kGiB, 80 * kGiB, 512 * kMiB}) {
    std::string text = FormatBytes(bytes);
    text.erase(text.find(' '), 1);
    Result<uint64_t> back = ParseSize(text);
    ASSERT_TRUE(back.ok()) << text;
    EXPECT_EQ(*back, bytes) << text;
  }
}

}  // namespace
}  // namespace trainq
