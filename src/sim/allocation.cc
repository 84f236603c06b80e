#include "src/sim/allocation.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/core/placement.h"
#include "src/sim/cluster.h"

namespace trainq::sim {

std::optional<AllocationPolicy> ParseAllocationPolicy(std::string_view name) {
  if (name == "trainq") return AllocationPolicy::kTrainq;
  if (name == "bestfit") return AllocationPolicy::kBestFit;
  if (name == "random") return AllocationPolicy::kRandom;
  return std::nullopt;
}

const char* AllocationPolicyName(AllocationPolicy policy) {
  switch (policy) {
    case AllocationPolicy::kTrainq:
      return "trainq";
    case AllocationPolicy::kBestFit:
      return "bestfit";
    case AllocationPolicy::kRandom:
      return "random";
  }
  return "?";
}

uint64_t UniformIndex(std::mt19937_64& rng, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // reject the uneven top to stay uniform
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

namespace {

int64_t RequestMilli(const TraceJob& pod) { return int64_t{pod.gpus} * pod.gpu_milli; }

}  // namespace

std::vector<size_t> ArrivalOrder(std::span<const TraceJob> pods, int64_t capacity_milli,
                                 double inflate, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> order(pods.size());
  int64_t total = 0;
  for (size_t i = 0; i < pods.size(); ++i) order[i] = i, total += RequestMilli(pods[i]);
  auto limit = static_cast<int64_t>(inflate * double(capacity_milli));
  bool any_gpu =
      std::any_of(pods.begin(), pods.end(), [](const TraceJob& p) { return p.gpus > 0; });
  while (any_gpu && !pods.empty()) {
    size_t k = UniformIndex(rng, pods.size());
    if (total + RequestMilli(pods[k]) > limit) break;
    total += RequestMilli(pods[k]);
    order.push_back(k);
  }
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[UniformIndex(rng, i)]);
  return order;
}

namespace {

// The protocol's own book-keeping, in thousandths of a GPU, millicores and bytes: what every
// policy's choice is checked against and what the ratio is computed from.
struct MilliNode {
  int64_t cpu_free = 0;  // meaningless when !cpu_enforced
  uint64_t mem_free = 0;
  bool cpu_enforced = false, mem_enforced = false;
  std::vector<int> gpu_free;  // per GPU, 0..1000
  int64_t gpu_free_sum = 0;
};

struct Choice {
  size_t node = 0;
  std::vector<int> gpus;
};

class Allocator {
 public:
  Allocator(std::span<const TraceJob> pods, std::span<const NodeSpec> nodes,
            const AllocationOptions& options, uint64_t seed)
      : pods_(pods), specs_(nodes), options_(options), rng_(seed ^ 0x9e3779b97f4a7c15ull) {
    for (const NodeSpec& s : nodes) {
      MilliNode n;
      n.cpu_enforced = s.cpu_milli > 0;
      n.cpu_free = s.cpu_milli;
      n.mem_enforced = s.host_mem_bytes > 0;
      n.mem_free = s.host_mem_bytes;
      n.gpu_free.assign(size_t(s.gpus), 1000);
      n.gpu_free_sum = int64_t{s.gpus} * 1000;
      capacity_ += n.gpu_free_sum;
      milli_.push_back(std::move(n));
    }
    if (options.policy == AllocationPolicy::kTrainq) {
      cluster_.emplace(nodes);
      config_.headroom_bytes = 0;
      config_.workload = WorkloadMix(pods);
    }
  }

  int64_t capacity() const { return capacity_; }

  SeedRun Run(uint64_t seed) {
    SeedRun run;
    run.seed = seed;
    std::vector<size_t> order = ArrivalOrder(pods_, capacity_, options_.inflate, seed);
    int64_t arrived = 0, used = 0;
    size_t level = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const TraceJob& pod = pods_[order[k]];
      arrived += RequestMilli(pod);
      if (PlaceOne(pod, JobId(k + 1), run)) used += RequestMilli(pod);
      for (; level < kLevels.size() && arrived * 100 >= int64_t{kLevels[level]} * capacity_;
           ++level) {
        run.ratio[level] = Ratio(used);
      }
    }
    for (; level < kLevels.size(); ++level) run.ratio[level] = Ratio(used);
    run.pods = int(order.size());
    return run;
  }

 private:
  double Ratio(int64_t used) const {
    return capacity_ > 0 ? 100.0 * double(used) / double(capacity_) : 0;
  }

