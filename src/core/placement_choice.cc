// GPU choice: the plain rule (spread: fewest trainq jobs, then most usable memory; pack: GPUs
// in use, then best fit; closest in topology first) and the fragmentation-aware one (FGD).
// docs/scheduling.md describes both.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/core/container.h"
#include "src/core/placement_internal.h"

namespace trainq::placement_internal {

namespace {

// What a holding may still allocate beyond what the probe already sees as used.
uint64_t Outstanding(const Holding& h, const PolicyConfig& config, UnixMs now) {
  if (h.used_now) return SatSub(h.reserved_bytes, *h.used_now);
  bool ramping_up = config.ramp_up_ms > 0 &&
                    ElapsedMs(now, h.started_at) < static_cast<uint64_t>(config.ramp_up_ms);
  return ramping_up ? h.reserved_bytes : 0;
}

}  // namespace

uint64_t OthersUse(const GpuState& gpu) {
  return gpu.holdings.empty() ? SatSub(gpu.total_bytes, gpu.free_bytes) : 0;
}

GpuRoom RoomOf(const GpuState& gpu, const PolicyConfig& config, UnixMs now) {
  bool free = gpu.holdings.empty() && gpu.foreign_processes == 0 &&
              OthersUse(gpu) <= config.whole_max_used_bytes;
  return {UsableBytes(gpu, config, now),
          HeldExclusively(gpu),
          !gpu.holdings.empty(),
          static_cast<int>(gpu.holdings.size()),
          free,
          gpu.total_bytes};
}

std::optional<uint64_t> LeftAfter(const PendingJob& job, const GpuState& gpu,
                                  const PolicyConfig& config, UnixMs now) {
  return LeftAfter(job, RoomOf(gpu, config, now));
}

namespace {

// The placement rule's rank of a GPU (less first): spread balances trainq jobs over GPUs;
// pack prefers GPUs in use.
int64_t Load(const GpuPick& pick, bool pack) {
  return pack ? (pick.used ? -1 : 0) : int64_t{pick.jobs};
}

// Then memory: spread keeps the most usable memory left (jobs grow), pack the least (best
// fit).
uint64_t Fit(uint64_t left, bool pack) {
  return pack ? left : std::numeric_limits<uint64_t>::max() - left;
}

}  // namespace

std::vector<GpuPick> FittingGpus(const PendingJob& job, const Pass& p, size_t n, unsigned ignore) {
  std::vector<GpuPick> picks;
  if (job.gpus == 0 || !p.NodeOpen(job, n)) return picks;
  const NodeState& node = p.node(n);
  std::span<const GpuRoom> room = p.Room(n);
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (!p.GpuOpen(job, n, i, ignore)) continue;
    std::optional<uint64_t> left = LeftAfter(job, room[i]);
    if (left) picks.push_back({i, room[i].used, room[i].jobs, *left});
  }
  bool pack = p.config.pack;
  std::sort(picks.begin(), picks.end(), [&node, pack](const GpuPick& a, const GpuPick& b) {
    return std::tuple(Load(a, pack), Fit(a.left, pack), node.gpus[a.pos].index) <
           std::tuple(Load(b, pack), Fit(b.left, pack), node.gpus[b.pos].index);
  });
  return picks;
}

size_t CouldFit(const PendingJob& job, const Pass& p, size_t n) {
  const NodeRoom& sum = p.RoomSummary(n);
  if (job.exclusive()) return sum.free;  // exactly the GPUs LeftAfter lets it take
  if (job.gpus > 0 && sum.most_usable < NeededOn(job, sum.least_total)) return 0;
  const NodeState& node = p.node(n);
  std::span<const GpuRoom> room = p.Room(n);
  size_t count = 0;
  for (size_t i = 0; i < node.gpus.size(); ++i) count += LeftAfter(job, room[i]) ? 1 : 0;
  return count;
}

