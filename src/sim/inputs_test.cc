#include "src/sim/inputs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq::sim {
namespace {

using ::testing::HasSubstr;

constexpr char kHeader[] = "job_id,submit_s,duration_s,gpus,gpu_fraction,gpu_mem_gib,user\n";

TEST(ParseTrace, ReadsTheCommonLayout) {
  std::string text = std::string(kHeader) + "a,0,30,1,1.0,,alice\nb,2.5,,1,0.46,,\nc,7,60,0,0,,\n";
  Result<std::vector<TraceJob>> jobs = ParseTrace(text, "t.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].id, "a");
  EXPECT_EQ((*jobs)[0].duration_ms, 30000);
  EXPECT_EQ((*jobs)[0].gpu_milli, 1000);
  EXPECT_EQ((*jobs)[0].user, "alice");
  EXPECT_EQ((*jobs)[1].submit_ms, 2500);
  EXPECT_FALSE((*jobs)[1].duration_ms.has_value());
  EXPECT_EQ((*jobs)[1].gpu_milli, 460);
  EXPECT_EQ((*jobs)[2].gpus, 0);  // a CPU job: fraction 0 is allowed there
}

TEST(ParseTrace, ColumnsByNameUserFallsBackToVcAndExtrasAreRead) {
  std::string text =
      "vc,gpus,job_id,duration_s,submit_s,gpu_fraction,cpu_milli,memory_mib,gpu_mem_gib,x\n"
      "v1,2,j,10,0,1,4000,1024,20,ignored\n";
  Result<std::vector<TraceJob>> jobs = ParseTrace(text, "t.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().message();
  const TraceJob& j = jobs->front();
  EXPECT_EQ(j.user, "v1");
  EXPECT_EQ(j.gpus, 2);
  EXPECT_EQ(j.cpu_milli, 4000);
  EXPECT_EQ(j.host_mem_bytes, 1024 * kMiB);
  EXPECT_EQ(j.gpu_mem_bytes, 20 * kGiB);
}

struct BadRow {
  const char* row;
  const char* expected;  // file:line: field
};

class ParseTraceBad : public ::testing::TestWithParam<BadRow> {};

TEST_P(ParseTraceBad, NamesFileLineFieldAndTheAcceptedForm) {
  std::string text = std::string(kHeader) + "ok,0,1,1,1,,\n" + GetParam().row + "\n";
  Result<std::vector<TraceJob>> jobs = ParseTrace(text, "t.csv");
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().code(), Code::kInvalid);
  EXPECT_THAT(jobs.status().message(), HasSubstr(GetParam().expected));
  EXPECT_THAT(jobs.status().message(), HasSubstr("expected"));
}

INSTANTIATE_TEST_SUITE_P(Rows, ParseTraceBad,
                         ::testing::Values(BadRow{"x,abc,1,1,1,,", "t.csv:3: submit_s: 'abc'"},
                                           BadRow{"x,-1,1,1,1,,", "t.csv:3: submit_s: '-1'"},
                                           BadRow{"x,0,1,1.5,1,,", "t.csv:3: gpus: '1.5'"},
                                           BadRow{"x,0,1,-2,1,,", "t.csv:3: gpus: '-2'"},
                                           BadRow{"x,0,1,1,1.2,,", "t.csv:3: gpu_fraction: '1.2'"},
                                           BadRow{"x,0,1,2,0.5,,", "t.csv:3: gpu_fraction: '0.5'"},
                                           BadRow{"x,0,1,1,0,,", "t.csv:3: gpu_fraction: '0'"},
                                           BadRow{"x,0,1,1,,,", "t.csv:3: gpu_fraction: empty"},
                                           BadRow{",0,1,1,1,,", "t.csv:3: job_id: empty"},
                                           BadRow{"x,0,nan,1,1,,", "t.csv:3: duration_s: 'nan'"},
                                           BadRow{"x,0,1,1,1,-4,", "t.csv:3: gpu_mem_gib: '-4'"}));

TEST(ParseTrace, ReportsEveryProblemAndAMissingColumn) {
  Result<std::vector<TraceJob>> both =
      ParseTrace(std::string(kHeader) + "a,x,1,1,1,,\nb,0,1,y,1,,\n", "t.csv");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("t.csv:2: submit_s"));
  EXPECT_THAT(both.status().message(), HasSubstr("t.csv:3: gpus"));
  Result<std::vector<TraceJob>> header = ParseTrace("job_id,submit_s,gpus\n", "t.csv");
  ASSERT_FALSE(header.ok());
  EXPECT_THAT(header.status().message(), HasSubstr("t.csv:1: header: no column 'duration_s'"));
  EXPECT_FALSE(ParseTrace("", "t.csv").ok());
}

TEST(ParseNodesCsv, EmptyGpuMemoryTakesTheDefault) {
  Result<std::vector<NodeSpec>> nodes = ParseNodesCsv(
      "node_id,gpus,gpu_model,gpu_mem_gib,cpu_milli,memory_mib\n"
      "a,2,P100,,64000,262144\nb,8,V100M32,32,96000,786432\n",
      "n.csv", 12);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].gpu_mem_bytes, 12 * kGiB);
  EXPECT_EQ((*nodes)[0].cpu_milli, 64000);
  EXPECT_EQ((*nodes)[0].host_mem_bytes, 262144 * kMiB);
  EXPECT_EQ((*nodes)[1].gpu_mem_bytes, 32 * kGiB);
  EXPECT_EQ((*nodes)[1].gpus, 8);
}