  bool PlaceOne(const TraceJob& pod, JobId id, SeedRun& run) {
    std::optional<Choice> c;
    switch (options_.policy) {
      case AllocationPolicy::kTrainq:
        c = TrainqChoice(pod, id);
        break;
      case AllocationPolicy::kBestFit:
        c = BestFitChoice(pod);
        break;
      case AllocationPolicy::kRandom:
        c = RandomChoice(pod);
        break;
    }
    if (c && !Valid(pod, *c)) {
      ++run.invalid;
      c.reset();
    }
    if (!c) {
      ++run.failed;
      return false;
    }
    Apply(pod, id, *c);
    return true;
  }

  bool HostFits(const TraceJob& pod, const MilliNode& n) const {
    if (n.cpu_enforced && pod.cpu_milli.value_or(0) > n.cpu_free) return false;
    return !n.mem_enforced || pod.host_mem_bytes.value_or(0) <= n.mem_free;
  }

  bool Fits(const TraceJob& pod, const MilliNode& n) const {
    if (!HostFits(pod, n)) return false;
    if (pod.gpus == 0) return true;
    if (pod.gpu_milli < 1000) {
      return std::any_of(n.gpu_free.begin(), n.gpu_free.end(),
                         [&](int f) { return f >= pod.gpu_milli; });
    }
    return std::count(n.gpu_free.begin(), n.gpu_free.end(), 1000) >= pod.gpus;
  }

  bool Valid(const TraceJob& pod, const Choice& c) const {
    if (c.node >= milli_.size() || int(c.gpus.size()) != pod.gpus) return false;
    const MilliNode& n = milli_[c.node];
    if (!HostFits(pod, n)) return false;
    std::vector<int> seen;
    for (int g : c.gpus) {
      if (g < 0 || size_t(g) >= n.gpu_free.size() || n.gpu_free[size_t(g)] < pod.gpu_milli)
        return false;
      if (std::count(seen.begin(), seen.end(), g)) return false;
      seen.push_back(g);
    }
    return true;
  }

  void Apply(const TraceJob& pod, JobId id, const Choice& c) {
    MilliNode& n = milli_[c.node];
    n.cpu_free -= pod.cpu_milli.value_or(0);
    n.mem_free -= n.mem_enforced ? pod.host_mem_bytes.value_or(0) : 0;
    for (int g : c.gpus) n.gpu_free[size_t(g)] -= pod.gpu_milli;
    n.gpu_free_sum -= RequestMilli(pod);
    if (cluster_) cluster_->Start(ToPending(pod, id), c.node, c.gpus);
  }

  // ---- trainq: the policy itself, one pod at a time, on the nodes as they stand. ----

  std::optional<Choice> TrainqChoice(const TraceJob& pod, JobId id) {
    PendingJob job = ToPending(pod, id);
    PlacementResult r = Place(std::span(&job, 1), cluster_->nodes(), config_, 0);
    if (r.starts.empty()) return std::nullopt;
    return Choice{cluster_->Find(r.starts.front().node), r.starts.front().gpu_indices};
  }

  // ---- BestFit: the reference score, best-fit GPU inside the node. ----

  static int BestFitScore(const TraceJob& pod, const MilliNode& n) {
    double cpu_left = n.cpu_enforced ? double(n.cpu_free - pod.cpu_milli.value_or(0)) : 0.0;
    double gpu_left = double(n.gpu_free_sum - RequestMilli(pod));
    return static_cast<int>(100.0 * (1.0 - 0.5 * cpu_left / 128000.0 - 0.5 * gpu_left / 8000.0));
  }

  std::optional<Choice> BestFitChoice(const TraceJob& pod) {
    std::optional<size_t> best;
    int best_score = 0;
    uint64_t ties = 0;
    for (size_t i = 0; i < milli_.size(); ++i) {
      if (!Fits(pod, milli_[i])) continue;
      int score = BestFitScore(pod, milli_[i]);
      if (!best || score > best_score) {
        best = i, best_score = score, ties = 1;
      } else if (score == best_score && UniformIndex(rng_, ++ties) == 0) {
        best = i;  // reservoir sampling: each of the tied nodes equally likely
      }
    }
    if (!best) return std::nullopt;
    return Choice{*best, BestFitGpus(pod, milli_[*best])};
  }

