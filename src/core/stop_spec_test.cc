#include "src/core/stop_spec.h"

#include <csignal>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/core/json_codec.h"
#include "src/core/sbatch.h"
#include "src/core/spec.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

TEST(ParseSignalOptionTest, ReadsSlurmsForms) {
  struct Case {
    const char* text;
    int signal;
    int64_t lead_ms;
    bool batch_only;
  } cases[] = {
      {"USR1", SIGUSR1, 60000, false},
      {"SIGUSR1@90", SIGUSR1, 90000, false},
      {"B:USR1@60", SIGUSR1, 60000, true},
      {"b:term", SIGTERM, 60000, true},
      {"10@0", 10, 0, false},
      {"TERM@65535", SIGTERM, 65535000, false},
      {"sigint@5", SIGINT, 5000, false},
      {"B:2", 2, 60000, true},
  };
  for (const Case& c : cases) {
    Result<SignalOption> got = ParseSignalOption(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().message();
    EXPECT_EQ(got->signal, c.signal) << c.text;
    EXPECT_EQ(got->lead_ms, c.lead_ms) << c.text;
    EXPECT_EQ(got->batch_only, c.batch_only) << c.text;
  }
}

TEST(ParseSignalOptionTest, RefusesNamingTheFieldTheTextAndTheForm) {
  for (const char* bad : {"", "B:", "USR3", "USR1@", "USR1@-1", "USR1@65536", "USR1@1m", "0", "32",
                          "KILL", "SIGSTOP@10", "9", "R:USR1@60", "USR1@60@1", "@60"}) {
    Result<SignalOption> got = ParseSignalOption(bad, "#SBATCH --signal");
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), Code::kInvalid);
    EXPECT_THAT(got.status().message(), HasSubstr("#SBATCH --signal: '"));
    EXPECT_THAT(got.status().message(), HasSubstr("[B:]SIG[@SECONDS]"));
  }
  EXPECT_THAT(ParseSignalOption("KILL").status().message(), HasSubstr("no program can catch"));
}

TEST(StopSpecTest, TextFormsRoundTrip) {
  StopSpec stop;
  EXPECT_EQ(StopToText(stop), "");
  StopSpec back;
  back.requeue = true;
  ASSERT_TRUE(StopFromText("", back).ok());
  EXPECT_EQ(back, StopSpec{});
  stop = {SIGUSR1, 90000, true, true, true, "ckpt/*.pt"};
  ASSERT_TRUE(StopFromText(StopToText(stop), back).ok());
  EXPECT_EQ(back, stop);
  EXPECT_EQ(FormatSignalOption(stop), "B:USR1@90");
  EXPECT_EQ(StopFromText("{\"signal\": \"x\"}", back).code(), Code::kInternal);
}

TEST(StopSpecTest, CheckpointGlobsStayInTheJobsDirectory) {
  EXPECT_EQ(CheckpointGlobProblem("checkpoints/*.ckpt"), "");
  EXPECT_EQ(CheckpointGlobProblem("last.pt"), "");
  EXPECT_THAT(CheckpointGlobProblem("/tmp/*.pt"), HasSubstr("is absolute"));
  EXPECT_THAT(CheckpointGlobProblem("../x/*.pt"), HasSubstr("leaves the job's directory"));
  EXPECT_THAT(CheckpointGlobProblem("a/../../b"), HasSubstr("leaves the job's directory"));
  EXPECT_THAT(CheckpointGlobProblem(""), HasSubstr("is empty"));
}

TEST(StopSpecTest, TheApiTakesAndShowsTheFields) {
  nlohmann::json body = {{"command", {"true"}}, {"cwd", "/"},          {"signal", "B:USR1@45"},
                         {"requeue", true},     {"preemptible", true}, {"checkpoint", "ckpt/*.pt"}};
  Result<JobSpec> spec = SpecFromJson(body);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->stop, (StopSpec{SIGUSR1, 45000, true, true, true, "ckpt/*.pt"}));
  nlohmann::json again = SpecToJson(*spec);
  EXPECT_EQ(again["signal"], "B:USR1@45");
  Job job;
  job.spec = *spec;
  nlohmann::json shown = JobToJson(job);
  EXPECT_EQ(shown["signal"], "B:USR1@45");
  EXPECT_EQ(shown["requeue"], true);
  EXPECT_EQ(shown["preemptible"], true);
  EXPECT_EQ(shown["checkpoint"], "ckpt/*.pt");

  body["signal"] = "USR9";
  body["requeue"] = "yes";
  Result<JobSpec> bad = SpecFromJson(body);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--signal: 'USR9' is not a signal"));
  EXPECT_THAT(bad.status().message(), HasSubstr("requeue: expected true or false"));

  JobSpec outside;
  outside.command = {"true"};
  outside.cwd = "/";
  outside.stop.checkpoint = "../elsewhere/*.pt";
  EXPECT_THAT(ToStatus(ValidateSpec(outside, {}, CwdKind::kDirectory)).message(),
              HasSubstr("--checkpoint: '../elsewhere/*.pt' leaves"));
}

TEST(StopSpecTest, SbatchHonoursSignalAndRequeue) {
  SbatchOptions o;
  Status st = ReadSbatchScript(
      "#!/bin/bash\n#SBATCH --signal=B:USR1@60\n#SBATCH --requeue\n#SBATCH -J x\necho hi\n", o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(o.signal, "B:USR1@60");
  EXPECT_EQ(o.requeue, true);
  EXPECT_EQ(o.job_name, "x");
  EXPECT_TRUE(o.warnings.empty()) << o.warnings.front();
  ASSERT_TRUE(ApplySbatchOptions({"--no-requeue"}, "the command line", o).ok());
  EXPECT_EQ(o.requeue, false);
  Status bad = ApplySbatchOptions({"--signal=B:USR9@60"}, "#SBATCH line 2", o);
  EXPECT_EQ(bad.code(), Code::kInvalid);
  EXPECT_THAT(bad.message(), HasSubstr("#SBATCH line 2: --signal 'B:USR9@60' cannot be read"));
}

}  // namespace
}  // namespace trainq
