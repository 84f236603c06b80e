#include "src/daemon/steps.h"

#include <tuple>

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

// A part's output body: pieces of (task, fd, text).
std::string Output(std::vector<std::tuple<int, int, std::string>> pieces) {
  json out = json::array();
  for (auto& [task, fd, text] : pieces) out.push_back({{"task", task}, {"fd", fd}, {"text", text}});
  return json{{"output", out}}.dump();
}

std::vector<std::string> Texts(const json& read) {
  std::vector<std::string> texts;
  for (const json& p : read["pieces"]) texts.push_back(p["text"]);
  return texts;
}

TEST(StepBoardTest, OutputIsTakenOnceInOrderAndReadBackByNumber) {
  StepBoard board;
  ASSERT_TRUE(board.Add(5, 1, 2, Step(0, {2, 2})).ok());  // node 1 runs tasks 2 and 3
  Result<json> taken = board.Append(5, 1, 0, 1, 0, Output({{2, 1, "a\n"}, {3, 2, "Trace\n"}}));
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  EXPECT_EQ((*taken)["taken"], 2);
  EXPECT_EQ((*taken)["cancelled"], false);
  // The same request again (its answer was lost) adds nothing; one that overlaps adds the rest.
  EXPECT_EQ((*board.Append(5, 1, 0, 1, 0, Output({{2, 1, "a\n"}, {3, 2, "Trace\n"}})))["taken"], 2);
  EXPECT_EQ((*board.Append(5, 1, 0, 1, 1, Output({{3, 2, "Trace\n"}, {2, 1, "b\n"}})))["taken"], 3);
  Result<json> read = board.ReadOutput(5, 1, 0, 0);
  ASSERT_TRUE(read.ok());
  EXPECT_THAT(Texts(*read), ::testing::ElementsAre("a\n", "Trace\n", "b\n"));
  EXPECT_EQ((*read)["pieces"][1]["task"], 3);
  EXPECT_EQ((*read)["pieces"][1]["fd"], 2);
  EXPECT_EQ((*read)["next"], 3);
  EXPECT_EQ((*read)["end"], 3);
  // Reading from 2 drops what came before it: srun wrote that.
  EXPECT_THAT(Texts(*board.ReadOutput(5, 1, 0, 2)), ::testing::ElementsAre("b\n"));
  EXPECT_THAT(Texts(*board.ReadOutput(5, 1, 0, 0)), ::testing::ElementsAre("b\n"));
  ASSERT_TRUE(board.Cancel(5, 1, 0).ok());
  EXPECT_EQ((*board.Append(5, 1, 0, 1, 3, Output({})))["cancelled"], true);
  EXPECT_EQ(board.ReadOutput(5, 1, 9, 0).status().code(), Code::kNotFound);
}

TEST(StepBoardTest, OutputThatIsNotThePartsIsRefusedNamingTheField) {
  StepBoard board;
  ASSERT_TRUE(board.Add(5, 1, 3, Step(0, {2, 2, 0})).ok());
  auto refused = [&](int rank, int64_t at, const std::string& body) {
    Result<json> r = board.Append(5, 1, 0, rank, at, body);
    EXPECT_EQ(r.status().code(), Code::kInvalid) << body;
    return r.status().message();
  };
  EXPECT_THAT(refused(1, 0, Output({{1, 1, "x"}})), HasSubstr("task of this part (2 to 3)"));
  EXPECT_THAT(refused(1, 0, Output({{2, 3, "x"}})), HasSubstr("fd"));
  std::string long_line(StepBoard::kMaxPieceBytes + 1, 'x');
  EXPECT_THAT(refused(1, 0, Output({{2, 1, long_line}})), HasSubstr("text"));
  EXPECT_THAT(refused(1, 0, "{}"), HasSubstr("output"));
  EXPECT_THAT(refused(1, 1, Output({{2, 1, "x"}})), HasSubstr("at must be at most 0"));
  EXPECT_THAT(refused(2, 0, Output({})), HasSubstr("no tasks"));
  EXPECT_EQ((*board.ReadOutput(5, 1, 0, 0))["end"], 0);  // nothing of it was taken
}