  static std::vector<int> BestFitGpus(const TraceJob& pod, const MilliNode& n) {
    std::vector<int> gpus;
    if (pod.gpus == 0) return gpus;
    if (pod.gpu_milli < 1000) {
      int best = -1;
      for (size_t g = 0; g < n.gpu_free.size(); ++g) {
        int f = n.gpu_free[g];
        if (f >= pod.gpu_milli && (best < 0 || f < n.gpu_free[size_t(best)])) best = int(g);
      }
      return {best};
    }
    for (size_t g = 0; g < n.gpu_free.size() && int(gpus.size()) < pod.gpus; ++g) {
      if (n.gpu_free[g] == 1000) gpus.push_back(int(g));
    }
    return gpus;
  }

  // ---- Random: any node that fits, any GPUs there that fit. ----

  std::optional<Choice> RandomChoice(const TraceJob& pod) {
    std::optional<size_t> pick;
    uint64_t seen = 0;
    for (size_t i = 0; i < milli_.size(); ++i) {
      if (Fits(pod, milli_[i]) && UniformIndex(rng_, ++seen) == 0) pick = i;
    }
    if (!pick) return std::nullopt;
    const MilliNode& n = milli_[*pick];
    std::vector<int> fitting;
    for (size_t g = 0; g < n.gpu_free.size(); ++g) {
      if (n.gpu_free[g] >= (pod.gpu_milli < 1000 ? pod.gpu_milli : 1000)) fitting.push_back(int(g));
    }
    for (size_t k = 0; k < size_t(pod.gpus); ++k) {  // a random subset: partial Fisher-Yates
      std::swap(fitting[k], fitting[k + UniformIndex(rng_, fitting.size() - k)]);
    }
    fitting.resize(size_t(pod.gpus));
    return Choice{*pick, std::move(fitting)};
  }

  std::span<const TraceJob> pods_;
  std::span<const NodeSpec> specs_;
  const AllocationOptions& options_;
  std::mt19937_64 rng_;  // tie-breaks and random choices; the arrival order has its own
  std::vector<MilliNode> milli_;
  int64_t capacity_ = 0;
  std::optional<Cluster> cluster_;  // the policy's view, for trainq only
  PolicyConfig config_;
};

}  // namespace

AllocationReport RunAllocation(std::span<const TraceJob> pods, std::span<const NodeSpec> nodes,
                               const AllocationOptions& options) {
  AllocationReport report;
  for (uint64_t seed : options.seeds) {
    report.per_seed.push_back(Allocator(pods, nodes, options, seed).Run(seed));
  }
  size_t n = report.per_seed.size();
  for (size_t l = 0; l < kLevels.size() && n > 0; ++l) {
    double sum = 0, sq = 0;
    for (const SeedRun& r : report.per_seed) sum += r.ratio[l];
    report.mean[l] = sum / double(n);
    for (const SeedRun& r : report.per_seed)
      sq += (r.ratio[l] - report.mean[l]) * (r.ratio[l] - report.mean[l]);
    report.stddev[l] = std::sqrt(sq / double(n));
  }
  return report;
}

namespace {

nlohmann::ordered_json LevelObject(const std::array<double, kLevels.size()>& values) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (size_t l = 0; l < kLevels.size(); ++l) {
    j[std::to_string(kLevels[l])] = std::round(values[l] * 100.0) / 100.0;
  }
  return j;
}

}  // namespace

std::string AllocationJson(const AllocationReport& report, const AllocationOptions& options) {
  nlohmann::ordered_json j;
  j["allocation_ratio"] = LevelObject(report.mean);
  j["std"] = LevelObject(report.stddev);
  j["policy"] = AllocationPolicyName(options.policy);
  j["inflate"] = options.inflate;
  j["seeds"] = options.seeds;
  nlohmann::ordered_json per_seed = nlohmann::ordered_json::array();
  double failed = 0, invalid = 0;
  for (const SeedRun& r : report.per_seed) {
    per_seed.push_back({{"seed", r.seed},
                        {"pods", r.pods},
                        {"failed_pods", r.failed},
                        {"invalid_choices", r.invalid},
                        {"allocation_ratio", LevelObject(r.ratio)}});
    failed += r.failed;
    invalid += r.invalid;
  }
  double n = report.per_seed.empty() ? 1.0 : double(report.per_seed.size());
  j["per_seed"] = per_seed;
  j["failed_pods"] = failed / n;
  j["invalid_choices"] = invalid / n;
  j["level_rule"] = "ratio when arrived GPU demand first reaches the level; final ratio if never";
  return j.dump();
}

}  // namespace trainq::sim
