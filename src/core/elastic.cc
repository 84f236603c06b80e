// Elastic jobs' resize decisions: growth into idle GPUs after a pass, shrinks before preemption.
// Whether a waiting job fits once GPUs are given up is judged by Place itself, as preemption
// judges it.
#include "src/core/elastic.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "src/core/duration.h"
#include "src/core/placement_internal.h"

namespace trainq {

namespace {

// A running job grows only to this many times its size or more: a resize is a restart, and a
// small gain does not pay for one.
constexpr double kMinGrowth = 1.5;

std::string GpusText(int n) { return fmt::format("{} GPU{}", n, n == 1 ? "" : "s"); }

bool HeldForAnother(std::span<const Hold> holds, const std::string& node, int index) {
  for (const Hold& h : holds) {
    auto has = [&](const NodeGpus& p) {
      return p.node == node &&
             std::find(p.gpu_indices.begin(), p.gpu_indices.end(), index) != p.gpu_indices.end();
    };
    if (h.parts.empty() ? has({h.node, h.gpu_indices})
                        : std::any_of(h.parts.begin(), h.parts.end(), has)) {
      return true;
    }
  }
  return false;
}

// A GPU that no job uses or is held for: what growth may take (ChooseGrowth).
bool Idle(const GpuState& gpu, const std::string& node, const placement_internal::Pass& pass,
          std::span<const Hold> holds, const PolicyConfig& policy, UnixMs now) {
  return placement_internal::RoomOf(gpu, policy, now).free && pass.Allowed(gpu) &&
         !pass.Stale(gpu) && !HeldForAnother(holds, node, gpu.index);
}

}  // namespace

void HoldOn(std::span<NodeState> nodes, const NodeGpus& part, const Holding& h,
            const std::string& user) {
  for (NodeState& node : nodes) {
    if (node.name != part.node) continue;
    if (!user.empty()) node.use_by_user[user].gpus += static_cast<int>(part.gpu_indices.size());
    for (GpuState& gpu : node.gpus) {
      if (std::find(part.gpu_indices.begin(), part.gpu_indices.end(), gpu.index) !=
          part.gpu_indices.end()) {
        gpu.holdings.push_back(h);
      }
    }
  }
}

bool MayResize(const ElasticRun& run, const ElasticConfig& config, UnixMs now) {
  if (run.starting) return true;
  return !run.stopping && now - run.sized_at >= config.min_runtime_ms;
}

std::vector<Resize> ChooseGrowth(std::span<const ElasticRun> runs, std::span<const NodeState> nodes,
                                 std::span<const Hold> holds, const PolicyConfig& policy,
                                 const ElasticConfig& config, UnixMs now) {
  std::vector<Resize> out;
  if (runs.empty()) return out;
  placement_internal::Pass pass(nodes, policy, now);
  std::map<std::string, int> user_gpus;  // for max_gpus_per_user: what each user holds
  for (const NodeState& node : nodes) {
    for (const auto& [user, use] : node.use_by_user) user_gpus[user] += use.gpus;
  }
  auto at_cap = [&](const ElasticRun& r) {
    return policy.max_gpus_per_user > 0 && user_gpus[r.user] >= policy.max_gpus_per_user;
  };
  std::map<std::string, std::vector<size_t>> by_node;  // runs that may grow, per node
  for (size_t k = 0; k < runs.size(); ++k) {
    const ElasticRun& r = runs[k];
    if (r.gpus() < r.max_gpus && MayResize(r, config, now)) by_node[r.where.node].push_back(k);
  }
  for (const NodeState& node : nodes) {
    auto it = by_node.find(node.name);
    if (it == by_node.end() || !node.accepts_new) continue;
    std::vector<int> idle;
    for (const GpuState& gpu : node.gpus) {
      if (Idle(gpu, node.name, pass, holds, policy, now)) idle.push_back(gpu.index);
    }
    // Hand them out one at a time, to the smallest job first.
    std::map<size_t, std::vector<int>> added;
    for (int gpu : idle) {
      const ElasticRun* best = nullptr;
      size_t best_k = 0;
      for (size_t k : it->second) {
        const ElasticRun& r = runs[k];
        int size = r.gpus() + static_cast<int>(added[k].size());
        if (size >= r.max_gpus || at_cap(r)) continue;
        int best_size = best ? best->gpus() + static_cast<int>(added[best_k].size()) : 0;
        if (!best || size < best_size || (size == best_size && r.job < best->job)) {
          best = &r, best_k = k;
        }
      }
      if (!best) break;
      added[best_k].push_back(gpu);
      ++user_gpus[best->user];
    }
    for (auto& [k, gpus] : added) {
      const ElasticRun& r = runs[k];
      int to = r.gpus() + static_cast<int>(gpus.size());
      if (gpus.empty() || (!r.starting && to < kMinGrowth * r.gpus())) continue;
      Resize g;
      g.job = r.job;
      g.from_gpus = r.gpus();
      g.to = r.where;
      g.to.gpu_indices.insert(g.to.gpu_indices.end(), gpus.begin(), gpus.end());
      std::sort(g.to.gpu_indices.begin(), g.to.gpu_indices.end());
      g.reason = fmt::format("grows from {} to {} (GPU{} {} idle)", r.gpus(), GpusText(to),
                             gpus.size() == 1 ? "" : "s", fmt::join(gpus, ", "));
      out.push_back(std::move(g));
    }
  }
  return out;
}

namespace {

// One node's working copy for the shrinks of one call, and what each job there still has.
struct ShrinkNode {
  NodeState state;
  std::vector<size_t> runs;  // elastic jobs here that may shrink
};

// Takes `gpu` off `job` on a copy of the node.
void DropHolding(NodeState& node, JobId job, int gpu) {
  for (GpuState& g : node.gpus) {
    if (g.index != gpu) continue;
    std::erase_if(g.holdings, [&](const Holding& h) { return h.job == job; });
  }
}

}  // namespace

namespace {

// Tries to start `w` on `node` (a copy, changed in place) by taking GPUs from the elastic jobs
// `order` (positions in `runs`), at least `take` of them, the job furthest above its min
// first. On success the copy holds `w` where it will start and has the given-up GPUs free.
std::optional<Shrink> ShrinkOnNode(NodeState& node, const PendingJob& w,
                                   std::span<const size_t> order, std::span<const ElasticRun> runs,
                                   int take, const PolicyConfig& probe, UnixMs now) {
  std::map<size_t, int> left;  // GPUs each keeps
  for (size_t k : order) left[k] = runs[k].gpus();
  std::optional<StartDecision> start;
  for (int taken = 0; !start;) {
    if (taken >= take) {
      PlacementResult r = Place(std::span(&w, 1), std::span(&node, 1), probe, now);
      if (!r.starts.empty()) {
        start = r.starts.front();
        break;
      }
    }
    // The job furthest above its min gives up its last GPU.
    size_t pick = order.size();
    int most = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      int above = left[order[i]] - runs[order[i]].min_gpus;
      if (above > most) most = above, pick = i;
    }
    if (pick == order.size()) return std::nullopt;
    size_t k = order[pick];
    --left[k];
    DropHolding(node, runs[k].job, runs[k].where.gpu_indices[size_t(left[k])]);
    ++taken;
  }
  Shrink s;
  s.job = w.id;
  int64_t stop = 0;
  std::vector<std::string> texts;
  for (size_t k : order) {
    const ElasticRun& r = runs[k];
    if (left[k] == r.gpus()) continue;
    Resize d;
    d.job = r.job;
    d.from_gpus = r.gpus();
    d.to = {r.where.node, {r.where.gpu_indices.begin(), r.where.gpu_indices.begin() + left[k]}};
    d.reason = fmt::format("shrinks from {} to {} for job {}", r.gpus(), GpusText(left[k]), w.id);
    texts.push_back(
        fmt::format("job {} shrinks from {} to {}", r.job, r.gpus(), GpusText(left[k])));
    stop = std::max(stop, r.stop_ms);
    s.resizes.push_back(std::move(d));
  }
  s.parts = start->parts.empty() ? std::vector<NodeGpus>{{start->node, start->gpu_indices}}
                                 : start->parts;
  s.ready_at = now + stop;
  s.reason = fmt::format("will start when {}", fmt::join(texts, " and "));
  if (stop > 0) s.reason += fmt::format(" (in {})", FormatDuration(stop));
  // The GPUs it takes are gone for later jobs of the same call.
  for (GpuState& g : node.gpus) {
    for (int i : s.parts.front().gpu_indices) {
      if (g.index == i) g.holdings.push_back({w.id, g.total_bytes, 0, true, now});
    }
  }
  return s;
}

}  // namespace

