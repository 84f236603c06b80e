// The simulated nodes in the shape the placement policy reads (src/core/placement.h),
// changed in place as jobs start and end: no copy of the cluster per decision.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/core/placement.h"
#include "src/sim/inputs.h"

namespace trainq::sim {

// Free memory is reported this much above the GPU's size so that shares summing to exactly
// one GPU (0.46 + 0.54) fit although each is rounded up to a whole byte.
inline constexpr uint64_t kRoundingSlackBytes = 64 << 10;
// CPU slots of a node whose CPU is not enforced.
inline constexpr int kUnlimitedCpu = 1 << 30;

// The policy's view of one trace job: whole exclusive GPUs, or a share (`gpu_milli` / 10 %
// of the GPU's memory, or the trace's GPU memory), CPU in millicores, host memory in bytes.
PendingJob ToPending(const TraceJob& job, JobId id);

class Cluster {
 public:
  explicit Cluster(std::span<const NodeSpec> specs);

  std::span<const NodeState> nodes() const { return nodes_; }
  const NodeSpec& spec(size_t node) const { return specs_[node]; }
  size_t size() const { return nodes_.size(); }
  int total_gpus() const { return total_gpus_; }
  int max_gpus_per_node() const { return max_gpus_; }
  // Position of the node named `name`, or size() when there is none.
  size_t Find(std::string_view name) const;

  // Bytes the job holds on each of its GPUs of `node`: the whole GPU when exclusive.
  uint64_t ReservedBytes(const PendingJob& job, size_t node) const;
  // Records the job on GPUs `gpu_pos` (positions in the node) of `node`, its CPU and
  // host memory there, and in the node's use_by_user (a gang job counts on each of its nodes).
  void Start(const PendingJob& job, size_t node, std::span<const int> gpu_pos);
  void Finish(const PendingJob& job, size_t node, std::span<const int> gpu_pos);

  // No job on any GPU of the node and no CPU or host memory taken.
  bool Idle(size_t node) const;
  // Whether the job fits an empty node of this cluster (the largest of each resource).
  bool FitsEmpty(const PendingJob& job) const;
  // GPU, CPU and host memory left on a node (unenforced CPU/memory count as plenty).
  bool HostFits(const PendingJob& job, size_t node) const;
  uint64_t HeldBytes(size_t node, int gpu_pos) const;

 private:
  std::vector<NodeSpec> specs_;
  std::vector<NodeState> nodes_;
  std::unordered_map<std::string, size_t> by_name_;
  int total_gpus_ = 0;
  int max_gpus_ = 0;
};

}  // namespace trainq::sim

namespace trainq::sim {

// The trace's GPU requests as the policy's expected workload: one class per (GPUs, share,
// CPU), weighted by how many jobs ask for it times (1 + the GPUs each takes). CPU-only jobs
// are left out.
std::vector<PolicyConfig::WorkloadClass> WorkloadMix(std::span<const TraceJob> jobs);

}  // namespace trainq::sim
