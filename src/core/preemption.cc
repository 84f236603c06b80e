// Preemption: the rules that make a running job a victim of a waiting one, then the search for
// each waiting job's victims, judged by Place on copies of the nodes with the victims taken off.
#include "src/core/preemption.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "src/core/duration.h"

namespace trainq {

namespace {

// The largest victim set tried subset by subset on one node, how many sets are looked at there
// and how many of those are tried with Place, before greedy removal takes over: a pass over 100
// nodes of 8 GPUs stays cheap.
constexpr size_t kMaxSetSize = 8;
constexpr size_t kMaxSetsPerNode = 512;
constexpr size_t kMaxProbesPerNode = 32;
// How many nodes a gang's choice of nodes is grown from, best first.
constexpr size_t kGangSeeds = 16;
constexpr size_t kNoNode = std::numeric_limits<size_t>::max();

uint64_t SatSub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

uint64_t SatAdd(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

// now - then, 0 when `then` is later, as int64 (saturated).
int64_t SinceMs(UnixMs now, UnixMs then) {
  if (now <= then) return 0;
  uint64_t d = static_cast<uint64_t>(now) - static_cast<uint64_t>(then);
  return static_cast<int64_t>(std::min<uint64_t>(d, std::numeric_limits<int64_t>::max()));
}

UnixMs AddMs(UnixMs at, int64_t ms) {
  return at > std::numeric_limits<UnixMs>::max() - ms ? std::numeric_limits<UnixMs>::max()
                                                      : at + ms;
}

// As placement counts it: aging starts at the latest queueing, or the end of a backoff.
UnixMs WaitingSince(const PendingJob& job) {
  return std::max(job.queued_at > 0 ? job.queued_at : job.submitted_at, job.not_before);
}

// ---- The rules. ----

enum class Rule { kNone, kPriority, kFairShare, kAging, kAttainedService };

// What every judgment of one call shares.
struct Context {
  const PolicyConfig& policy;
  const PreemptConfig& config;
  const UsageByUser& usage;
  UnixMs now = 0;
  double fair_hours = 0;    // a user's fair share: the mean over the users with work
  size_t largest_node = 0;  // GPUs on the largest node: half of it makes a job large
};

double HoursOf(const Context& c, const std::string& user) {
  auto it = c.usage.find(user);
  return it == c.usage.end() ? 0.0 : it->second;
}

Context MakeContext(std::span<const PendingJob* const> waiting, std::span<const NodeState> nodes,
                    std::span<const RunningJob> running, const PolicyConfig& policy,
                    const PreemptConfig& config, const UsageByUser& usage, UnixMs now,
                    const std::string* also = nullptr) {
  Context c{policy, config, usage, now};
  std::set<std::string> users;
  for (const PendingJob* w : waiting) users.insert(w->user);
  for (const RunningJob& r : running) users.insert(r.user);
  if (also != nullptr) users.insert(*also);
  double sum = 0;
  for (const std::string& u : users) sum += HoursOf(c, u);
  c.fair_hours = users.empty() ? 0.0 : sum / static_cast<double>(users.size());
  for (const NodeState& n : nodes) c.largest_node = std::max(c.largest_node, n.gpus.size());
  return c;
}

int64_t RanMs(const RunningJob& v, UnixMs now) { return SinceMs(now, v.started_at); }

bool TooYoung(const RunningJob& v, const Context& c) {
  return RanMs(v, c.now) < c.config.min_runtime_ms;
}

// The thrash guard: how much longer it is spared, 0 when it is not.
int64_t SparedMs(const RunningJob& v, const Context& c) {
  if (v.preempted_in_a_row < 2 || c.config.spare_ms <= 0) return 0;
  int64_t since = SinceMs(c.now, v.last_preempted_at);
  return since < c.config.spare_ms ? c.config.spare_ms - since : 0;
}

// Whether some waiting job may preempt it now, whatever the rule.
bool Available(const RunningJob& v, const Context& c) {
  return v.preemptible && !v.stopping && !TooYoung(v, c) && SparedMs(v, c) == 0;
}

bool Large(const PendingJob& w, const Context& c) {
  return w.num_nodes > 1 ||
         (w.gpus > 0 && c.largest_node > 0 && uint64_t{2} * uint64_t(w.gpus) >= c.largest_node);
}

int64_t WaitedMs(const PendingJob& w, const Context& c) { return SinceMs(c.now, WaitingSince(w)); }

bool AgedEnough(const PendingJob& w, const Context& c) {
  return c.policy.aging_ms > 0 && WaitedMs(w, c) > c.policy.aging_ms;
}

bool PriorityAllows(const PendingJob& w, const RunningJob& v, const Context& c) {
  return int64_t{w.priority} >= int64_t{v.priority} + c.config.priority_gap;
}

int GpusOf(const RunningJob& v) {
  int gpus = 0;
  for (const NodeGpus& part : v.parts) gpus += static_cast<int>(part.gpu_indices.size());
  return gpus;
}

// GPU-time received: its earlier attempts' and this one's so far.
double ServiceMs(const RunningJob& v, const Context& c) {
  return v.attained_gpu_ms + double(GpusOf(v)) * double(RanMs(v, c.now));
}

bool AttainedServiceAllows(const PendingJob& w, const RunningJob& v, const Context& c) {
  return c.config.for_attained_service && c.config.attained_service_ms > 0 && w.service_band == 0 &&
         ServiceMs(v, c) >= double(c.config.attained_service_ms);
}

bool FairShareAllows(const PendingJob& w, const RunningJob& v, const Context& c) {
  return HoursOf(c, w.user) < c.fair_hours && HoursOf(c, v.user) > c.fair_hours;
}

// The first rule that lets `w` preempt `v`, whether or not `v` is available.
Rule RuleFor(const PendingJob& w, const RunningJob& v, const Context& c) {
  if (v.job == w.id || v.priority > w.priority) return Rule::kNone;
  if (PriorityAllows(w, v, c)) return Rule::kPriority;
  if (AttainedServiceAllows(w, v, c)) return Rule::kAttainedService;
  if (v.user == w.user) return Rule::kNone;
  if (c.config.for_fair_share && FairShareAllows(w, v, c)) return Rule::kFairShare;
  if (c.config.for_aging && Large(w, c) && AgedEnough(w, c)) return Rule::kAging;
  return Rule::kNone;
}

// ---- The texts. ----

std::string FairShareMiss(const PendingJob& w, const RunningJob& v, const Context& c) {
  if (v.user == w.user) return "fair share: same user";
  if (HoursOf(c, w.user) >= c.fair_hours) {
    return fmt::format("fair share: {} is not below their share", w.user);
  }
  return fmt::format("fair share: {} is not above their share", v.user);
}

std::string AgingMiss(const PendingJob& w, const RunningJob& v, const Context& c) {
  if (v.user == w.user) return "aging: same user";
  if (!Large(w, c)) return "aging: not a large job";
  return fmt::format("aging: waited {} of aging_limit {}", FormatDuration(WaitedMs(w, c)),
                     FormatDuration(std::max<int64_t>(c.policy.aging_ms, 0)));
}

// Why no rule lets `w` preempt `v`.
std::string NoRuleText(const PendingJob& w, const RunningJob& v, const Context& c) {
  if (v.job == w.id) return "the job itself";
  if (v.priority > w.priority) {
    return fmt::format("priority {} is above this job's {}", v.priority, w.priority);
  }
  std::string text = fmt::format("priority {} is within preempt_priority_gap {} of {}", v.priority,
                                 c.config.priority_gap, w.priority);
  if (c.config.for_attained_service) {
    text += w.service_band != 0
                ? fmt::format("; attained service: this job has had {} of GPU time already",
                              FormatDuration(c.config.attained_service_ms))
                : fmt::format("; attained service: job {} has had {} of {} GPU time", v.job,
                              FormatDuration(int64_t(ServiceMs(v, c))),
                              FormatDuration(c.config.attained_service_ms));
  }
  if (c.config.for_fair_share) text += fmt::format("; {}", FairShareMiss(w, v, c));
  if (c.config.for_aging) text += fmt::format("; {}", AgingMiss(w, v, c));
  return text;
}

// Why `w` may not preempt `v` now, "" when it may.
std::string Objection(const PendingJob& w, const RunningJob& v, const Context& c) {
  if (!v.preemptible) return "not preemptible";
  if (v.stopping) return "being stopped";
  if (RuleFor(w, v, c) == Rule::kNone) return NoRuleText(w, v, c);
  if (TooYoung(v, c)) {
    return fmt::format("ran {} of min_runtime {}", FormatDuration(RanMs(v, c.now)),
                       FormatDuration(c.config.min_runtime_ms));
  }
  if (int64_t spared = SparedMs(v, c); spared > 0) {
    return fmt::format("spared for {} more: preempted {} times in a row", FormatDuration(spared),
                       v.preempted_in_a_row);
  }
  return "";
}

std::string EligibleText(const PendingJob& w, const RunningJob& v, const Context& c) {
  std::string rule;
  switch (RuleFor(w, v, c)) {
    case Rule::kFairShare:
      rule = fmt::format("{} is above their fair share", v.user);
      break;
    case Rule::kAging:
      rule = fmt::format("priority {}, for a large job waiting {}", v.priority,
                         FormatDuration(WaitedMs(w, c)));
      break;
    case Rule::kAttainedService:
      rule = fmt::format("it had {} of GPU time", FormatDuration(int64_t(ServiceMs(v, c))));
      break;
    default:
      rule = fmt::format("priority {}", v.priority);
  }
  return fmt::format("eligible: {}, ran {}", rule, FormatDuration(RanMs(v, c.now)));
}

// "preempted by job 31 (priority 100)", by the rule that chose it.
std::string VictimReason(const PendingJob& w, const RunningJob& v, const Context& c) {
  switch (RuleFor(w, v, c)) {
    case Rule::kFairShare:
      return fmt::format("preempted by job {} ({}, below their fair share)", w.id, w.user);
    case Rule::kAging:
      return fmt::format("preempted by job {} ({}, a large job waiting {})", w.id, w.user,
                         FormatDuration(WaitedMs(w, c)));
    case Rule::kAttainedService:
      return fmt::format("preempted by job {} ({}; this job had {} of GPU time)", w.id, w.user,
                         FormatDuration(int64_t(ServiceMs(v, c))));
    default:
      return fmt::format("preempted by job {} (priority {})", w.id, w.priority);
  }
}

// "a", "a and b", "a, b and c".
std::string JoinWords(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " and " : ", ";
    out += words[i];
  }
  return out;
}

// "job 12 (bob, priority 0)", "jobs 12 and 14 (bob, priority 0)", or each job with its own
// owner and priority where they differ.
std::string VictimsText(std::span<const RunningJob* const> victims) {
  auto who = [](const RunningJob& v) { return fmt::format("{}, priority {}", v.user, v.priority); };
  bool alike = std::all_of(victims.begin(), victims.end(), [&](const RunningJob* v) {
    return v->user == victims[0]->user && v->priority == victims[0]->priority;
  });
  std::vector<std::string> ids;
  for (const RunningJob* v : victims) {
    ids.push_back(alike ? std::to_string(v->job) : fmt::format("{} ({})", v->job, who(*v)));
  }
  std::string text = fmt::format("{} {}", victims.size() == 1 ? "job" : "jobs", JoinWords(ids));
  return alike ? fmt::format("{} ({})", text, who(*victims[0])) : text;
}

// ---- The working cluster. ----

void LowerUse(std::map<std::string, UserUse>& use, const std::string& user, int gpus, int jobs) {
  auto it = use.find(user);
  if (it == use.end()) return;
  it->second.gpus = std::max(0, it->second.gpus - gpus);
  it->second.jobs = std::max(0, it->second.jobs - jobs);
  if (it->second.gpus == 0 && it->second.jobs == 0) use.erase(it);
}

}  // namespace

double AttainedGpuMs(const Job& job) {
  double total = 0;
  for (const Attempt& a : job.attempts) {
    if (!a.ended_at || a.started_at <= 0 || *a.ended_at <= a.started_at) continue;
    size_t gpus = a.gpu_indices.size();
    if (!a.parts.empty()) {
      gpus = 0;
      for (const AttemptPart& p : a.parts) gpus += p.gpu_indices.size();
    }
    total += double(gpus) * double(*a.ended_at - a.started_at);
  }
  return total;
}

namespace {

// Takes `v`'s share off `node`, one of its nodes: its holdings (their memory back to free, as
// the probe will see it once the job exits), CPU slots, host memory and its user's use (a gang
// counts as a job on its master node).
void RemoveShare(NodeState& node, const RunningJob& v, bool master) {
  int gpus = 0;
  for (GpuState& gpu : node.gpus) {
    auto it = std::find_if(gpu.holdings.begin(), gpu.holdings.end(),
                           [&v](const Holding& h) { return h.job == v.job; });
    if (it == gpu.holdings.end()) continue;
    uint64_t bytes = it->used_now.value_or(it->reserved_bytes);
    gpu.free_bytes = std::min(gpu.total_bytes, SatAdd(gpu.free_bytes, bytes));
    gpu.holdings.erase(it);
    ++gpus;
  }
  node.cpu_slots_used = std::max(0, node.cpu_slots_used - v.cpus);
  node.host_mem_used = SatSub(node.host_mem_used, v.host_mem_bytes);
  LowerUse(node.use_by_user, v.user, gpus, master ? 1 : 0);
}

// A running job some rule may make a victim (preemptible, not stopping, past min_runtime, not
// spared by the thrash guard), and where it runs.
struct Victim {
  const RunningJob* job = nullptr;
  int64_t ran_ms = 0;
  std::vector<size_t> nodes;  // its parts' positions in State::nodes (kNoNode: not among them)
  bool taken = false;         // an earlier waiting job of this pass chose it

