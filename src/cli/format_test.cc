// The tables and reports print what jobs carry, never what a terminal would obey.
#include "src/cli/format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace trainq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

json HostileJob() {
  return json::parse(R"({"id": 7, "name": "evil\u001b]0;pwned\u0007", "state": "queued",
                         "reason": "waits\u001b[2J", "command": ["echo", "\u001b[31mred", "a\nb"],
                         "cwd": "/tmp/\u009b1m", "gpus": 1, "attempt": 0, "user": "u",
                         "submitted_at": "2026-11-22T10:00:01.123Z", "priority": 0,
                         "retries": 0, "attempts": []})");
}

TEST(FormatTest, TablesAndDetailsShowEscapesNotControlCharacters) {
  json doc = HostileJob();
  Reply job(doc);
  for (const std::string& out : {JobsTable({job}), JobDetails(job)}) {
    EXPECT_THAT(out, Not(HasSubstr("\x1b"))) << out;
    EXPECT_THAT(out, Not(HasSubstr("\x07"))) << out;
    EXPECT_THAT(out, Not(HasSubstr("\xc2\x9b"))) << out;
    EXPECT_THAT(out, HasSubstr("evil\\x1b]0;pwned\\x07")) << out;
  }
  std::string details = JobDetails(job);
  EXPECT_THAT(details, HasSubstr("'\\x1b[31mred' 'a\\nb'"));
  EXPECT_THAT(details, HasSubstr("waits\\x1b[2J"));
  EXPECT_THAT(details, HasSubstr("/tmp/\\u009b1m"));
  EXPECT_TRUE(job.ok()) << job.status().message();
}

TEST(FormatTest, DetailsShowNodeListsAndGang) {
  json doc = HostileJob();
  doc["nodes"] = {"gpu1", "gpu2"};
  doc["exclude_nodes"] = {"gpu9"};
  doc["num_nodes"] = 2;
  Reply job(doc);
  std::string details = JobDetails(job);
  EXPECT_THAT(details, HasSubstr("nodes:       gpu1,gpu2\n"));
  EXPECT_THAT(details, HasSubstr("not on:      gpu9\n"));
  EXPECT_THAT(details, HasSubstr("gang:        2 nodes"));
  EXPECT_TRUE(job.ok()) << job.status().message();
  std::string plain = JobDetails(Reply(HostileJob()));
  EXPECT_THAT(plain, Not(HasSubstr("gang:")));
  EXPECT_THAT(plain, Not(HasSubstr("nodes:")));
}

}  // namespace
}  // namespace trainq
