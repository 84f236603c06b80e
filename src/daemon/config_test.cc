#include "src/daemon/config.h"

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::HasSubstr;

TEST(ConfigTest, EmptyFileGivesDefaults) {
  Result<Config> c = ParseConfig("", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->headroom_bytes, 256ull << 20);
  EXPECT_EQ(c->oom_backoff_ms, 30000);
  EXPECT_EQ(c->grace_ms, 10000);
  EXPECT_EQ(c->cpu_slots, 0);
}

TEST(ConfigTest, ReadsEveryKindOfValue) {
  Result<Config> c = ParseConfig(R"(
headroom = "1GiB"
oom_backoff = "1m30s"
cpu_slots = 12
fake_gpus = "/x/gpus.json"
oom_patterns = ["alloc failed", "device OOM"]
log_tail = 4096
)", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->headroom_bytes, 1ull << 30);
  EXPECT_EQ(c->oom_backoff_ms, 90000);
  EXPECT_EQ(c->cpu_slots, 12);
  EXPECT_EQ(c->fake_gpus, "/x/gpus.json");
  EXPECT_THAT(c->oom_patterns, ::testing::ElementsAre("alloc failed", "device OOM"));
  EXPECT_EQ(c->log_tail_bytes, 4096u);
}

TEST(ConfigTest, EveryProblemNamesItsOption) {
  Result<Config> c = ParseConfig(R"(
headroom = "lots"
cpu_slots = "four"
grace_period = 10
colour = "blue"
)", "config.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalid);
  EXPECT_THAT(c.status().message(), HasSubstr("headroom"));
  EXPECT_THAT(c.status().message(), HasSubstr("cpu_slots"));
  EXPECT_THAT(c.status().message(), HasSubstr("grace_period: expected a duration"));
  EXPECT_THAT(c.status().message(), HasSubstr("unknown config option 'colour'"));
}

TEST(ConfigTest, SyntaxErrorGivesTheLine) {
  Result<Config> c = ParseConfig("headroom = \n", "my.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("my.toml:1"));
}

TEST(ConfigTest, MissingFileGivesDefaults) {
  Result<Config> c = LoadConfig("/nonexistent/trainq/config.toml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sample_interval_ms, 1000);
}

// docs/config.md is the user's reference: it must list every option with its default.
TEST(ConfigTest, DocsListEveryOptionWithItsDefault) {
  std::ifstream in(std::string(TRAINQ_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md is missing";
  std::stringstream doc;
  doc << in.rdbuf();
  for (const OptionDoc& o : ConfigOptions()) {
    std::string row = "| `" + o.name + "` | " + o.type + " | ";
    EXPECT_THAT(doc.str(), HasSubstr(row)) << o.name;
    EXPECT_THAT(doc.str(), HasSubstr(row + (o.default_value == "the host name"
                                                 ? o.default_value
                                                 : "`" + o.default_value + "`")))
        << o.name;
  }
}

}  // namespace
}  // namespace trainq