namespace {

bool TopologyKnown(const NodeState& node) {
  if (node.topology.size() != node.gpus.size()) return false;
  return std::all_of(
      node.topology.begin(), node.topology.end(),
      [&node](const std::vector<int>& row) { return row.size() == node.gpus.size(); });
}

// The sum of the first k of `values` in `order` (saturated); `values` is reordered.
template <typename T, typename Order>
T SumOfK(std::vector<T>& values, size_t k, Order order) {
  if (k == 0 || values.size() < k) return 0;
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(k - 1), values.end(),
                   order);
  T sum = 0;
  for (size_t i = 0; i < k; ++i) {
    if constexpr (std::is_unsigned_v<T>) {
      sum = SatAdd(sum, values[i]);
    } else {
      sum += values[i];
    }
  }
  return sum;
}

// Worst and summed pairwise distance of the picks.
std::pair<int, int> Spread(const NodeState& node, std::span<const GpuPick> picks) {
  if (!TopologyKnown(node)) return {0, 0};
  int worst = 0, sum = 0;
  for (size_t i = 0; i < picks.size(); ++i) {
    for (size_t j = i + 1; j < picks.size(); ++j) {
      int d = node.topology[picks[i].pos][picks[j].pos];
      worst = std::max(worst, d);
      sum += d;
    }
  }
  return {worst, sum};
}

NodeChoice Summarise(const NodeState& node, size_t n, std::vector<GpuPick> picks, bool pack) {
  NodeChoice c{n, std::move(picks), 0, 0, 0, 0, 0};
  for (const GpuPick& pick : c.picks) {
    c.load += Load(pick, pack);
    c.left = SatAdd(c.left, pick.left);
  }
  c.fit = Fit(c.left, pack);
  std::tie(c.worst, c.sum) = Spread(node, c.picks);
  return c;
}

using Key = std::tuple<int, int, int64_t, uint64_t>;

// What the node must get before the job runs there, fewer first: its image (1 when the store
// lacks it: loaded first), then the bytes of what it ships that the node does not hold.
using Missing = std::pair<int, uint64_t>;
Missing MissingOn(const PendingJob& job, const NodeState& node) {
  int lacks = job.images.empty() ? 0 : 1;
  for (const std::string& want : job.images) {
    for (const std::string& held : node.images) {
      if (ImageNameMatches(want, held)) lacks = 0;
    }
  }
  uint64_t bytes = 0;
  if (node.name != job.shipped_from) {
    for (const auto& [manifest, size] : job.shipped) {
      if (std::find(node.staged.begin(), node.staged.end(), manifest) == node.staged.end()) {
        bytes += size;
      }
    }
  }
  return {lacks, bytes};
}

Key ChoiceKey(const NodeChoice& c) { return {c.worst, c.sum, c.load, c.fit}; }

// The closest `k` of `picks` (in preference order): every subset of the first few is tried;
// ties keep the earlier one, i.e. the usual preference.
std::vector<GpuPick> ClosestSubset(const NodeState& node, size_t n, std::vector<GpuPick> picks,
                                   size_t k, bool pack) {
  constexpr size_t kMaxCandidates = 16;  // C(16, 8) subsets at most
  if (picks.size() > kMaxCandidates) picks.resize(kMaxCandidates);
  std::vector<size_t> idx(k);
  std::iota(idx.begin(), idx.end(), 0);
  std::optional<NodeChoice> best;
  std::vector<GpuPick> trial(k);
  while (true) {
    for (size_t i = 0; i < k; ++i) trial[i] = picks[idx[i]];
    NodeChoice c = Summarise(node, n, trial, pack);
    if (!best || ChoiceKey(c) < ChoiceKey(*best)) best = std::move(c);
    size_t i = k;
    while (i > 0 && idx[i - 1] == picks.size() - k + i - 1) --i;
    if (i == 0) break;
    ++idx[i - 1];
    for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
  }
  return best->picks;
}

// The job's GPUs on node `n` out of those that fit it (best first): the closest set where
// the topology is known, else the first.
NodeChoice PickOnNode(const PendingJob& job, const NodeState& node, size_t n,
                      std::vector<GpuPick> picks, bool pack) {
  size_t k = static_cast<size_t>(job.gpus);
  if (k > 1 && picks.size() > k && TopologyKnown(node)) {
    picks = ClosestSubset(node, n, std::move(picks), k, pack);
  } else {
    picks.resize(k);
  }
  return Summarise(node, n, std::move(picks), pack);
}

