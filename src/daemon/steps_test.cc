#include "src/daemon/steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace trainq {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string Step(int step, std::vector<int> tasks) {
  std::vector<int> first;
  int rank = 0;
  for (int t : tasks) {
    first.push_back(rank);
    rank += t;
  }
  return json{{"step", step}, {"argv", {"hostname"}}, {"env", {{"A", "1"}}},
              {"cwd", "/"},   {"tasks", tasks},       {"first", first}}
      .dump();
}

TEST(StepBoardTest, EachPartGetsTheStepsThatGiveItTasksInOrder) {
  StepBoard board;
  ASSERT_TRUE(board.Add(5, 1, 3, Step(0, {1, 1, 1})).ok());
  ASSERT_TRUE(board.Add(5, 1, 3, Step(1, {2, 0, 0})).ok());  // node 0 alone
  ASSERT_TRUE(board.Add(5, 1, 3, Step(2, {1, 0, 1})).ok());
  EXPECT_EQ(json::parse(board.Next(5, 1, 1, -1))["step"], 0);
  EXPECT_EQ(board.Next(5, 1, 1, 0), "");  // steps 1 and 2 give node 1 nothing
  EXPECT_EQ(json::parse(board.Next(5, 1, 2, 0))["step"], 2);
  EXPECT_EQ(board.Next(5, 2, 1, -1), "");  // another attempt has no steps yet
  EXPECT_EQ(board.Add(5, 1, 3, Step(2, {1, 1, 1})).code(), Code::kConflict);
}

TEST(StepBoardTest, EndsAndCancelsAreReadBack) {
  StepBoard board;
  ASSERT_TRUE(board.Add(5, 1, 2, Step(0, {1, 1})).ok());
  ASSERT_TRUE(
      board.Finish(5, 1, 0, 1, 3, {"srun: error: b: task 1: Exited with exit code 3"}).ok());
  EXPECT_EQ(board.Next(5, 1, 1, -1), "");  // ended: not given again
  ASSERT_TRUE(board.Cancel(5, 1, 0).ok());
  Result<json> state = board.State(5, 1, 0);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)["results"]["1"]["exit"], 3);
  EXPECT_EQ((*state)["cancelled"], true);
  EXPECT_EQ(board.Finish(5, 1, 0, 2, 0, {}).code(), Code::kInvalid);  // no such part
  EXPECT_EQ(board.State(5, 1, 9).status().code(), Code::kNotFound);
  board.Keep({{6, 1}});  // job 5's script no longer runs here
  EXPECT_EQ(board.State(5, 1, 0).status().code(), Code::kNotFound);
}

TEST(StepBoardTest, ABodyThatIsNoStepIsRefusedNamingTheField) {
  StepBoard board;
  auto refused = [&](const std::string& body) {
    Status st = board.Add(5, 1, 2, body);
    EXPECT_EQ(st.code(), Code::kInvalid) << body;
    return st.message();
  };
  EXPECT_THAT(refused("[]"), HasSubstr("JSON object"));
  json good = json::parse(Step(0, {1, 1}));
  json bad = good;
  bad["argv"] = json::array();
  EXPECT_THAT(refused(bad.dump()), HasSubstr("argv"));
  bad = good;
  bad["tasks"] = {1, 1, 1};
  EXPECT_THAT(refused(bad.dump()), HasSubstr("tasks must be a list of 2 counts"));
  bad = good;
  bad["env"] = {{"A=B", "1"}};
  EXPECT_THAT(refused(bad.dump()), HasSubstr("env"));
  bad = good;
  bad["step"] = -1;
  EXPECT_THAT(refused(bad.dump()), HasSubstr("step"));
}

}  // namespace
}  // namespace trainq