  bool On(size_t n) const { return std::find(nodes.begin(), nodes.end(), n) != nodes.end(); }
};

// One call's state: the nodes with the decisions so far applied, and the candidate victims.
struct State {
  Context c;
  PolicyConfig probe;  // the policy without holds: a lone job's own hold never blocks it
  std::vector<NodeState> nodes;
  std::map<std::string, size_t, std::less<>> by_name;
  // Per-user use summed over the nodes, kept where a per-user limit is set: a probe sees a
  // node or a few, and Place must still count the user's whole use.
  bool limited = false;
  std::map<std::string, UserUse> totals;
  std::vector<Victim> pool;  // least work lost first
};

size_t NodeOf(const State& s, const std::string& name) {
  auto it = s.by_name.find(name);
  return it == s.by_name.end() ? kNoNode : it->second;
}

void RemoveJob(State& s, const RunningJob& v) {
  for (size_t i = 0; i < v.parts.size(); ++i) {
    size_t n = NodeOf(s, v.parts[i].node);
    if (n != kNoNode) RemoveShare(s.nodes[n], v, i == 0);
  }
  if (s.limited) LowerUse(s.totals, v.user, GpusOf(v), 1);
}

void SumTotals(State& s) {
  for (const NodeState& node : s.nodes) {
    for (const auto& [user, use] : node.use_by_user) {
      s.totals[user].gpus += use.gpus;
      s.totals[user].jobs += use.jobs;
    }
  }
}

bool LeastWorkLostFirst(const Victim& a, const Victim& b) {
  return std::tuple(a.ran_ms, a.job->priority, -a.job->job) <
         std::tuple(b.ran_ms, b.job->priority, -b.job->job);
}

// Stopping jobs' GPUs count as free: they are on their way out, and a job that fits once they
// are gone must not stop more.
State MakeState(Context c, std::span<const NodeState> nodes, std::span<const RunningJob> running) {
  State s{c, c.policy, {nodes.begin(), nodes.end()}, {}, false, {}, {}};
  s.probe.aging_ms = 0;
  for (size_t n = 0; n < s.nodes.size(); ++n) s.by_name.emplace(s.nodes[n].name, n);
  s.limited = c.policy.max_gpus_per_user > 0 || c.policy.max_jobs_per_user > 0;
  if (s.limited) SumTotals(s);
  for (const RunningJob& r : running) {
    if (r.stopping) RemoveJob(s, r);
    if (!Available(r, s.c)) continue;
    Victim v{&r, RanMs(r, c.now), {}, false};
    for (const NodeGpus& part : r.parts) v.nodes.push_back(NodeOf(s, part.node));
    s.pool.push_back(std::move(v));
  }
  std::sort(s.pool.begin(), s.pool.end(), LeastWorkLostFirst);
  return s;
}

std::map<std::string, UserUse> UseWithout(const State& s, std::span<const size_t> set) {
  std::map<std::string, UserUse> use = s.totals;
  for (size_t i : set) LowerUse(use, s.pool[i].job->user, GpusOf(*s.pool[i].job), 1);
  return use;
}

// Node n as it would be without the victims `set` (positions in State::pool).
NodeState Without(const State& s, size_t n, std::span<const size_t> set) {
  NodeState copy = s.nodes[n];
  for (size_t i : set) {
    const Victim& v = s.pool[i];
    if (v.On(n)) RemoveShare(copy, *v.job, v.nodes[0] == n);
  }
  return copy;
}

// Where Place starts `w` on `nodes` (copies), nullopt where it does not. Where a per-user limit
// is set the first copy carries the user's whole use, the others none.
std::optional<StartDecision> PlaceOn(const PendingJob& w, std::vector<NodeState>& nodes,
                                     const State& s, std::span<const size_t> set) {
  if (s.limited && !nodes.empty()) {
    for (NodeState& node : nodes) node.use_by_user.clear();
    nodes[0].use_by_user = UseWithout(s, set);
  }
  PlacementResult r = Place(std::span<const PendingJob>(&w, 1), nodes, s.probe, s.c.now);
  if (r.starts.empty()) return std::nullopt;
  return std::move(r.starts[0]);
}

bool FitsOn(const PendingJob& w1, const State& s, size_t n, std::span<const size_t> set) {
  std::vector<NodeState> one{Without(s, n, set)};
  return PlaceOn(w1, one, s, set).has_value();
}

// ---- The search. ----

// A victim set on one node; less is better: fewer victims, less work lost, the earlier node.
struct NodeSet {
  size_t node = 0;
  std::vector<size_t> victims;  // positions in State::pool, least work lost first
  int64_t lost = 0;             // the victims' summed run time
  using Key = std::tuple<size_t, int64_t, size_t>;
  Key key() const { return {victims.size(), lost, node}; }
};

int64_t LostBy(const State& s, std::span<const size_t> set) {
  int64_t lost = 0;
  for (size_t i : set) lost = AddMs(lost, s.pool[i].ran_ms);  // saturated
  return lost;
}

// Which of the node's GPUs could take the job as they are, judged generously (limits and host
// resources aside): a victim set must open the rest.
std::vector<char> FittingNow(const PendingJob& w, const NodeState& node, const Context& c) {
  std::vector<char> fits;
  for (const GpuState& gpu : node.gpus) {
    bool exclusive_held = std::any_of(gpu.holdings.begin(), gpu.holdings.end(),
                                      [](const Holding& h) { return h.exclusive; });
    fits.push_back(w.exclusive() ? gpu.holdings.empty() && gpu.foreign_processes == 0
                                 : !exclusive_held &&
                                       UsableBytes(gpu, c.policy, c.now) >= NeededBytes(w, gpu));
  }
  return fits;
}

// A GPU only opens up when a holding on it goes, so a victim frees at most the GPUs it holds on
// the node.
size_t GpusHeldOn(const NodeState& node, JobId job) {
  return static_cast<size_t>(
      std::count_if(node.gpus.begin(), node.gpus.end(), [job](const auto& g) {
        return std::any_of(g.holdings.begin(), g.holdings.end(),
                           [job](const Holding& h) { return h.job == job; });
      }));
}

// Steps `idx` (ascending positions in [0, m)) to the next subset of its size in lexicographic
// order; false after the last.
bool NextSubset(std::vector<size_t>& idx, size_t m) {
  size_t k = idx.size();
  for (size_t i = k; i-- > 0;) {
    if (idx[i] < m - k + i) {
      ++idx[i];
      for (size_t j = i + 1; j < k; ++j) idx[j] = idx[j - 1] + 1;
      return true;
    }
  }
  return false;
}

// One node's search for one waiting job (as a single-node job: a gang's share of one node).
struct NodeSearch {
  const PendingJob& w1;
  size_t n;
  const std::vector<size_t>& cands;  // positions in State::pool, least work lost first
  const State& s;
  std::optional<NodeSet::Key> bound;  // only sets better than this matter
  std::vector<size_t> frees{};        // per candidate: GPUs it holds on the node
  std::vector<char> fits_now{};       // per GPU: FittingNow
  size_t short_by = 0;                // GPUs the victims must open up
  size_t lower = 1;                   // the fewest victims that could open them
  size_t sets_left = kMaxSetsPerNode;
  size_t probes_left = kMaxProbesPerNode;