TEST(ParseNodesCsv, BadInput) {
  auto bad = [](const char* text) { return ParseNodesCsv(text, "n.csv").status().message(); };
  EXPECT_THAT(bad("node_id,gpus\na,x\n"), HasSubstr("n.csv:2: gpus: 'x'"));
  EXPECT_THAT(bad("node_id,gpus,cpu_milli\na,1,-5\n"), HasSubstr("n.csv:2: cpu_milli: '-5'"));
  EXPECT_THAT(bad("node_id,gpus\na,1\na,2\n"), HasSubstr("node 'a' appears more than once"));
  EXPECT_THAT(bad("node_id,gpus\n"), HasSubstr("no nodes"));
  EXPECT_THAT(bad("name,gpus\na,1\n"), HasSubstr("no column 'node_id'"));
}

TEST(ParseNodesJson, CountExpandsIntoNamedNodes) {
  Result<std::vector<NodeSpec>> nodes = ParseNodesJson(
      R"({"nodes":[{"name":"big","gpus":8,"gpu_mem_gib":80,"cpu_milli":96000,"count":2},)"
      R"({"name":"small","gpus":1}]})",
      "n.json");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].name, "big-0");
  EXPECT_EQ((*nodes)[1].name, "big-1");
  EXPECT_EQ((*nodes)[1].gpu_mem_bytes, 80 * kGiB);
  EXPECT_EQ((*nodes)[2].name, "small");
  EXPECT_EQ((*nodes)[2].gpu_mem_bytes, 16 * kGiB);
  EXPECT_EQ((*nodes)[2].cpu_milli, 0);
}

TEST(ParseNodesJson, BadInputNamesTheEntry) {
  for (const char* text :
       {"{", "[]", R"({"nodes":{}})", R"({"nodes":[{"gpus":1}]})",
        R"({"nodes":[{"name":"a","gpus":-1}]})", R"({"nodes":[{"name":"a","gpus":1,"count":0}]})",
        R"({"nodes":[{"name":"a","gpus":1,"gpu_mem_gib":"x"}]})"}) {
    Result<std::vector<NodeSpec>> nodes = ParseNodesJson(text, "n.json");
    ASSERT_FALSE(nodes.ok()) << text;
    EXPECT_THAT(nodes.status().message(), HasSubstr("n.json"));
    EXPECT_THAT(nodes.status().message(), HasSubstr("expected"));
  }
}

TEST(ParseNodesShorthand, GroupsAndMemory) {
  Result<std::vector<NodeSpec>> nodes = ParseNodesShorthand("2x8:32GiB+1x4");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].gpus, 8);
  EXPECT_EQ((*nodes)[0].gpu_mem_bytes, 32 * kGiB);
  EXPECT_EQ((*nodes)[2].gpus, 4);
  EXPECT_EQ((*nodes)[2].gpu_mem_bytes, 16 * kGiB);
  EXPECT_EQ((*nodes)[2].name, "n2");
  for (const char* bad : {"8x", "x8", "0x8", "8x8:", "8x8:-1GiB", "8x8+", "8y8"}) {
    Result<std::vector<NodeSpec>> r = ParseNodesShorthand(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--nodes"));
    EXPECT_THAT(r.status().message(), HasSubstr("8x8:32GiB"));
  }
  EXPECT_TRUE(LooksLikeShorthand("8x8:32GiB"));
  EXPECT_FALSE(LooksLikeShorthand("nodes.csv"));
}

TEST(ParseSeeds, RangesAndLists) {
  EXPECT_EQ(*ParseSeeds("42-45"), (std::vector<uint64_t>{42, 43, 44, 45}));
  EXPECT_EQ(*ParseSeeds("1,5,9"), (std::vector<uint64_t>{1, 5, 9}));
  EXPECT_EQ(*ParseSeeds("7"), (std::vector<uint64_t>{7}));
  for (const char* bad : {"", "a", "5-3", "1,,2", "-1"}) {
    Result<std::vector<uint64_t>> r = ParseSeeds(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--seeds"));
  }
}

}  // namespace
}  // namespace trainq::sim
