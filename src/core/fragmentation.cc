#include "src/core/fragmentation.h"

namespace trainq {

namespace {

// Free fractions come from byte counts: a request of exactly the free fraction fits.
constexpr double kEps = 1e-9;

double WeightSum(std::span<const WorkloadClass> workload) {
  double sum = 0;
  for (const WorkloadClass& c : workload) sum += c.weight > 0 ? c.weight : 0;
  return sum;
}

}  // namespace

bool GpuTakes(const FragGpu& gpu, const WorkloadClass& c) {
  if (c.fraction >= 1.0) return gpu.whole_free;
  return gpu.free + kEps >= c.fraction;
}

double NodeFragmentation(std::span<const FragGpu> gpus, const FragHost& host,
                         std::span<const WorkloadClass> workload) {
  FragmentationModel model(workload);
  model.Prepare(gpus, host);
  return model.Before();
}

FragmentationModel::FragmentationModel(std::span<const WorkloadClass> workload)
    : workload_(workload),
      weight_sum_(WeightSum(workload)),
      blocked_(workload.size()),
      takers_(workload.size()) {}

bool FragmentationModel::HostFits(const WorkloadClass& c, int64_t cpu_free,
                                  uint64_t mem_free) const {
  if (c.cpus > cpu_free) return false;
  return !host_.mem_enforced || c.host_mem_bytes <= mem_free;
}

void FragmentationModel::Prepare(std::span<const FragGpu> gpus, const FragHost& host) {
  gpus_.assign(gpus.begin(), gpus.end());
  host_ = host;
  free_total_ = 0;
  for (const FragGpu& g : gpus_) free_total_ += g.free;
  before_ = 0;
  for (size_t m = 0; m < workload_.size(); ++m) {
    const WorkloadClass& c = workload_[m];
    blocked_[m] = 0;
    takers_[m] = 0;
    for (const FragGpu& g : gpus_) {
      if (GpuTakes(g, c)) {
        ++takers_[m];
      } else {
        blocked_[m] += g.free;
      }
    }
    if (c.weight <= 0) continue;
    bool fits = takers_[m] >= c.gpus && HostFits(c, host.cpu_free, host.mem_free);
    before_ += c.weight * (fits ? blocked_[m] : free_total_);
  }
  if (weight_sum_ > 0) before_ /= weight_sum_;
}

double FragmentationModel::After(std::span<const size_t> positions, std::span<const FragGpu> after,
                                 int64_t cpus, uint64_t mem) const {
  double free_total = free_total_;
  for (size_t i = 0; i < positions.size(); ++i) {
    free_total += after[i].free - gpus_[positions[i]].free;
  }
  int64_t cpu_free = host_.cpu_free - cpus;
  uint64_t mem_free = host_.mem_free > mem ? host_.mem_free - mem : 0;
  double frag = 0;
  for (size_t m = 0; m < workload_.size(); ++m) {
    const WorkloadClass& c = workload_[m];
    if (c.weight <= 0) continue;
    double blocked = blocked_[m];
    int takers = takers_[m];
    for (size_t i = 0; i < positions.size(); ++i) {
      const FragGpu& was = gpus_[positions[i]];
      bool took = GpuTakes(was, c);
      bool takes = GpuTakes(after[i], c);
      takers += (takes ? 1 : 0) - (took ? 1 : 0);
      blocked += (takes ? 0 : after[i].free) - (took ? 0 : was.free);
    }
    bool fits = takers >= c.gpus && HostFits(c, cpu_free, mem_free);
    frag += c.weight * (fits ? blocked : free_total);
  }
  return weight_sum_ > 0 ? frag / weight_sum_ : 0;
}

}  // namespace trainq
