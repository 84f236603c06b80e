// For tests: a JobSpec whose every field differs from its default, and the names of the
// fields on which two specs differ, both by kJobFields (src/core/job_fields.h). A field added
// to the table is set here or EveryFieldIsSetByFullSpec fails.
#pragma once

#include <string>
#include <vector>

#include "src/core/job_field_text.h"

namespace trainq {

// Ids in `after`, `after_any` and `group` are the caller's (jobs the store holds).
inline JobSpec FullSpec(JobId dep_a, JobId dep_b) {
  JobSpec s;
  s.name = "full ünïcødé";
  s.command = {"python", "train.py", "--msg", "two words", "", "a\\b\tc"};
  s.cwd = "/home/al ice/proj";
  s.env = {{"PATH", "/usr/bin"}, {"EMPTY", ""}, {"UNI", "日本語"}};
  s.gpus = 2;
  s.max_gpus = 4;
  s.mem_bytes = (uint64_t{1} << 62) + 1;  // beyond double precision
  s.mem_percent = 12.5;
  s.cpus = 3;
  s.priority = -4;
  s.retries = 1;
  s.hold = true;
  s.user = "alice";
  s.after = {dep_a};
  s.after_any = {dep_b};
  s.time_limit_ms = 3'600'000;
  s.mem_limit_bytes = uint64_t{8} << 30;
  s.max_procs = 512;
  s.nodes_allowed = {"gpu1", "gpu2.lab"};
  s.nodes_excluded = {"gpu_3"};
  s.num_nodes = 2;
  s.max_nodes = 3;
  s.gpu_type = "a100";
  s.constraints = {"ib", "nvlink|pcie"};
  s.container = {.image = "docker.io/library/python:3.11",
                 .mounts = {"/data:/data:ro"},
                 .shm_bytes = uint64_t{1} << 30,
                 .workdir = "/work",
                 .archive_names = {"localhost/train:1"}};
  s.transfers = {
      {TransferKind::kStage, "/home/alice/data", "data", "ab12", "/state/m/ab12", 10, 2}};
  s.collect = {"out/*.ckpt", "logs"};
  s.collect_to = "/home/alice/results";
  s.stop = {.signal = 10,
            .lead_ms = 90'000,
            .batch_only = true,
            .requeue = true,
            .preemptible = false,
            .checkpoint = "ckpt/*.pt"};
  s.submit_key = "key-1";
  s.group = dep_a;
  s.group_limit = 4;
  s.array_index = 7;
  s.record = R"({"git":{"commit":"abc","branch":"main"},"host":"ws1","trainq_version":"1.0"})";
  s.notify_url = "https://hooks.example/x";
  s.mail = "alice@example.org";
  s.slurm_env = true;
  s.gate_pid = 4242;
  s.interactive = true;
  s.no_log = true;
  s.gate_ticks = 99;
  s.signed_by = "node1";
  s.signature = "0123abcd";
  return s;
}

// The rows of kJobFields on which a and b differ, by name.
inline std::vector<std::string> DifferingFields(const JobSpec& a, const JobSpec& b) {
  std::vector<std::string> out;
  ForEachJobField([&](const auto& field) {
    if (!(field.Of(a) == field.Of(b))) out.emplace_back(field.info.name);
  });
  return out;
}

}  // namespace trainq
