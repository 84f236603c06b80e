#include "src/core/workload_mix.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace trainq {

std::vector<WorkloadClass> WorkloadMix(std::span<const RequestShape> requests) {
  // Host memory is left out as the FGD reference does: keying on it splits the classes
  // finely and measured slightly worse.
  std::map<std::tuple<int, int, int64_t>, double> counts;
  for (const RequestShape& r : requests) {
    if (r.gpus > 0) counts[{r.gpus, r.gpu_milli, r.cpus}] += 1.0;
  }
  std::vector<WorkloadClass> mix;
  for (const auto& [key, n] : counts) {
    auto [gpus, milli, cpus] = key;
    double share = milli / 1000.0;
    mix.push_back({gpus, share, n * (1.0 + gpus * share), cpus, 0});
  }
  return mix;
}

RequestShape ShapeOfRequest(const PendingJob& job, uint64_t gpu_total_bytes) {
  RequestShape shape{job.gpus, 1000, job.cpus};
  if (job.exclusive() || gpu_total_bytes == 0) return shape;
  double milli = job.mem_bytes ? std::ceil(1000.0 * static_cast<double>(*job.mem_bytes) /
                                           static_cast<double>(gpu_total_bytes))
                               : std::round(*job.mem_percent * 10.0);
  if (std::isnan(milli)) return shape;
  shape.gpu_milli = static_cast<int>(std::clamp(milli, 1.0, 1000.0));
  return shape;
}

void RecentRequests::Add(const PendingJob& job) {
  if (capacity_ == 0 || job.gpus <= 0) return;
  if (jobs_.size() == capacity_) jobs_.pop_front();
  jobs_.push_back(job);
}

std::vector<WorkloadClass> RecentRequests::Mix(uint64_t gpu_total_bytes) const {
  std::vector<RequestShape> shapes;
  shapes.reserve(jobs_.size());
  for (const PendingJob& job : jobs_) shapes.push_back(ShapeOfRequest(job, gpu_total_bytes));
  return WorkloadMix(shapes);
}

}  // namespace trainq
