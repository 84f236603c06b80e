#include "src/cli/reply.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace trainq {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

TEST(ReplyTest, ReadsFieldsOfTheExpectedShape) {
  json doc = json::parse(R"({"id": 3, "name": "train", "mem": 1024, "oom": true,
                            "jobs": [{"n": 1}, {"n": 2}], "fs": {"rank": 1}})");
  Reply r(doc);
  EXPECT_EQ(r.Int("id"), 3);
  EXPECT_EQ(r.Str("name"), "train");
  EXPECT_EQ(r.UInt("mem"), 1024u);
  EXPECT_TRUE(r.Bool("oom"));
  std::vector<Reply> jobs = r.Array("jobs");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].Int("n"), 2);
  EXPECT_EQ(r.Object("fs").Int("rank"), 1);
  EXPECT_TRUE(r.ok()) << r.status().message();
}

TEST(ReplyTest, AMissingFieldNamesItAndWhatWasExpected) {
  json doc = json::object();
  Reply r(doc);
  EXPECT_TRUE(r.Array("jobs").empty());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_EQ(r.status().message(),
            "the daemon's reply lacks field 'jobs' (an array); is trainqd the same version as "
            "trainq?");
}

TEST(ReplyTest, AFieldOfAnotherTypeNamesItsPath) {
  json doc = json::parse(R"({"jobs": [{"id": 1}, {"id": "2"}]})");
  Reply r(doc);
  for (const Reply& job : r.Array("jobs")) job.Int("id");
  EXPECT_THAT(r.status().message(),
              HasSubstr("has field 'jobs[1].id' as a string where an integer was expected"));
}

TEST(ReplyTest, TheFirstProblemIsKept) {
  json doc = json::parse(R"({"a": 1})");
  Reply r(doc);
  EXPECT_EQ(r.Str("a"), "");
  EXPECT_EQ(r.Int("b"), 0);
  EXPECT_THAT(r.status().message(), HasSubstr("field 'a' as a number where a string"));
}

TEST(ReplyTest, AWholeReplyOfAnotherTypeIsNamed) {
  json doc = json::parse("[1, 2]");
  Reply r(doc);
  EXPECT_EQ(r.Str("message"), "");
  EXPECT_THAT(r.status().message(), HasSubstr("the daemon's reply is an array, not an object"));
}

TEST(ReplyTest, ANestedValueThatIsNoObjectIsNamed) {
  json doc = json::parse(R"({"gpus": [7]})");
  Reply r(doc);
  for (const Reply& g : r.Array("gpus")) g.Text("name");
  EXPECT_THAT(r.status().message(), HasSubstr("field 'gpus[0]' as a number, not an object"));
}

TEST(ReplyTest, OptionalFieldsMayBeAbsentOrNullButNotOfAnotherType) {
  json doc = json::parse(R"({"limit": null, "pct": 40.5, "port": "x"})");
  Reply r(doc);
  EXPECT_EQ(r.OptInt("limit"), std::nullopt);
  EXPECT_EQ(r.OptStr("reason"), std::nullopt);
  EXPECT_EQ(r.OptNum("pct"), 40.5);
  EXPECT_FALSE(r.Has("limit"));
  EXPECT_TRUE(r.Has("pct"));
  EXPECT_TRUE(r.BoolOr("waiting", true));
  EXPECT_TRUE(r.ArrayOr("holds").empty());
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.OptInt("port"), std::nullopt);
  EXPECT_THAT(r.status().message(), HasSubstr("'port' as a string where an integer"));
}

TEST(ReplyTest, TextShowsScalarsAndADashForNothing) {
  json doc = json::parse(R"({"s": "a b", "n": 12, "b": false, "z": null, "list": [1]})");
  Reply r(doc);
  EXPECT_EQ(r.Text("s"), "a b");
  EXPECT_EQ(r.Text("n"), "12");
  EXPECT_EQ(r.Text("b"), "false");
  EXPECT_EQ(r.Text("z"), "-");
  EXPECT_EQ(r.Text("missing"), "-");
  EXPECT_EQ(r.AnyText("list"), "[1]");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.Text("list"), "-");
  EXPECT_THAT(r.status().message(), HasSubstr("'list' as an array where a single value"));
}

TEST(ReplyTest, ElementsOfScalarArraysAreChecked) {
  json doc = json::parse(R"({"ids": [4, "5"], "rows": [[0, 10], 3]})");
  Reply r(doc);
  std::vector<Reply> ids = r.Array("ids");
  EXPECT_EQ(ids[0].AsInt(), 4);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(ids[1].AsInt(), 0);
  EXPECT_THAT(r.status().message(), HasSubstr("'ids[1]' as a string where an integer"));

  Reply rows(doc);
  std::vector<Reply> all = rows.Array("rows");
  EXPECT_EQ(all[0].Elements().size(), 2u);
  EXPECT_TRUE(all[1].Elements().empty());
  EXPECT_THAT(rows.status().message(), HasSubstr("'rows[1]' as a number where an array"));
}

}  // namespace
}  // namespace trainq