  bool Worth(size_t k, int64_t lost, const std::optional<NodeSet>& best) const {
    if (bound && !(NodeSet::Key{k, lost, n} < *bound)) return false;
    return !best || lost < best->lost;
  }
};

// The fewest victims needed if each frees all the GPUs it holds here.
size_t LowerBound(std::vector<size_t> frees, size_t short_by) {
  std::sort(frees.begin(), frees.end(), std::greater<>());
  size_t k = 0, opened = 0;
  while (opened < short_by && k < frees.size()) opened += frees[k++];
  return std::max<size_t>(k, 1);
}

// Whether GPU g could take the job with `jobs` gone: a whole-GPU job needs every holding gone;
// a share needs the free memory, with what they give back, to cover it (the holdings left may
// take more). Generous, as it only spares a probe where the answer is surely no.
bool MayOpen(const NodeSearch& ns, const GpuState& gpu, std::span<const JobId> jobs) {
  size_t gone = 0;
  uint64_t back = 0;
  bool exclusive_left = false;
  for (const Holding& h : gpu.holdings) {
    if (std::find(jobs.begin(), jobs.end(), h.job) == jobs.end()) {
      exclusive_left = exclusive_left || h.exclusive;
      continue;
    }
    ++gone;
    back = SatAdd(back, h.used_now.value_or(h.reserved_bytes));
  }
  if (gone == 0) return false;
  if (ns.w1.exclusive()) return gone == gpu.holdings.size() && gpu.foreign_processes == 0;
  uint64_t free = std::min(gpu.total_bytes, SatAdd(gpu.free_bytes, back));
  return !exclusive_left && SatSub(free, ns.s.c.policy.headroom_bytes) >= NeededBytes(ns.w1, gpu);
}

// Whether the set could open the GPUs the job is short of.
bool OpensEnough(const NodeSearch& ns, std::span<const size_t> set) {
  if (ns.short_by == 0) return true;
  std::vector<JobId> jobs;
  for (size_t i : set) jobs.push_back(ns.s.pool[i].job->job);
  const NodeState& node = ns.s.nodes[ns.n];
  size_t opened = 0;
  for (size_t g = 0; g < node.gpus.size() && opened < ns.short_by; ++g) {
    if (!ns.fits_now[g] && MayOpen(ns, node.gpus[g], jobs)) ++opened;
  }
  return opened >= ns.short_by;
}

// Tries the sets of size k in least-work-lost order; the best that fits, if any.
std::optional<NodeSet> TrySize(NodeSearch& ns, size_t k) {
  std::optional<NodeSet> best;
  std::vector<size_t> idx(k);
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::vector<size_t> set(k);
  do {
    --ns.sets_left;
    for (size_t j = 0; j < k; ++j) set[j] = ns.cands[idx[j]];
    int64_t lost = LostBy(ns.s, set);
    if (!ns.Worth(k, lost, best) || !OpensEnough(ns, set)) continue;
    if (ns.probes_left == 0) break;
    --ns.probes_left;
    if (FitsOn(ns.w1, ns.s, ns.n, set)) best = NodeSet{ns.n, set, lost};
  } while (ns.sets_left > 0 && ns.probes_left > 0 && NextSubset(idx, ns.cands.size()));
  return best;
}

// Sets of growing size. `complete`: every size that could beat the bound was tried in full.
std::optional<NodeSet> SmallestSet(NodeSearch& ns, bool& complete) {
  size_t top = std::min(kMaxSetSize, ns.cands.size());
  complete = ns.cands.size() <= kMaxSetSize;
  for (size_t k = ns.lower; k <= top; ++k) {
    if (ns.bound && k > std::get<0>(*ns.bound)) {
      complete = true;
      break;
    }
    std::optional<NodeSet> best = TrySize(ns, k);
    if (best) return best;
    if (ns.sets_left == 0 || ns.probes_left == 0) {
      complete = false;
      break;
    }
  }
  return std::nullopt;
}

// The GPUs a whole-GPU job could have on the node, as bit masks over NodeSearch::cands: the
// candidates that must all go to open each (every holding there a candidate's, no foreign
// process). Empty where the node has more candidates than a mask holds.
std::vector<uint64_t> Openable(const NodeSearch& ns) {
  std::vector<uint64_t> openable;
  if (ns.cands.size() > 64) return openable;
  std::map<JobId, size_t> bit_of;
  for (size_t b = 0; b < ns.cands.size(); ++b) bit_of.emplace(ns.s.pool[ns.cands[b]].job->job, b);
  const NodeState& node = ns.s.nodes[ns.n];
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    const GpuState& gpu = node.gpus[g];
    if (ns.fits_now[g] || gpu.foreign_processes > 0) continue;
    uint64_t mask = 0;
    bool all = true;
    for (const Holding& h : gpu.holdings) {
      auto it = bit_of.find(h.job);
      all = all && it != bit_of.end();
      if (!all) break;
      mask |= uint64_t{1} << it->second;
    }
    if (all) openable.push_back(mask);
  }
  return openable;
}

// A whole-GPU job opens a GPU only when every holding there goes, so its best set is the
// holders of the GPUs it is short of that have the fewest (then least work lost): each choice
// of GPUs is ranked, then tried with Place best first. `settled`: no other set can do better
// (found, none beats the bound, or too few GPUs can be opened); else Place refused every choice
// (CPU slots, host memory, limits) and the general search goes on.
std::optional<NodeSet> WholeGpuSet(NodeSearch& ns, bool& settled) {
  settled = ns.cands.size() <= 64;
  std::vector<uint64_t> openable = Openable(ns);
  if (openable.size() < ns.short_by) return std::nullopt;
  std::vector<std::tuple<size_t, int64_t, uint64_t>> options;  // victims, work lost, mask
  std::vector<size_t> idx(ns.short_by);
  std::iota(idx.begin(), idx.end(), size_t{0});
  size_t sets_left = kMaxSetsPerNode;
  do {
    uint64_t mask = 0;
    for (size_t j : idx) mask |= openable[j];
    auto count = static_cast<size_t>(__builtin_popcountll(mask));
    int64_t lost = 0;
    for (size_t b = 0; b < ns.cands.size(); ++b) {
      if (mask >> b & 1) lost = AddMs(lost, ns.s.pool[ns.cands[b]].ran_ms);
    }
    if (!ns.bound || NodeSet::Key{count, lost, ns.n} < *ns.bound)
      options.emplace_back(count, lost, mask);
  } while (--sets_left > 0 && NextSubset(idx, openable.size()));
  std::sort(options.begin(), options.end());
  options.erase(std::unique(options.begin(), options.end()), options.end());
  for (const auto& [count, lost, mask] : options) {
    if (ns.probes_left == 0) break;
    --ns.probes_left;
    std::vector<size_t> victims;
    for (size_t b = 0; b < ns.cands.size(); ++b) {
      if (mask >> b & 1) victims.push_back(ns.cands[b]);
    }
    if (FitsOn(ns.w1, ns.s, ns.n, victims)) return NodeSet{ns.n, std::move(victims), lost};
  }
  settled = options.empty() && sets_left > 0;
  return std::nullopt;
}

// Past the subset search: the shortest prefix of the candidates that fits (taking more off only
// helps, so a binary search finds it), less each member not needed, most work lost first.
std::optional<NodeSet> GreedySet(const NodeSearch& ns) {
  size_t none = ns.cands.size() + 1;
  size_t lo = ns.lower, hi = none;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    std::span<const size_t> prefix(ns.cands.data(), mid);
    if (FitsOn(ns.w1, ns.s, ns.n, prefix)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  if (lo == none) return std::nullopt;
  std::vector<size_t> set(ns.cands.begin(), ns.cands.begin() + static_cast<ptrdiff_t>(lo));
  for (size_t i = set.size(); i-- > 0 && set.size() > ns.lower;) {
    std::vector<size_t> fewer = set;
    fewer.erase(fewer.begin() + static_cast<ptrdiff_t>(i));
    if (FitsOn(ns.w1, ns.s, ns.n, fewer)) set = std::move(fewer);
  }
  int64_t lost = LostBy(ns.s, set);
  return NodeSet{ns.n, std::move(set), lost};
}

// The best victim set on node n, nullopt where none lets the job in (or none beats `bound`).
std::optional<NodeSet> SearchNode(const PendingJob& w1, size_t n, const std::vector<size_t>& cands,
                                  const State& s, std::optional<NodeSet::Key> bound,
                                  bool try_empty) {
  if (try_empty && FitsOn(w1, s, n, {})) return NodeSet{n, {}, 0};
  if (cands.empty()) return std::nullopt;
  NodeSearch ns{w1, n, cands, s, bound};
  const NodeState& node = s.nodes[n];
  size_t opened = 0;
  for (size_t i : cands) opened += ns.frees.emplace_back(GpusHeldOn(node, s.pool[i].job->job));
  ns.fits_now = FittingNow(w1, node, s.c);
  size_t fit = static_cast<size_t>(std::count(ns.fits_now.begin(), ns.fits_now.end(), 1));
  ns.short_by = SatSub(static_cast<uint64_t>(std::max(w1.gpus, 0)), fit);
  if (opened < ns.short_by) return std::nullopt;
  ns.lower = LowerBound(ns.frees, ns.short_by);
  if (bound && ns.lower > std::get<0>(*bound)) return std::nullopt;  // no probe: it cannot win
  if (w1.exclusive() && ns.short_by > 0) {
    bool settled = false;
    std::optional<NodeSet> whole = WholeGpuSet(ns, settled);
    if (settled) return whole;
  }
  // Where nothing lets the job in, one probe says so before many sets are tried.
  if (ns.lower < cands.size() && !FitsOn(w1, s, n, cands)) return std::nullopt;
  bool complete = false;
  std::optional<NodeSet> found = SmallestSet(ns, complete);
  if (!found && !complete) found = GreedySet(ns);
  return found;
}

// Per node, the candidates `w` may preempt there, least work lost first.
std::vector<std::vector<size_t>> CandidatesByNode(const PendingJob& w, const State& s) {
  std::vector<std::vector<size_t>> out(s.nodes.size());
  for (size_t i = 0; i < s.pool.size(); ++i) {
    const Victim& v = s.pool[i];
    if (v.taken || RuleFor(w, *v.job, s.c) == Rule::kNone) continue;
    for (size_t n : v.nodes) {
      if (n != kNoNode && (out[n].empty() || out[n].back() != i)) out[n].push_back(i);
    }
  }
  return out;
}

// A single-node job's best node: fewest victims, least work lost, the first node.
std::optional<NodeSet> BestNode(const PendingJob& w, const std::vector<std::vector<size_t>>& cands,
                                const State& s) {
  std::optional<NodeSet> best;
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    if (cands[n].empty()) continue;
    std::optional<NodeSet::Key> bound;
    if (best) bound = best->key();
    std::optional<NodeSet> set = SearchNode(w, n, cands[n], s, bound, false);
    if (set && (!best || set->key() < best->key())) best = std::move(set);
  }
  return best;
}

// The victims a selection of nodes' sets takes, and the work they lose: each victim once.
std::pair<size_t, int64_t> CostOf(const std::set<size_t>& victims, const State& s) {
  int64_t lost = 0;
  for (size_t i : victims) lost = AddMs(lost, s.pool[i].ran_ms);
  return {victims.size(), lost};
}

// From `seed`, adds the node that adds the fewest victims, then the least work lost, until
// `want` are chosen: a victim gang on several nodes frees them all for one victim.
std::vector<size_t> GrowFrom(size_t seed, const std::vector<NodeSet>& sets, size_t want,
                             const State& s) {
  std::vector<size_t> chosen{seed};
  std::set<size_t> victims(sets[seed].victims.begin(), sets[seed].victims.end());
  while (chosen.size() < want) {
    std::optional<std::pair<std::pair<size_t, int64_t>, size_t>> next;
    for (size_t j = 0; j < sets.size(); ++j) {
      if (std::find(chosen.begin(), chosen.end(), j) != chosen.end()) continue;
      std::set<size_t> more = victims;
      more.insert(sets[j].victims.begin(), sets[j].victims.end());
      auto cost = std::pair(CostOf(more, s), j);
      if (!next || cost < *next) next = cost;
    }
    chosen.push_back(next->second);
    victims.insert(sets[next->second].victims.begin(), sets[next->second].victims.end());
  }
  return chosen;
}

// A gang's nodes: each node's own best set, then the selection of `want` of them that takes the
// fewest victims, grown greedily from each of the best few nodes.
std::vector<NodeSet> BestGangNodes(const PendingJob& w1, size_t want,
                                   const std::vector<std::vector<size_t>>& cands, const State& s) {
  std::vector<NodeSet> sets;
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    if (std::optional<NodeSet> set = SearchNode(w1, n, cands[n], s, std::nullopt, true)) {
      sets.push_back(std::move(*set));
    }
  }
  if (sets.size() < want) return {};
  std::sort(sets.begin(), sets.end(),
            [](const NodeSet& a, const NodeSet& b) { return a.key() < b.key(); });
  std::optional<std::pair<std::pair<size_t, int64_t>, std::vector<size_t>>> best;
  for (size_t seed = 0; seed < std::min(sets.size(), kGangSeeds); ++seed) {
    std::vector<size_t> chosen = GrowFrom(seed, sets, want, s);
    std::set<size_t> victims;
    for (size_t j : chosen) victims.insert(sets[j].victims.begin(), sets[j].victims.end());
    auto cost = CostOf(victims, s);
    if (!best || cost < best->first) best = std::pair(cost, std::move(chosen));
  }
  std::vector<NodeSet> out;
  for (size_t j : best->second) out.push_back(sets[j]);
  return out;
}

