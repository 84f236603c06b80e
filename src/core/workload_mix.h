// The mix of requests that fragmentation-aware placement expects (src/core/fragmentation.h),
// learned from requests seen: the simulator counts a whole trace, the daemon its last
// submits (`workload_window`). One weighting serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "src/core/fragmentation.h"
#include "src/core/placement.h"

namespace trainq {

// One request as the mix counts it.
struct RequestShape {
  int gpus = 1;
  int gpu_milli = 1000;  // share of each GPU, in thousandths; 1000: whole GPUs
  int64_t cpus = 0;      // in the nodes' CPU unit (slots in the daemon, millicores in traces)
};

// One class per (GPUs, share, CPU), weighted by how many requests ask for it times (1 + the
// GPUs each takes): a lost 8-GPU request costs more than a lost 0.1-GPU one (+0.3 pp
// allocated on the openb trace). Requests for no GPU are left out. Classes come in (GPUs, share,
// CPU) order.
std::vector<WorkloadClass> WorkloadMix(std::span<const RequestShape> requests);

// A waiting job's shape on GPUs of `gpu_total_bytes`: exclusive jobs take whole GPUs; a
// percentage is its thousandths; bytes are the share of that GPU, rounded up, within 1..1000.
RequestShape ShapeOfRequest(const PendingJob& job, uint64_t gpu_total_bytes);

// The last `capacity` GPU requests added, the oldest dropped first. Capacity 0 keeps none.
class RecentRequests {
 public:
  explicit RecentRequests(size_t capacity = 0) : capacity_(capacity) {}

  void Add(const PendingJob& job);  // a job asking for no GPU is not kept
  size_t size() const { return jobs_.size(); }
  // The mix on GPUs of `gpu_total_bytes`; empty when none was kept.
  std::vector<WorkloadClass> Mix(uint64_t gpu_total_bytes) const;

 private:
  size_t capacity_;
  std::deque<PendingJob> jobs_;
};

}  // namespace trainq