namespace {

// Tries to start `w` on the node of a part an elastic gang gives up (`node`, a copy, changed
// in place: the gang's holdings go, `w`'s come).
std::optional<Shrink> ShrinkGangOnNode(NodeState& node, const PendingJob& w, const GangRun& g,
                                       size_t part, const PolicyConfig& probe, UnixMs now) {
  for (GpuState& gpu : node.gpus) {
    std::erase_if(gpu.holdings, [&](const Holding& h) { return h.job == g.shape.id; });
  }
  PlacementResult placed = Place(std::span(&w, 1), std::span(&node, 1), probe, now);
  if (placed.starts.empty()) return std::nullopt;
  const StartDecision& d = placed.starts.front();
  int to = g.nodes() - 1;
  Resize z;
  z.job = g.shape.id;
  z.from_gpus = g.shape.gpus;
  z.from_nodes = g.nodes();
  z.to_parts = g.parts;
  z.to_parts.erase(z.to_parts.begin() + static_cast<std::ptrdiff_t>(part));
  z.to = z.to_parts.front();
  std::string sizes = fmt::format("from {} to {} node{}", g.nodes(), to, to == 1 ? "" : "s");
  z.reason = fmt::format("shrinks {} for job {} (it gives up {})", sizes, w.id, node.name);
  Shrink s;
  s.job = w.id;
  s.resizes.push_back(std::move(z));
  s.parts = d.parts.empty() ? std::vector<NodeGpus>{{d.node, d.gpu_indices}} : d.parts;
  s.ready_at = now + g.stop_ms;
  s.reason = fmt::format("will start when job {} shrinks {}", g.shape.id, sizes);
  if (g.stop_ms > 0) s.reason += fmt::format(" (in {})", FormatDuration(g.stop_ms));
  for (GpuState& gpu : node.gpus) {
    for (int i : s.parts.front().gpu_indices) {
      if (gpu.index == i) gpu.holdings.push_back({w.id, gpu.total_bytes, 0, true, now});
    }
  }
  return s;
}

}  // namespace