bool HostFits(const PendingJob& job, const NodeState& node) {
  return FreeSlots(node) >= job.cpus && HostMemFits(job, node);
}

// Whether node n lacks room for the job's GPUs by its summary alone: then fewer than
// job.gpus GPUs there fit it, with no look at each GPU.
bool ShortOfRoom(const PendingJob& job, const Pass& p, size_t n) {
  if (job.gpus <= 0) return false;
  const NodeRoom& room = p.RoomSummary(n);
  if (job.exclusive()) return room.free < static_cast<size_t>(job.gpus);
  return p.node(n).gpus.empty() || room.most_usable < NeededOn(job, room.least_total);
}

// The least ChoiceKey a choice on node n could have, nullopt where it has too few GPUs the
// job fits (CouldFit). Over every set of job.gpus GPUs it fits, open to it or not: each
// part of the key is at least its least over those sets, so the key is at least this one.
// `lefts` is scratch.
std::optional<Key> LeastKey(const PendingJob& job, const Pass& p, size_t n,
                            std::vector<uint64_t>& lefts) {
  if (ShortOfRoom(job, p, n)) return std::nullopt;
  const NodeState& node = p.node(n);
  std::span<const GpuRoom> room = p.Room(n);
  size_t k = static_cast<size_t>(job.gpus);
  bool pack = p.config.pack;
  lefts.clear();
  std::vector<int64_t> loads;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    std::optional<uint64_t> left = LeftAfter(job, room[i]);
    if (!left) continue;
    lefts.push_back(*left);
    loads.push_back(Load(GpuPick{i, room[i].used, room[i].jobs, *left}, pack));
  }
  if (lefts.size() < k) return std::nullopt;
  // Any k of the fitting GPUs load at least the k least loads; they leave at least the k
  // least lefts (pack's fit) and at most the k largest (spread's fit falls as left grows).
  int64_t load = SumOfK(loads, k, std::less<>());
  uint64_t fit =
      pack ? SumOfK(lefts, k, std::less<>()) : Fit(SumOfK(lefts, k, std::greater<>()), false);
  // Spread starts from a worst of 0; only a negative distance (never NVML's) makes a sum
  // below 0.
  int sum = 0;
  if (k > 1 && TopologyKnown(node)) {
    for (const std::vector<int>& row : node.topology) {
      if (std::any_of(row.begin(), row.end(), [](int d) { return d < 0; }))
        sum = std::numeric_limits<int>::min();
    }
  }
  return Key{0, sum, load, fit};
}

// ChooseOnNode, past the check that the node has enough GPUs the job fits.
std::optional<NodeChoice> ChooseAmongFitting(const PendingJob& job, const Pass& p, size_t n,
                                             unsigned ignore) {
  const NodeState& node = p.node(n);
  if (!p.NodeOpen(job, n) || !HostFits(job, node)) return std::nullopt;
  std::vector<GpuPick> picks = FittingGpus(job, p, n, ignore);
  if (picks.size() < static_cast<size_t>(job.gpus)) return std::nullopt;
  return PickOnNode(job, node, n, std::move(picks), p.config.pack);
}

}  // namespace

std::optional<NodeChoice> ChooseOnNode(const PendingJob& job, const Pass& p, size_t n,
                                       unsigned ignore) {
  if (CouldFit(job, p, n) < static_cast<size_t>(job.gpus)) return std::nullopt;
  return ChooseAmongFitting(job, p, n, ignore);
}

std::optional<std::vector<NodeChoice>> ChooseGang(const PendingJob& job, const Pass& p,
                                                  unsigned ignore) {
  std::vector<NodeChoice> fits;
  for (size_t n = 0; n < p.size(); ++n) {
    if (std::optional<NodeChoice> c = ChooseOnNode(job, p, n, ignore)) fits.push_back(*c);
  }
  size_t k = static_cast<size_t>(job.num_nodes);
  if (fits.size() < k) return std::nullopt;
  // The same preference as among single nodes, ties by name: the choice does not depend on
  // the order the caller lists nodes in.
  auto key = [&p, &job](const NodeChoice& c) {
    const NodeState& node = p.node(c.node);
    return std::tuple<Missing, int, int, int64_t, uint64_t, const std::string&>(
        MissingOn(job, node), c.worst, c.sum, c.load, c.fit, node.name);
  };
  std::partial_sort(fits.begin(), fits.begin() + static_cast<ptrdiff_t>(k), fits.end(),
                    [&key](const NodeChoice& a, const NodeChoice& b) { return key(a) < key(b); });
  fits.resize(k);
  return fits;
}

