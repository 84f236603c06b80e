#include "src/core/wait_kind.h"

#include <initializer_list>

namespace trainq {

namespace {

bool Has(std::string_view text, std::initializer_list<std::string_view> words) {
  for (std::string_view w : words) {
    if (text.find(w) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

// The placement policy's reasons are sentences (placement_reasons.cc); the first kind whose
// words a reason holds is its kind, the more specific kinds first.
std::string_view WaitKind(JobState state, std::string_view reason) {
  // A held job is queued (or blocked, held before its dependencies were met).
  if (reason.starts_with("held: ") || reason.starts_with("held by ")) return "held";
  if (state == JobState::kBlocked) return "dependency";
  if (Has(reason, {"trying again every"})) return "storage";
  if (Has(reason, {"OOM", "out of memory", "backoff"})) return "oom_backoff";
  if (Has(reason, {"max_gpus_per_user", "max_jobs_per_user"})) return "user_limit";
  if (reason.starts_with("group ")) return "group_limit";
  if (Has(reason, {"paused"})) return "paused";
  if (Has(reason, {"last sampled", "gpu_stale_after"})) return "stale_gpus";
  if (Has(reason, {"lost", "drained", "not in the cluster", "no node is up"})) return "node";
  if (Has(reason, {"cannot be placed", "more GPUs than", "more memory than", "--gpu-type",
                   "--constraint", "exclude-node"})) {
    return "no_fit";
  }
  if (Has(reason, {"CPU slot"})) return "cpu_slots";
  if (reason.starts_with("will preempt ") || reason.starts_with("preempting ")) return "gpus_busy";
  // "needs 1 whole GPU (no other job or process on it); none is free; taken: GPU 0 by job 5"
  if (Has(reason, {"held for job", "exclusive", "in use", "max-jobs-per-gpu", "max_jobs_per_gpu",
                   "(no other job or process on"})) {
    return "gpus_busy";
  }
  if (Has(reason, {"usable", "memory", "GiB", "MiB"})) return "gpu_memory";
  return "other";
}

}  // namespace trainq