TEST(StepBoardTest, AStepHoldsAWindowOfUnreadOutputAndTheRestWaits) {
  StepBoard board;
  ASSERT_TRUE(board.Add(5, 1, 2, Step(0, {1, 1})).ok());
  std::string piece(StepBoard::kMaxPieceBytes, 'x');
  constexpr int64_t kFit = StepBoard::kStepWindowBytes / StepBoard::kMaxPieceBytes;
  std::vector<std::tuple<int, int, std::string>> many(kFit + 3, {1, 1, piece});
  EXPECT_EQ((*board.Append(5, 1, 0, 1, 0, Output(many)))["taken"], kFit);
  // Full: nothing more until srun reads.
  EXPECT_EQ((*board.Append(5, 1, 0, 1, kFit, Output({{1, 1, "y"}})))["taken"], kFit);
  Result<json> read = board.ReadOutput(5, 1, 0, 0);
  EXPECT_EQ((*read)["pieces"].size(), static_cast<size_t>(kFit));
  EXPECT_EQ((*read)["next"], kFit);
  ASSERT_TRUE(board.ReadOutput(5, 1, 0, kFit).ok());  // srun wrote them: room again
  EXPECT_EQ((*board.Append(5, 1, 0, 1, kFit, Output({{1, 1, "y"}})))["taken"], kFit + 1);
}

TEST(StepBoardTest, StepsSrunNoLongerReadsBoundTheAttemptButEachStillMoves) {
  StepBoard board;
  std::string piece(StepBoard::kMaxPieceBytes, 'x');
  constexpr size_t kFit = StepBoard::kStepWindowBytes / StepBoard::kMaxPieceBytes;
  constexpr int kFull = StepBoard::kAttemptWindowBytes / StepBoard::kStepWindowBytes;
  std::vector<std::tuple<int, int, std::string>> window(kFit, {1, 1, piece});
  for (int step = 0; step < kFull; ++step) {
    ASSERT_TRUE(board.Add(5, 1, 2, Step(step, {1, 1})).ok());
    ASSERT_EQ((*board.Append(5, 1, step, 1, 0, Output(window)))["taken"], kFit);
  }
  ASSERT_TRUE(board.Add(5, 1, 2, Step(kFull, {1, 1})).ok());
  // The attempt holds all it may: a step that holds nothing takes one piece at a time.
  EXPECT_EQ((*board.Append(5, 1, kFull, 1, 0, Output(window)))["taken"], 1);
  EXPECT_EQ((*board.Append(5, 1, kFull, 1, 1, Output(window)))["taken"], 1);
  board.Keep({});  // the script ended: everything goes
  EXPECT_EQ(board.ReadOutput(5, 1, 0, 0).status().code(), Code::kNotFound);
}

TEST(StepBoardTest, TheReadThatEndsAStepLeavesNoOutputHeld) {
  StepBoard board;
  std::string piece(StepBoard::kMaxPieceBytes, 'x');
  constexpr size_t kFit = StepBoard::kStepWindowBytes / StepBoard::kMaxPieceBytes;
  std::vector<std::tuple<int, int, std::string>> window(kFit, {1, 1, piece});
  ASSERT_TRUE(board.Add(5, 1, 2, Step(0, {1, 1})).ok());
  ASSERT_EQ((*board.Append(5, 1, 0, 1, 0, Output(window)))["taken"], kFit);
  EXPECT_EQ((*board.ReadOutput(5, 1, 0, 0))["end"], kFit);  // the part runs on: kept
  ASSERT_EQ((*board.Append(5, 1, 0, 1, kFit, Output({{1, 1, "z"}})))["taken"], kFit);
  ASSERT_TRUE(board.Finish(5, 1, 0, 1, 0, {}).ok());
  Result<json> last = board.ReadOutput(5, 1, 0, 0);
  EXPECT_EQ((*last)["next"], kFit);
  EXPECT_EQ((*last)["end"], kFit);
  // srun stops here, having it all: the step holds nothing, so it has room again.
  EXPECT_EQ((*board.Append(5, 1, 0, 1, kFit, Output(window)))["taken"], 2 * kFit);
}

}  // namespace
}  // namespace trainq
