// GPU fragmentation of one node measured against the requests expected to arrive, after
// "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient
// Descent" (Weng et al., USENIX ATC'23). Pure arithmetic, no I/O.
//
// For one class of request m, a node's fragment is the free GPU capacity that m cannot use:
// all of it when m does not fit the node at all (too few CPUs, host memory or GPUs that can
// take it), otherwise the free part of each GPU that cannot take m (less free than m's
// fraction; for whole-GPU classes any GPU someone uses). The node's fragmentation is the
// weighted mean over the classes, in GPUs. Placing a job where it raises fragmentation the
// least (FGD) keeps the cluster able to take the requests that will come.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace trainq {

// One kind of request in the expected mix.
struct WorkloadClass {
  int gpus = 1;
  double fraction = 1.0;  // of one GPU's memory, per GPU; 1.0 for whole GPUs
  double weight = 1.0;    // how often it arrives, relative to the others
  int64_t cpus = 0;       // host CPU slots (or millicores: the node's unit) it needs
  uint64_t host_mem_bytes = 0;
};

struct FragGpu {
  double free = 1.0;       // fraction of the GPU still usable, 0..1
  bool whole_free = true;  // nobody uses it: a whole-GPU request may take it
};

struct FragHost {
  int64_t cpu_free = 0;
  uint64_t mem_free = 0;
  bool mem_enforced = false;
};

// Whether one GPU can take a request of `c` (per GPU).
bool GpuTakes(const FragGpu& gpu, const WorkloadClass& c);

// The node's fragmentation against `workload`, in GPUs (weights are normalised).
double NodeFragmentation(std::span<const FragGpu> gpus, const FragHost& host,
                         std::span<const WorkloadClass> workload);

// One node prepared for many "what if this job went there" questions: Prepare is
// O(classes x GPUs), each After O(classes x changed GPUs). Buffers are reused between
// nodes so a scan over a large cluster allocates nothing per node.
class FragmentationModel {
 public:
  explicit FragmentationModel(std::span<const WorkloadClass> workload);

  void Prepare(std::span<const FragGpu> gpus, const FragHost& host);
  double Before() const { return before_; }
  // Fragmentation after the GPUs at `positions` become `after` (one entry each) and the
  // host gives `cpus` and `mem` to the job.
  double After(std::span<const size_t> positions, std::span<const FragGpu> after, int64_t cpus,
               uint64_t mem) const;
  // Free GPU capacity of the prepared node, in GPUs.
  double FreeTotal() const { return free_total_; }

 private:
  bool HostFits(const WorkloadClass& c, int64_t cpu_free, uint64_t mem_free) const;

  std::span<const WorkloadClass> workload_;
  double weight_sum_ = 0;
  std::vector<FragGpu> gpus_;
  FragHost host_;
  std::vector<double> blocked_;  // per class: free capacity on GPUs that cannot take it
  std::vector<int> takers_;      // per class: GPUs that can take it
  double free_total_ = 0;
  double before_ = 0;
};

}  // namespace trainq
