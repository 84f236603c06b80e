#include "src/core/transfers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::HasSubstr;

TEST(ParseStageTest, SrcIsMadeAbsoluteAndDstDefaultsToItsPlace) {
  struct Case {
    const char* text;
    const char* src;
    const char* dst;
  } cases[] = {
      {"/data/imagenet:data", "/data/imagenet", "data"},
      {"/data/imagenet:/scratch/in", "/data/imagenet", "/scratch/in"},
      {"data/train", "/home/ann/proj/data/train", "data/train"},  // below the cwd: same place
      {"./data/../data/x", "/home/ann/proj/data/x", "data/x"},
      {"/data/imagenet", "/data/imagenet", "imagenet"},  // elsewhere: its last name
      {"../shared/set", "/home/ann/shared/set", "set"},
  };
  for (const Case& c : cases) {
    Result<StageArg> s = ParseStage(c.text, "/home/ann/proj", "--stage");
    ASSERT_TRUE(s.ok()) << c.text << ": " << s.status().message();
    EXPECT_EQ(s->src, c.src) << c.text;
    EXPECT_EQ(s->dst, c.dst) << c.text;
  }
}

TEST(ParseStageTest, RefusesWhatIsNoStageNamingTheFormAccepted) {
  for (const char* text : {"", ":data", "/data:", "/a:b:c", "/", "/data:..", "/data:../.."}) {
    Result<StageArg> s = ParseStage(text, "/home/ann", "--stage");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), Code::kInvalid);
    EXPECT_THAT(s.status().message(), HasSubstr("--stage:"));
    EXPECT_THAT(s.status().message(), HasSubstr("SRC or SRC:DST"));
  }
}

Transfer AStage() {
  Transfer t;
  t.kind = TransferKind::kStage;
  t.src = "/data/set";
  t.dst = "data";
  t.manifest = std::string(64, 'a');
  t.manifest_path = "/home/ann/.local/share/trainq/snapshots/manifests/" + t.manifest;
  t.bytes = 12;
  t.files = 2;
  return t;
}

TEST(TransfersTest, RoundTripThroughTheStoresText) {
  Transfer tree = AStage();
  tree.kind = TransferKind::kTree;
  tree.dst = "";
  std::vector<Transfer> all = {tree, AStage()};
  Result<std::vector<Transfer>> back = TransfersFromText(TransfersToText(all));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, all);
  EXPECT_EQ(TransfersToText({}), "");
  EXPECT_TRUE(TransfersFromText("")->empty());
  EXPECT_EQ(TransfersFromText("[{}]").status().code(), Code::kInternal);
}

TEST(TransfersTest, ARequestsTransfersAreReadNamingTheBadItem) {
  Result<std::vector<Transfer>> t =
      ParseTransfers(R"([{"kind": "stage", "src": "/a", "dst": "b", "manifest": "x",
                          "manifest_path": "/m", "bytes": -1, "files": 1}])",
                     "transfers");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "transfers[0].bytes: expected a count");
  t = ParseTransfers(R"([{"kind": "copy", "src": "/a", "dst": "b", "manifest": "x",
                          "manifest_path": "/m", "bytes": 1, "files": 1}])",
                     "transfers");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("transfers[0].kind"));
}

TEST(TransfersTest, ValidationNamesEachBadField) {
  JobSpec spec;
  spec.transfers = {AStage()};
  std::vector<FieldError> errors;
  CheckTransfers(spec, errors);
  EXPECT_TRUE(errors.empty());
  spec.transfers[0].src = "relative";
  spec.transfers[0].manifest = "short";
  CheckTransfers(spec, errors);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].message, HasSubstr("is not an absolute path"));
  EXPECT_THAT(errors[1].message, HasSubstr("not a SHA-256"));
  errors.clear();
  spec.transfers = {AStage()};
  spec.transfers[0].kind = TransferKind::kLink;  // a link without the tree it is in
  CheckTransfers(spec, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message, HasSubstr("links without a snapshot tree"));
}

TEST(CollectTest, PatternsBelowTheCwdAndAnAbsoluteDestination) {
  JobSpec spec;
  spec.collect = {"checkpoints/*.pt", "metrics.json"};
  std::vector<FieldError> errors;
  CheckCollect(spec, errors);
  EXPECT_TRUE(errors.empty());
  JobSpec back;
  ASSERT_TRUE(CollectFromText(CollectToText(spec), back).ok());
  EXPECT_EQ(back.collect, spec.collect);
  for (const char* bad : {"/etc/*", "../up", "a/../../b", ""}) {
    spec.collect = {bad};
    errors.clear();
    CheckCollect(spec, errors);
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_EQ(errors[0].field, "--collect");
  }
  spec.collect = {};
  spec.collect_to = "/results";
  errors.clear();
  CheckCollect(spec, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message, HasSubstr("give --collect PATTERN"));
}

}  // namespace
}  // namespace trainq