// The chosen nodes' sets as one, each victim once (a gang may be on several of the nodes).
std::vector<size_t> UnionOf(const std::vector<NodeSet>& sets) {
  std::vector<size_t> all;
  for (const NodeSet& set : sets) all.insert(all.end(), set.victims.begin(), set.victims.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

// One Place over the chosen nodes without the victims: where the job will go.
std::optional<StartDecision> Confirm(const PendingJob& w, const std::vector<NodeSet>& sets,
                                     std::span<const size_t> victims, const State& s) {
  std::vector<NodeState> copies;
  for (const NodeSet& set : sets) copies.push_back(Without(s, set.node, victims));
  return PlaceOn(w, copies, s, victims);
}

// Records the decision for the jobs after it: the victims are gone, the job holds its GPUs.
void Apply(const PendingJob& w, std::span<const size_t> victims, const StartDecision& start,
           State& s) {
  for (size_t i : victims) {
    s.pool[i].taken = true;
    RemoveJob(s, *s.pool[i].job);
  }
  for (size_t p = 0; p < start.parts.size(); ++p) {
    size_t n = NodeOf(s, start.parts[p].node);
    if (n == kNoNode) continue;
    NodeState& node = s.nodes[n];
    const std::vector<int>& indices = start.parts[p].gpu_indices;
    for (GpuState& gpu : node.gpus) {
      if (std::find(indices.begin(), indices.end(), gpu.index) == indices.end()) continue;
      uint64_t bytes = w.exclusive() ? gpu.total_bytes : NeededBytes(w, gpu);
      gpu.holdings.push_back({w.id, bytes, 0, w.exclusive(), s.c.now});
    }
    node.cpu_slots_used += w.cpus;
    node.host_mem_used = SatAdd(node.host_mem_used, w.host_mem_bytes);
    UserUse& use = node.use_by_user[w.user];
    use.gpus += static_cast<int>(indices.size());
    use.jobs += p == 0 ? 1 : 0;
  }
  if (s.limited) {
    s.totals[w.user].gpus += static_cast<int>(std::max<int64_t>(w.total_gpus(), 0));
    ++s.totals[w.user].jobs;
  }
}

Preemption Describe(const PendingJob& w, std::span<const size_t> victims, StartDecision start,
                    const State& s) {
  Preemption p{w.id, {}, std::move(start.parts), s.c.now, "", {}};
  std::vector<const RunningJob*> jobs;
  int64_t stop = 0;
  for (size_t i : victims) {
    const RunningJob& v = *s.pool[i].job;
    jobs.push_back(&v);
    p.victims.push_back(v.job);
    p.victim_reasons.push_back(VictimReason(w, v, s.c));
    stop = std::max(stop, v.stop_ms);
  }
  p.ready_at = AddMs(s.c.now, stop);
  p.reason = fmt::format("will preempt {}", VictimsText(jobs));
  if (stop > 0) p.reason += fmt::format(" in {}", FormatDuration(stop));
  return p;
}

std::optional<Preemption> PreemptFor(const PendingJob& w, State& s) {
  if (w.num_nodes < 1 || w.gpus < 0) return std::nullopt;
  // It would start now: it waits for a hold, or for what stopping jobs give back.
  // (Over every node Place sums the users' use itself.)
  if (!Place(std::span<const PendingJob>(&w, 1), s.nodes, s.probe, s.c.now).starts.empty()) {
    return std::nullopt;
  }
  PendingJob w1 = w;
  w1.num_nodes = 1;
  auto want = static_cast<size_t>(w.num_nodes);
  std::vector<std::vector<size_t>> cands = CandidatesByNode(w, s);
  std::vector<NodeSet> best;
  if (want > 1) {
    best = BestGangNodes(w1, want, cands, s);
  } else if (std::optional<NodeSet> one = BestNode(w1, cands, s)) {
    best.push_back(std::move(*one));
  }
  if (best.size() < want) return std::nullopt;
  std::vector<size_t> victims = UnionOf(best);
  if (victims.empty()) return std::nullopt;
  std::optional<StartDecision> start = Confirm(w, best, victims, s);
  if (!start) return std::nullopt;
  Preemption p = Describe(w, victims, *start, s);
  Apply(w, victims, *start, s);
  return p;
}

bool ExplainOrder(const std::pair<PreemptCandidate, int64_t>& a,
                  const std::pair<PreemptCandidate, int64_t>& b) {
  return std::tuple(!a.first.eligible, a.second, a.first.priority, -a.first.job) <
         std::tuple(!b.first.eligible, b.second, b.first.priority, -b.first.job);
}

}  // namespace

std::vector<Preemption> ChoosePreemptions(std::span<const PendingJob* const> waiting,
                                          std::span<const NodeState> nodes,
                                          std::span<const RunningJob> running,
                                          const PolicyConfig& policy, const PreemptConfig& config,
                                          const UsageByUser& usage, UnixMs now) {
  State s =
      MakeState(MakeContext(waiting, nodes, running, policy, config, usage, now), nodes, running);
  std::vector<Preemption> out;
  for (const PendingJob* w : waiting) {
    if (s.pool.empty()) break;
    if (std::optional<Preemption> p = PreemptFor(*w, s)) out.push_back(std::move(*p));
  }
  return out;
}

std::vector<Preemption> ChoosePreemptions(std::span<const PendingJob> waiting,
                                          std::span<const NodeState> nodes,
                                          std::span<const RunningJob> running,
                                          const PolicyConfig& policy, const PreemptConfig& config,
                                          const UsageByUser& usage, UnixMs now) {
  std::vector<const PendingJob*> ordered;
  ordered.reserve(waiting.size());
  for (const PendingJob& w : waiting) ordered.push_back(&w);
  return ChoosePreemptions(ordered, nodes, running, policy, config, usage, now);
}

std::vector<PreemptCandidate> ExplainPreemption(
    const PendingJob& job, std::span<const PendingJob* const> waiting,
    std::span<const NodeState> nodes, std::span<const RunningJob> running,
    const PolicyConfig& policy, const PreemptConfig& config, const UsageByUser& usage, UnixMs now) {
  Context c = MakeContext(waiting, nodes, running, policy, config, usage, now, &job.user);
  std::vector<std::pair<PreemptCandidate, int64_t>> judged;
  for (const RunningJob& v : running) {
    if (v.job == job.id) continue;
    PreemptCandidate pc{v.job, v.user, v.priority, false, Objection(job, v, c)};
    pc.eligible = pc.why.empty();
    if (pc.eligible) pc.why = EligibleText(job, v, c);
    judged.emplace_back(std::move(pc), RanMs(v, now));
  }
  std::sort(judged.begin(), judged.end(), ExplainOrder);
  std::vector<PreemptCandidate> out;
  for (auto& [pc, ran] : judged) out.push_back(std::move(pc));
  return out;
}

Hold PreemptingHold(const Preemption& d) {
  Hold hold{d.job, "", {}, d.parts, true};
  if (!d.parts.empty()) {
    hold.node = d.parts[0].node;
    hold.gpu_indices = d.parts[0].gpu_indices;
  }
  return hold;
}

}  // namespace trainq
