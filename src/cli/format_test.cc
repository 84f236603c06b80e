// The tables and reports print what jobs carry, never what a terminal would obey.
#include "src/cli/format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/core/job_fields_test_util.h"
#include "src/core/json_codec.h"

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

// `trainq show` prints a line for each row of kJobFields that names one (src/core/job_fields.h).
TEST(FormatTest, DetailsPrintTheLineOfEveryRowThatNamesOne) {
  Job full;
  full.id = 9;
  full.spec = FullSpec(1, 2);
  full.spec.transfers[0].kind = TransferKind::kStage;
  json doc = JobToJson(full);
  Reply job(doc);
  std::string details = JobDetails(job, 0);
  ASSERT_TRUE(job.ok()) << job.status().message();
  for (const JobFieldInfo& f : JobFieldInfos()) {
    if (f.show.empty()) continue;
    EXPECT_THAT(details, HasSubstr("\n" + std::string(f.show) + ":"))
        << f.name << " has no line in\n"
        << details;
  }
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

json EndedGang() {
  json doc = HostileJob();
  doc["name"] = "mn";
  doc["state"] = "succeeded";
  doc["attempt"] = 1;
  doc["attempts"] = json::parse(R"([{"n": 1, "state": "succeeded", "node": "gpu1",
      "gpu_indices": [0, 1], "peak_mem_bytes": 2147483648, "master_port": 29500,
      "started_at": "2026-11-22T10:00:00.000Z", "ended_at": "2026-11-22T11:02:03.900Z",
      "end_reason": "exit code 0", "exit_code": 0, "log_path": "/r/1/1/output.log",
      "nodes": ["gpu1", "gpu2"],
      "parts": [{"node": "gpu1", "gpu_indices": [0, 1], "log_path": "/r/1/1/output.log"},
                {"node": "gpu2", "gpu_indices": [2, 3], "log_path": "/s/1/1/output.log"}]}])");
  return doc;
}

TEST(FormatTest, AFinishedJobShowsHowLongItRanItsGpusPeakAndNodes) {
  json doc = EndedGang();
  Reply job(doc);
  std::string table = JobsTable({job}, /*cluster=*/true, 0);
  EXPECT_THAT(table, HasSubstr("NODE"));
  EXPECT_THAT(table, HasSubstr("gpu1,gpu2"));
  EXPECT_THAT(table, HasSubstr("0,1"));
  EXPECT_THAT(table, HasSubstr("ran 1h02m, peak 2.0 GiB"));
  EXPECT_THAT(JobsTable({job}, false, 0), Not(HasSubstr("NODE")));
  std::string details = JobDetails(job, 0);
  EXPECT_THAT(details, HasSubstr("(ran 1h02m)"));
  EXPECT_THAT(details, HasSubstr("part 1: node gpu2  GPUs [2,3]  log /s/1/1/output.log"));
  EXPECT_THAT(details, HasSubstr("MASTER_PORT 29500 on node gpu1"));
  // A running attempt counts to now.
  doc["state"] = "running";
  doc["attempts"][0]["state"] = "running";
  doc["attempts"][0]["ended_at"] = nullptr;
  Reply running(doc);
  EXPECT_THAT(JobsTable({running}, false, *IsoMs("2026-11-22T10:00:45.000Z")),
              HasSubstr("running 45s, peak 2.0 GiB"));
}

TEST(FormatTest, AnSbatchJobShowsItsScriptNotItsWrapper) {
  json doc = HostileJob();
  doc["command"] = {"/bin/bash", "-c", "out=...; wrapper", "trainq-sbatch", "#!/bin/bash ..."};
  doc["record"] = {
      {"sbatch", {{"script", "/home/ada/train.sbatch"}, {"args", {"--epochs", "10"}}}}};
  std::string details = JobDetails(Reply(doc));
  EXPECT_THAT(details, HasSubstr("command:     sbatch /home/ada/train.sbatch --epochs 10\n"));
  EXPECT_THAT(details, Not(HasSubstr("wrapper")));
}

}  // namespace
}  // namespace trainq
