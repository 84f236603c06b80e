// Validation of a submitted job (issue: bad input is refused naming the field, and nothing
// is stored) and the environment a job starts with.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

struct FieldError {
  std::string field;    // "--mem", "command", ...
  std::string message;  // what is wrong and the accepted form
};

constexpr size_t kMaxJobNameBytes = 200;
constexpr int kMaxRetries = 100;

struct SpecLimits {
  int max_gpus_per_node = 0;   // 0 with gpus requested: no GPUs anywhere
  int max_cpu_slots = 1;
};

// Every problem at once; empty when the spec may be stored. Checks that cwd exists (an OS
// touch kept here for one place of truth is done by the caller: pass cwd_exists).
std::vector<FieldError> ValidateSpec(const JobSpec& spec, const SpecLimits& limits,
                                     bool cwd_exists);
// One Status (kInvalid) naming each field, or Ok.
Status ToStatus(const std::vector<FieldError>& errors);

// The name a job gets when none is given: the basename of the first argument that looks
// like a script (train.py, run.sh), else of the program ("python train.py" -> "train.py").
// At most 200 bytes; "" for an empty command.
std::string DefaultJobName(const std::vector<std::string>& command);

// Parses "K=V" for --env; kInvalid naming --env when there is no '=' or K is empty.
Result<std::pair<std::string, std::string>> ParseEnvAssignment(const std::string& text);

struct AttemptEnvInput {
  JobId job = 0;
  int attempt = 0;
  std::vector<int> gpu_indices;
  std::vector<std::string> gpu_uuids;
};
// The job's environment (each name once; a later entry wins, as with repeated --env) plus,
// overriding any the job set, CUDA_VISIBLE_DEVICES (NVML indices, "" for CPU jobs),
// CUDA_DEVICE_ORDER=PCI_BUS_ID, TRAINQ_JOB_ID, TRAINQ_ATTEMPT, TRAINQ_GPUS (uuids).
std::vector<std::pair<std::string, std::string>> BuildAttemptEnv(const JobSpec& spec,
                                                                 const AttemptEnvInput& in);

}  // namespace trainq
