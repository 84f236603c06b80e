#include "src/sim/preempt_filter.h"

#include <algorithm>
#include <set>
#include <string>

namespace trainq::sim {

namespace {

double HoursOf(const UsageByUser& usage, const std::string& user) {
  auto it = usage.find(user);
  return it == usage.end() ? 0.0 : it->second;
}

bool Candidate(const RunningJob& v, const PreemptConfig& c, UnixMs now) {
  bool spared =
      v.preempted_in_a_row >= 2 && c.spare_ms > 0 && now - v.last_preempted_at < c.spare_ms;
  return v.preemptible && !v.stopping && now - v.started_at >= c.min_runtime_ms && !spared;
}

// The rules' own reading of their inputs (src/core/preemption.cc): the mean of the users'
// hours, "large" and "aged".
double FairHours(std::span<const PendingJob* const> ready, std::span<const RunningJob> running,
                 const UsageByUser& usage) {
  std::set<std::string> users;
  for (const PendingJob* w : ready) users.insert(w->user);
  for (const RunningJob& v : running) users.insert(v.user);
  double sum = 0;
  for (const std::string& u : users) sum += HoursOf(usage, u);
  return users.empty() ? 0.0 : sum / static_cast<double>(users.size());
}

bool LargeAndAged(const PendingJob& w, size_t largest, const PolicyConfig& policy, UnixMs now) {
  bool large = w.num_nodes > 1 || (w.gpus > 0 && largest > 0 && 2 * size_t(w.gpus) >= largest);
  UnixMs since = std::max(w.queued_at > 0 ? w.queued_at : w.submitted_at, w.not_before);
  return large && policy.aging_ms > 0 && now - since > policy.aging_ms;
}

}  // namespace

std::vector<const PendingJob*> WorthAsking(std::span<const PendingJob* const> ready,
                                           std::span<const NodeState> nodes,
                                           std::span<const RunningJob> running,
                                           const PolicyConfig& policy, const PreemptConfig& config,
                                           const UsageByUser& usage, UnixMs now) {
  double fair = FairHours(ready, running, usage);
  // The users with a candidate, those of them above their fair share, and the lowest priority
  // of a candidate.
  std::set<std::string> with_victims, above;
  int lowest_priority = 0;
  bool any = false, served = false;  // served: a candidate past the attained-service threshold
  for (const RunningJob& v : running) {
    if (!Candidate(v, config, now)) continue;
    size_t gpus = 0;
    for (const NodeGpus& p : v.parts) gpus += p.gpu_indices.size();
    served = served || v.attained_gpu_ms + double(gpus) * double(now - v.started_at) >=
                           double(config.attained_service_ms);
    lowest_priority = any ? std::min(lowest_priority, v.priority) : v.priority;
    any = true;
    with_victims.insert(v.user);
    if (HoursOf(usage, v.user) > fair) above.insert(v.user);
  }
  if (!any) return {};
  size_t largest = 0;
  for (const NodeState& n : nodes) largest = std::max(largest, n.gpus.size());
  std::vector<const PendingJob*> out;
  std::set<std::string> seen;
  for (const PendingJob* w : ready) {
    bool first = seen.insert(w->user).second;
    bool by_priority = int64_t{w->priority} >= int64_t{lowest_priority} + config.priority_gap;
    bool others = with_victims.size() > 1 || !with_victims.count(w->user);
    bool by_share = config.for_fair_share && HoursOf(usage, w->user) < fair && !above.empty();
    bool by_aging = config.for_aging && others && LargeAndAged(*w, largest, policy, now);
    bool by_service = config.for_attained_service && config.attained_service_ms > 0 && served &&
                      w->service_band == 0;
    if (first || by_priority || by_share || by_aging || by_service) out.push_back(w);
  }
  return out;
}

}  // namespace trainq::sim
