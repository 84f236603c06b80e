#include "src/sim/window.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq::sim {
namespace {

using ::testing::HasSubstr;

struct WallCase {
  const char* text;
  std::optional<int64_t> ms;
};

class Wall : public ::testing::TestWithParam<WallCase> {};

TEST_P(Wall, ReadsDatesAsWritten) { EXPECT_EQ(ParseWallTimeMs(GetParam().text), GetParam().ms); }

constexpr int64_t kDay = 24 * 3600 * 1000LL;
constexpr int64_t kNov1 = 17471 * kDay;  // 2017-11-01 00:00

INSTANTIATE_TEST_SUITE_P(
    Dates, Wall,
    ::testing::Values(
        WallCase{"1970-01-01", 0}, WallCase{"2017-11-01", kNov1},
        WallCase{"2017-11-01 00:02:12", kNov1 + 132000},
        WallCase{"2017-11-01T06:30", kNov1 + 6 * 3600000 + 30 * 60000},
        WallCase{"2016-02-29", 16860 * kDay}, WallCase{"2017-02-29", std::nullopt},
        WallCase{"2017-13-01", std::nullopt}, WallCase{"2017-11-01 24:00", std::nullopt},
        WallCase{"2017-11-01x06:00", std::nullopt}, WallCase{"2017-11-1", std::nullopt},
        WallCase{"2017-11-01 06:00:1", std::nullopt}, WallCase{"soon", std::nullopt}));

TraceJob Row(const char* id, int64_t submit_ms, std::optional<int64_t> wall_ms) {
  TraceJob j;
  j.id = id;
  j.submit_ms = submit_ms;
  j.submit_wall_ms = wall_ms;
  return j;
}

TEST(Window, SecondsSelectAndRebase) {
  std::vector<TraceJob> trace = {Row("a", 0, {}), Row("b", 10000, {}), Row("c", 20000, {})};
  Result<TraceWindow> w = ParseWindow("10..20", trace);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->start_ms, 10000);
  EXPECT_EQ(w->end_ms, 20000);
  std::vector<TraceJob> rows = SelectWindow(trace, *w);
  ASSERT_EQ(rows.size(), 1u);  // END is not included
  EXPECT_EQ(rows[0].id, "b");
  EXPECT_EQ(rows[0].submit_ms, 0);
}

TEST(Window, DatesUseTheTracesSubmitTime) {
  // The trace's clock starts one day before 2017-11-01 (submit_s 0 = 2017-10-31 00:00).
  std::vector<TraceJob> trace = {Row("a", 0, kNov1 - kDay), Row("b", kDay + 5000, kNov1 + 5000),
                                 Row("c", 2 * kDay, kNov1 + kDay)};
  Result<TraceWindow> w = ParseWindow("2017-11-01..2017-11-02", trace);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->start_ms, kDay);
  std::vector<TraceJob> rows = SelectWindow(trace, *w);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].submit_ms, 5000);
  EXPECT_EQ(rows[0].submit_wall_ms, kNov1 + 5000);
}

TEST(Window, AWarmUpReplaysEarlierRowsFirst) {
  std::vector<TraceJob> trace = {Row("a", 0, {}), Row("b", 10000, {}), Row("c", 20000, {})};
  TraceWindow w{"15..25", 15000, 25000, 10000};
  std::vector<TraceJob> rows = SelectWindow(trace, w);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, "b");
  EXPECT_EQ(rows[0].submit_ms, 5000);   // 5 s into the warm-up, which starts at 5 s
  EXPECT_EQ(rows[1].submit_ms, 15000);  // the window starts at warmup_ms
}

struct BadWindow {
  const char* text;
  const char* expected;
};

class WindowBad : public ::testing::TestWithParam<BadWindow> {};

TEST_P(WindowBad, NamesTheOptionAndTheForm) {
  std::vector<TraceJob> no_dates = {Row("a", 0, {})};
  Result<TraceWindow> w = ParseWindow(GetParam().text, no_dates);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("--window:"));
  EXPECT_THAT(w.status().message(), HasSubstr(GetParam().expected));
  EXPECT_THAT(w.status().message(), HasSubstr("expected START..END"));
}

INSTANTIATE_TEST_SUITE_P(Texts, WindowBad,
                         ::testing::Values(BadWindow{"100", "no '..'"},
                                           BadWindow{"20..10", "END is not after START"},
                                           BadWindow{"5..5", "END is not after START"},
                                           BadWindow{"-5..10", "'-5' is neither"},
                                           BadWindow{"2017-11-01..2017-11-08", "submit_time"}));

}  // namespace
}  // namespace trainq::sim
