#include "src/core/job_fields.h"

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/core/job_fields_test_util.h"
#include "src/core/json_codec.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Keys(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    size_t space = list.find(' ');
    out.emplace_back(list.substr(0, space));
    list = space == std::string_view::npos ? std::string_view() : list.substr(space + 1);
  }
  return out;
}

TEST(JobFieldsTest, EveryFieldIsSetByFullSpec) {
  std::vector<std::string> differ = DifferingFields(FullSpec(1, 2), JobSpec{});
  EXPECT_EQ(differ.size(), kJobFieldCount) << "FullSpec leaves a field at its default";
}

TEST(JobFieldsTest, EachRowSaysWhyWhenItIsNotSignedNotKeptOrNotTakenFromARequest) {
  for (const JobFieldInfo& f : JobFieldInfos()) {
    SCOPED_TRACE(std::string(f.name));
    EXPECT_FALSE(f.redis.empty());
    bool needs_why =
        !f.signed_ || f.sql.empty() || f.request.empty() || f.shown.empty() || f.show.empty();
    if (needs_why) {
      EXPECT_FALSE(f.why.empty());
    }
    // What update changes in place cannot be signed by the node that stored the job.
    if (f.change != Change::kNever) {
      EXPECT_FALSE(f.signed_);
    }
  }
}

TEST(JobFieldsTest, NamesAreUniquePerStore) {
  std::set<std::string_view> sql;
  std::set<std::string_view> redis;
  for (const JobFieldInfo& f : JobFieldInfos()) {
    if (f.codec == FieldCodec::kInCollect) continue;  // shares collect's column, by design
    if (!f.sql.empty()) {
      EXPECT_TRUE(sql.insert(f.sql).second) << f.sql;
    }
    EXPECT_TRUE(redis.insert(f.redis).second) << f.redis;
  }
}

// Every key of the table reaches a reader of its own: a value of the wrong kind is refused
// naming that key, never as an unknown field.
TEST(JobFieldsTest, EveryRequestKeyOfTheTableIsRead) {
  for (const JobFieldInfo& f : JobFieldInfos()) {
    for (const std::string& key : Keys(f.request)) {
      SCOPED_TRACE(key);
      // An array of one object: the wrong kind for every key.
      nlohmann::json bad = nlohmann::json::array({nlohmann::json::object()});
      nlohmann::json request = {{"command", {"true"}}, {key, bad}};
      if (key == "command") request = {{"command", bad}};
      Result<JobSpec> spec = SpecFromJson(request);
      ASSERT_FALSE(spec.ok());
      EXPECT_THAT(spec.status().message(), HasSubstr(key));
      EXPECT_THAT(spec.status().message(), Not(HasSubstr("unknown field")));
    }
  }
}

TEST(JobFieldsTest, AKeyOutsideTheTableIsUnknownAndTheMessageListsTheTablesKeys) {
  Result<JobSpec> spec = SpecFromJson({{"command", {"true"}}, {"user", "root"}});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("user: unknown field; expected command, "));
  EXPECT_THAT(spec.status().message(), HasSubstr(std::string(RequestKeys())));
  for (const JobFieldInfo& f : JobFieldInfos()) {
    for (const std::string& key : Keys(f.request)) {
      EXPECT_THAT(std::string(RequestKeys()), HasSubstr(key));
    }
  }
}

// What the job's JSON shows is what the table says it shows.
TEST(JobFieldsTest, EveryShownKeyIsInTheJobsJson) {
  Job job;
  job.id = 3;
  job.spec = FullSpec(1, 2);
  nlohmann::json doc = JobToJson(job);
  for (const JobFieldInfo& f : JobFieldInfos()) {
    for (const std::string& key : Keys(f.shown)) {
      EXPECT_TRUE(doc.contains(key)) << f.name << " shows as " << key;
    }
  }
  for (const char* hidden : {"env", "submit_key", "gate_ticks", "signed_by", "signature"}) {
    EXPECT_FALSE(doc.contains(hidden)) << hidden;
  }
}

}  // namespace
}  // namespace trainq