std::optional<NodeChoice> ChooseNode(const PendingJob& job, const Pass& p, unsigned ignore) {
  // Nodes holding the job's image and bytes first, then the placement rule's key.
  using NodeKey = std::pair<Missing, Key>;
  std::optional<NodeChoice> best;
  std::optional<NodeKey> best_key;
  std::vector<uint64_t> lefts;
  for (size_t i = 0; i < p.size(); ++i) {
    // A node that cannot beat the best so far is passed over unseen: it would lose the tie.
    std::optional<Key> least = LeastKey(job, p, i, lefts);
    if (!least) continue;
    Missing lacks = MissingOn(job, p.node(i));
    if (best_key && !(NodeKey{lacks, *least} < *best_key)) continue;
    std::optional<NodeChoice> c = ChooseAmongFitting(job, p, i, ignore);
    if (c && (!best || NodeKey{lacks, ChoiceKey(*c)} < *best_key)) {
      best = std::move(c);
      best_key = NodeKey{lacks, ChoiceKey(*best)};
    }
  }
  return best;
}

namespace {

// ---- Fragmentation-aware choice (FGD). ----

double Fraction(uint64_t bytes, uint64_t total) {
  return total == 0 ? 0.0 : std::min(1.0, static_cast<double>(bytes) / static_cast<double>(total));
}

// The node as the fragmentation measure sees it for `job`: GPUs closed to it hold nothing
// free.
void FragView(const PendingJob& job, const Pass& p, size_t n, std::vector<FragGpu>& gpus,
              FragHost& host) {
  const NodeState& node = p.node(n);
  gpus.clear();
  std::span<const GpuRoom> room = p.Room(n);
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (!p.Open(job, n, i, kIgnoreNone) || room[i].held_exclusively) {
      gpus.push_back({0.0, false});
      continue;
    }
    gpus.push_back({Fraction(room[i].usable, node.gpus[i].total_bytes), room[i].free});
  }
  host.cpu_free = FreeSlots(node);
  host.mem_enforced = node.host_mem_bytes > 0;
  host.mem_free = SatSub(node.host_mem_bytes, node.host_mem_used);
}

struct FgdCandidate {
  NodeChoice choice;
  Missing missing;  // first: nodes holding the job's image and bytes win
  double delta = 0;
  double free_after = 0;  // the node's free GPU capacity after: less is a better fit
  int64_t cpu_after = 0;
};

bool FgdBetter(const FgdCandidate& a, const FgdCandidate& b) {
  constexpr double kEps = 1e-9;
  if (a.missing != b.missing) return a.missing < b.missing;
  if (a.delta < b.delta - kEps) return true;
  if (a.delta > b.delta + kEps) return false;
  if (a.free_after < b.free_after - kEps) return true;
  if (a.free_after > b.free_after + kEps) return false;
  return std::pair(a.cpu_after, a.choice.left) < std::pair(b.cpu_after, b.choice.left);
}

FgdCandidate Evaluate(const PendingJob& job, const NodeState& node, const FragmentationModel& model,
                      std::span<const FragGpu> before, NodeChoice choice, std::vector<size_t>& pos,
                      std::vector<FragGpu>& after) {
  pos.clear();
  after.clear();
  double free_after = model.FreeTotal();
  for (const GpuPick& pick : choice.picks) {
    pos.push_back(pick.pos);
    after.push_back(
        {job.exclusive() ? 0.0 : Fraction(pick.left, node.gpus[pick.pos].total_bytes), false});
    free_after += after.back().free - before[pick.pos].free;
  }
  FgdCandidate c{std::move(choice), MissingOn(job, node), 0, free_after,
                 FreeSlots(node) - job.cpus};
  c.delta = model.After(pos, after, job.cpus, job.host_mem_bytes) - model.Before();
  return c;
}