std::vector<Shrink> ChooseShrinks(std::span<const PendingJob* const> waiting,
                                  std::span<const NodeState> nodes,
                                  std::span<const ElasticRun> runs, const PolicyConfig& policy,
                                  const ElasticConfig& config, UnixMs now,
                                  std::span<const GangRun> gangs) {
  std::vector<Shrink> out;
  std::map<std::string, size_t> position;
  for (size_t n = 0; n < nodes.size(); ++n) position[nodes[n].name] = n;
  std::map<size_t, std::vector<size_t>> shrinkable;  // node position -> runs there
  for (size_t k = 0; k < runs.size(); ++k) {
    const ElasticRun& r = runs[k];
    auto p = position.find(r.where.node);
    if (p == position.end() || r.starting || r.gpus() <= r.min_gpus || !MayResize(r, config, now)) {
      continue;
    }
    shrinkable[p->second].push_back(k);
  }
  // Gangs that may give up a node, the furthest above its min first.
  std::vector<size_t> gang_order;
  for (size_t k = 0; k < gangs.size(); ++k) {
    const GangRun& g = gangs[k];
    if (!g.starting && !g.stopping && g.nodes() > g.shape.num_nodes &&
        now - g.sized_at >= config.min_runtime_ms) {
      gang_order.push_back(k);
    }
  }
  std::stable_sort(gang_order.begin(), gang_order.end(), [&](size_t a, size_t b) {
    return gangs[a].nodes() - gangs[a].shape.num_nodes >
           gangs[b].nodes() - gangs[b].shape.num_nodes;
  });
  if (shrinkable.empty() && gang_order.empty()) return out;
  std::map<size_t, NodeState> changed;  // nodes earlier decisions of this call changed
  std::set<JobId> used;                 // jobs already shrunk in this call
  auto node_at = [&](size_t n) -> const NodeState& {
    auto c = changed.find(n);
    return c == changed.end() ? nodes[n] : c->second;
  };
  PolicyConfig probe = policy;
  probe.aging_ms = 0;  // a probe holds nothing
  for (const PendingJob* w : waiting) {
    if (w->num_nodes > 1 || w->gpus <= 0) continue;
    // Per node, the jobs that may give GPUs to `w` and how many it needs at least.
    struct Option {
      size_t node = 0;
      int take = 0;
      std::vector<size_t> order;
    };
    std::vector<Option> options;
    for (auto& [n, ks] : shrinkable) {
      const NodeState& node = node_at(n);
      if (!node.accepts_new) continue;
      Option o{n, 0, {}};
      int spare = 0;
      for (size_t k : ks) {
        if (used.count(runs[k].job) || runs[k].priority > w->priority) continue;
        o.order.push_back(k);
        spare += runs[k].gpus() - runs[k].min_gpus;
      }
      int idle = 0;
      for (const GpuState& g : node.gpus) idle += g.holdings.empty() ? 1 : 0;
      int take = std::max(0, w->gpus - idle);
      if (spare == 0 || take > spare) continue;
      o.take = std::max(take, 1);
      options.push_back(std::move(o));
    }
    std::stable_sort(options.begin(), options.end(),
                     [](const Option& a, const Option& b) { return a.take < b.take; });
    bool served = false;
    for (const Option& o : options) {
      NodeState copy = node_at(o.node);
      std::optional<Shrink> s = ShrinkOnNode(copy, *w, o.order, runs, o.take, probe, now);
      if (!s) continue;
      for (const Resize& d : s->resizes) used.insert(d.job);
      changed[o.node] = std::move(copy);
      out.push_back(std::move(*s));
      served = true;
      break;
    }
    for (size_t k : gang_order) {
      const GangRun& g = gangs[k];
      if (served) break;
      if (used.count(g.shape.id) || g.shape.priority > w->priority) continue;
      for (size_t part = g.parts.size(); part-- > 0 && !served;) {
        auto p = position.find(g.parts[part].node);
        if (p == position.end() || !node_at(p->second).accepts_new) continue;
        NodeState copy = node_at(p->second);
        std::optional<Shrink> s = ShrinkGangOnNode(copy, *w, g, part, probe, now);
        if (!s) continue;
        used.insert(g.shape.id);
        changed[p->second] = std::move(copy);
        out.push_back(std::move(*s));
        served = true;
      }
    }
  }
  return out;
}

