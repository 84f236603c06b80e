#include "src/core/job_update.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/core/json_codec.h"

namespace trainq {

using json = nlohmann::json;

namespace {

constexpr const char* kChangeable[] = {"name", "priority", "gpus",      "mem",      "cpus",
                                       "time", "after",    "after_any", "gpu_type", "constraints"};

bool Changeable(const std::string& key) {
  for (const char* k : kChangeable) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace

Result<JobUpdate> ReadJobUpdate(const Job& job, const std::string& body) {
  json doc = json::parse(body.empty() ? "{}" : body, nullptr, false);
  if (!doc.is_object()) {
    return Status::Invalid(
        "expected a JSON object of what changes, e.g. {\"priority\": 5, \"mem\": \"20GiB\"}");
  }
  JobUpdate out;
  out.running = job.state == JobState::kStarting || job.state == JobState::kRunning;
  bool waiting = job.state == JobState::kQueued || job.state == JobState::kBlocked;
  if (!waiting && !out.running) {
    return Status::Conflict(fmt::format("job {} already ended ({}); nothing of it changes now",
                                        job.id, StateName(job.state)));
  }
  json merged = SpecToJson(job.spec);
  std::vector<std::string> errors;
  for (const auto& [key, value] : doc.items()) {
    if (key == "hold") {
      if (!value.is_boolean()) {
        errors.push_back("hold: expected true (hold) or false (release)");
      } else if (out.running) {
        errors.push_back(fmt::format("hold: job {} is {}; only a waiting job is held", job.id,
                                     StateName(job.state)));
      } else {
        out.hold = value.get<bool>();
      }
      continue;
    }
    if (!Changeable(key)) {
      errors.push_back(fmt::format(
          "{}: cannot change after submit; expected name, priority, gpus, mem, cpus, time, "
          "after, after_any, gpu_type, constraints or hold (cancel the job and submit it again for "
          "the rest)",
          key));
      continue;
    }
    if (out.running && key != "name" && key != "priority") {
      errors.push_back(fmt::format(
          "{}: job {} is {}: what it holds is fixed while it runs; only name and priority "
          "change (cancel and retry it to change the rest)",
          key, job.id, StateName(job.state)));
      continue;
    }
    merged[key] = value;
  }
  Result<JobSpec> spec = SpecFromJson(merged);
  if (!spec.ok()) errors.push_back(spec.status().message());
  if (!errors.empty()) {
    return Status::Invalid(fmt::format("{}", fmt::join(errors, "; ")));
  }
  // What SpecFromJson never reads back: who submitted it and the cluster's signature.
  spec->user = job.spec.user;
  spec->submit_key = job.spec.submit_key;
  spec->signed_by = job.spec.signed_by;
  spec->signature = job.spec.signature;
  spec->gate_pid = job.spec.gate_pid;
  spec->gate_ticks = job.spec.gate_ticks;
  out.deps_changed = spec->after != job.spec.after || spec->after_any != job.spec.after_any;
  for (JobId dep : spec->after) {
    if (dep >= job.id) {
      return Status::Invalid(fmt::format(
          "after: job {} came after job {}; a job waits only for jobs submitted before it", dep,
          job.id));
    }
  }
  for (JobId dep : spec->after_any) {
    if (dep >= job.id) {
      return Status::Invalid(fmt::format(
          "after_any: job {} came after job {}; a job waits only for jobs submitted before it", dep,
          job.id));
    }
  }
  out.spec = std::move(*spec);
  return out;
}

}  // namespace trainq
