// The placement policy (DESIGN.md section 3): a pure function from the waiting jobs, the
// nodes' GPUs and what trainq already holds on them, to decisions. No I/O, no clock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainq/job.h"

namespace trainq {

// A trainq attempt holding memory on one GPU.
struct Holding {
  JobId job = 0;
  uint64_t reserved_bytes = 0;
  std::optional<uint64_t> used_now;  // what its processes hold now; nullopt: unknown
  bool exclusive = false;
  UnixMs started_at = 0;
};

struct GpuState {
  int index = 0;
  std::string uuid;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;       // as the probe measured it
  int foreign_processes = 0;     // compute processes that are not trainq attempts'
  std::vector<Holding> holdings;
};

struct NodeState {
  std::string name;
  std::vector<GpuState> gpus;
  int cpu_slots = 0;
  int cpu_slots_used = 0;
  uint64_t host_mem_bytes = 0;  // 0: host memory is not enforced
  uint64_t host_mem_used = 0;
  // topology[i][j]: how far apart gpus[i] and gpus[j] are, as NVML's common-ancestor
  // level (0 same board, 10 one PCIe switch, 20 several switches, 30 host bridge,
  // 40 same NUMA node, 50 across sockets). Empty: unknown, every pair counts as equal.
  std::vector<std::vector<int>> topology;
};

struct PendingJob {
  JobId id = 0;
  int gpus = 1;
  std::optional<uint64_t> mem_bytes;
  std::optional<double> mem_percent;
  int cpus = 1;
  int priority = 0;
  UnixMs submitted_at = 0;
  UnixMs not_before = 0;  // OOM backoff
  std::string user;       // fair share is between users
  uint64_t host_mem_bytes = 0;

  bool exclusive() const { return gpus > 0 && !mem_bytes && !mem_percent; }
};

struct PolicyConfig {
  uint64_t headroom_bytes = 256ull << 20;
  // Where per-process figures are unknown, a reservation counts in full this long after
  // its attempt started, then the probe's free memory is trusted.
  int64_t ramp_up_ms = 60000;
  // Limits an operator changes at run time (`trainq config set`).
  std::vector<int> devices;   // GPU indices jobs may use; empty: all
  int max_jobs_per_gpu = 0;   // trainq attempts on one GPU; 0: no limit
  // A job that has waited this long gets the GPUs it would best use held for it.
  int64_t aging_ms = 2 * 3600 * 1000;
  // Fragmentation-aware GPU choice: the mix of requests expected to arrive. Empty: the
  // plain rule (unused GPUs first, then best fit).
  struct WorkloadClass {
    int gpus = 1;
    double fraction = 1.0;  // of one GPU's memory; 1.0 for whole GPUs
    double weight = 1.0;    // how often it arrives, relative to the others
  };
  std::vector<WorkloadClass> workload;
};

// GPUs held for a job that has waited past the aging limit: no other job starts there.
struct Hold {
  JobId job = 0;
  std::string node;
  std::vector<int> gpu_indices;
};

// Decayed GPU-hours per user (src/core/fair_share.h); the user holding fewer goes first.
using UsageByUser = std::map<std::string, double>;

struct StartDecision {
  JobId job = 0;
  std::string node;
  std::vector<int> gpu_indices;
  uint64_t reserved_bytes = 0;  // per GPU; the GPU's total for exclusive jobs
  int cpus = 0;
};

struct PlacementResult {
  std::vector<StartDecision> starts;
  // A reason for every job given that is not started, e.g.
  // "needs 1 GPU with 20.0 GiB usable; best: GPU 1 with 11.2 GiB".
  std::vector<std::pair<JobId, std::string>> reasons;
  // Holds in force after this pass; the caller hands them back to the next pass so a
  // hold stays on the same GPUs while it still fits there.
  std::vector<Hold> holds;
};

// usable = free - sum over holdings of max(0, reserved - used_now) - headroom, floored at 0.
uint64_t UsableBytes(const GpuState& gpu, const PolicyConfig& config, UnixMs now);

// The bytes `job` needs on `gpu` (its percent of the total, or its bytes).
uint64_t NeededBytes(const PendingJob& job, const GpuState& gpu);

// Places `jobs` in order: priority (higher first), then submit order; a later job may
// start where an earlier one does not fit (backfill). Decisions already taken in this pass
// count against the GPUs for later jobs. Exclusive jobs take only GPUs with no holding and
// no foreign process; no job joins a GPU held exclusively. Multi-GPU jobs take GPUs of one
// node. Among GPUs that fit, those no job uses come first, then best fit.
PlacementResult Place(std::span<const PendingJob> jobs, std::span<const NodeState> nodes,
                      const PolicyConfig& config, UnixMs now, const UsageByUser& usage = {},
                      std::span<const Hold> previous_holds = {});

// The most GPUs any node offers; a job asking more can never run ("--gpus 9999").
int MaxGpusPerNode(std::span<const NodeState> nodes);

}  // namespace trainq