std::optional<NodeChoice> ChooseNodeFgd(const PendingJob& job, const Pass& p) {
  FragmentationModel model(p.config.workload);
  std::vector<FragGpu> gpus, after;
  std::vector<size_t> pos;
  FragHost host;
  std::optional<FgdCandidate> best;
  auto consider = [&](FgdCandidate c) {
    if (!best || FgdBetter(c, *best)) best = std::move(c);
  };
  for (size_t n = 0; n < p.size(); ++n) {
    const NodeState& node = p.node(n);
    if (job.gpus > static_cast<int>(node.gpus.size()) || !p.NodeOpen(job, n) ||
        !HostFits(job, node) || CouldFit(job, p, n) < static_cast<size_t>(job.gpus)) {
      continue;
    }
    std::vector<GpuPick> picks = FittingGpus(job, p, n);
    if (picks.size() < static_cast<size_t>(job.gpus)) continue;
    FragView(job, p, n, gpus, host);
    model.Prepare(gpus, host);
    if (job.gpus != 1 || job.exclusive()) {
      consider(Evaluate(job, node, model, gpus,
                        PickOnNode(job, node, n, std::move(picks), p.config.pack), pos, after));
      continue;
    }
    // A one-GPU share: every GPU it fits is a candidate of its own.
    for (const GpuPick& pick : picks) {
      consider(
          Evaluate(job, node, model, gpus, Summarise(node, n, {pick}, p.config.pack), pos, after));
    }
  }
  if (!best) return std::nullopt;
  return std::move(best->choice);
}

}  // namespace

// Records the start in the working copies so later jobs of this pass see it. used_now = 0
// (it holds nothing yet) makes the reservation count in full whatever the ramp-up window.
StartDecision Commit(const PendingJob& job, std::span<const NodeChoice> parts, Pass& p) {
  StartDecision d{job.id, "", {}, 0, job.cpus, {}};
  for (const NodeChoice& choice : parts) {
    NodeState& node = p.Mutable(choice.node);
    NodeGpus part{node.name, {}};
    for (const GpuPick& pick : choice.picks) {
      GpuState& gpu = node.gpus[pick.pos];
      uint64_t bytes = job.exclusive() ? gpu.total_bytes : NeededBytes(job, gpu);
      gpu.holdings.push_back({job.id, bytes, 0, job.exclusive(), p.now});
      part.gpu_indices.push_back(gpu.index);
      d.reserved_bytes = std::max(d.reserved_bytes, bytes);
    }
    std::sort(part.gpu_indices.begin(), part.gpu_indices.end());
    node.cpu_slots_used += job.cpus;
    node.host_mem_used = SatAdd(node.host_mem_used, job.host_mem_bytes);
    d.parts.push_back(std::move(part));
  }
  if (!d.parts.empty())
    std::tie(d.node, d.gpu_indices) = std::pair(d.parts[0].node, d.parts[0].gpu_indices);
  return d;
}

std::optional<std::vector<NodeChoice>> Choose(const PendingJob& job, const Pass& p) {
  if (job.num_nodes > 1) return ChooseGang(job, p);
  std::optional<NodeChoice> one =
      p.config.workload.empty() ? ChooseNode(job, p) : ChooseNodeFgd(job, p);
  if (!one) return std::nullopt;
  return std::vector<NodeChoice>{std::move(*one)};
}

}  // namespace trainq::placement_internal

namespace trainq {

uint64_t UsableBytes(const GpuState& gpu, const PolicyConfig& config, UnixMs now) {
  using placement_internal::SatAdd, placement_internal::SatSub;
  uint64_t outstanding = 0;
  for (const Holding& h : gpu.holdings)
    outstanding = SatAdd(outstanding, placement_internal::Outstanding(h, config, now));
  return SatSub(SatSub(gpu.free_bytes, outstanding), config.headroom_bytes);
}

uint64_t NeededBytes(const PendingJob& job, const GpuState& gpu) {
  return placement_internal::NeededOn(job, gpu.total_bytes);
}

}  // namespace trainq