std::vector<GangGrowth> ChooseGangGrowth(std::span<const GangRun> runs,
                                         std::span<const NodeState> nodes,
                                         std::span<const Hold> holds, const PolicyConfig& policy,
                                         const ElasticConfig& config, UnixMs now) {
  std::vector<GangGrowth> out;
  std::vector<size_t> growing;
  for (size_t k = 0; k < runs.size(); ++k) {
    const GangRun& r = runs[k];
    bool may = r.starting || (!r.stopping && now - r.sized_at >= config.min_runtime_ms);
    if (may && r.nodes() < r.shape.max_nodes) growing.push_back(k);
  }
  if (growing.empty()) return out;
  // The nodes with only their idle GPUs open: a GPU anything uses or is held for is taken.
  placement_internal::Pass pass(nodes, policy, now);
  std::vector<NodeState> idle(nodes.begin(), nodes.end());
  for (NodeState& node : idle) {
    for (GpuState& gpu : node.gpus) {
      if (!Idle(gpu, node.name, pass, holds, policy, now)) {
        gpu.holdings.push_back({0, gpu.total_bytes, std::nullopt, true, now});
      }
    }
  }
  // A part is one more job of its user on that node: only the GPU limit counts against it.
  PolicyConfig probe_policy = policy;
  probe_policy.max_jobs_per_user = 0;
  std::map<size_t, std::vector<NodeGpus>> added;
  std::set<size_t> full;  // no node takes another part of it
  while (full.size() < growing.size()) {
    size_t best = SIZE_MAX;
    for (size_t k : growing) {
      if (full.count(k)) continue;
      int size = runs[k].nodes() + static_cast<int>(added[k].size());
      int best_size =
          best == SIZE_MAX ? 0 : runs[best].nodes() + static_cast<int>(added[best].size());
      if (size >= runs[k].shape.max_nodes) {
        full.insert(k);
      } else if (best == SIZE_MAX || size < best_size ||
                 (size == best_size && runs[k].shape.id < runs[best].shape.id)) {
        best = k;
      }
    }
    if (best == SIZE_MAX) break;
    PendingJob probe = runs[best].shape;
    probe.num_nodes = 1;
    probe.max_nodes = 0;
    probe.queued_at = probe.submitted_at = now;  // never aged: a probe holds nothing
    probe.not_before = 0;
    for (const NodeGpus& part : runs[best].parts) probe.nodes_excluded.push_back(part.node);
    for (const NodeGpus& part : added[best]) probe.nodes_excluded.push_back(part.node);
    PlacementResult r = Place(std::span(&probe, 1), idle, probe_policy, now);
    if (r.starts.empty()) {
      full.insert(best);
      continue;
    }
    const StartDecision& d = r.starts.front();
    added[best].push_back({d.node, d.gpu_indices});
    // Whole GPUs: a part of a job that shares GPUs still takes these from other gangs. Its user
    // holds them, for the next probe's max_gpus_per_user.
    HoldOn(idle, added[best].back(), {probe.id, 0, std::nullopt, true, now}, probe.user);
  }
  for (auto& [k, parts] : added) {
    const GangRun& r = runs[k];
    int to = r.nodes() + static_cast<int>(parts.size());
    if (parts.empty() || (!r.starting && to < kMinGrowth * r.nodes())) continue;
    std::vector<std::string> names;
    for (const NodeGpus& part : parts) names.push_back(part.node);
    GangGrowth g;
    g.job = r.shape.id;
    g.from_nodes = r.nodes();
    g.added = std::move(parts);
    g.reason = fmt::format("grows from {} to {} node{} ({} idle)", r.nodes(), to,
                           to == 1 ? "" : "s", fmt::join(names, ", "));
    out.push_back(std::move(g));
  }
  return out;
}

Hold ShrinkHold(const Shrink& s) {
  Hold h;
  h.job = s.job;
  if (!s.parts.empty()) h.node = s.parts.front().node, h.gpu_indices = s.parts.front().gpu_indices;
  h.parts = s.parts;
  h.preempting = true;
  return h;
}

}  // namespace trainq
