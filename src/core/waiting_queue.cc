#include "src/core/waiting_queue.h"

#include <algorithm>
#include <queue>

namespace trainq {

namespace {

// Higher priority first, then the attained-service band (PendingJob::service_band).
int64_t KeyLevel(const PendingJob& j) { return -int64_t{j.priority} * 2 + (j.service_band > 0); }

}  // namespace

bool WaitingQueue::emplace(JobId id, PendingJob job) {
  auto [it, added] = by_id_.emplace(id, std::move(job));
  if (!added) return false;
  const PendingJob& j = it->second;
  Queue& q = queues_[{KeyLevel(j), j.user}];
  Entry e{j.submitted_at, id, &j};
  // New submissions are the newest: almost always an append.
  if (q.entries.empty() || q.entries.back() < e) {
    q.entries.push_back(e);
  } else {
    q.entries.insert(std::lower_bound(q.entries.begin(), q.entries.end(), e), e);
  }
  ++q.live;
  return true;
}

size_t WaitingQueue::erase(JobId id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return 0;
  const PendingJob& j = it->second;
  auto q = queues_.find({KeyLevel(j), j.user});
  Entry e{j.submitted_at, id, &j};
  auto at = std::lower_bound(q->second.entries.begin(), q->second.entries.end(), e);
  at->job = nullptr;
  if (--q->second.live == 0) {
    queues_.erase(q);
  } else if (q->second.live * 2 < q->second.entries.size()) {
    std::erase_if(q->second.entries, [](const Entry& x) { return x.job == nullptr; });
  }
  by_id_.erase(it);
  return 1;
}

void WaitingQueue::clear() {
  queues_.clear();
  by_id_.clear();
}

const PendingJob* WaitingQueue::find(JobId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

// Users with equal standing interleave in submit order: a k-way merge of their queues.
void WaitingQueue::AppendTied(std::vector<const Queue*>& tied,
                              std::vector<const PendingJob*>& out) const {
  if (tied.size() == 1) {
    for (const Entry& e : tied[0]->entries) {
      if (e.job != nullptr) out.push_back(e.job);
    }
  } else if (!tied.empty()) {
    using It = std::vector<Entry>::const_iterator;
    using Cursor = std::pair<It, It>;
    auto later = [](const Cursor& a, const Cursor& b) { return *b.first < *a.first; };
    std::priority_queue<Cursor, std::vector<Cursor>, decltype(later)> heads(later);
    for (const Queue* q : tied) heads.push({q->entries.begin(), q->entries.end()});
    while (!heads.empty()) {
      Cursor c = heads.top();
      heads.pop();
      if (c.first->job != nullptr) out.push_back(c.first->job);
      if (++c.first != c.second) heads.push(c);
    }
  }
  tied.clear();
}

std::vector<const PendingJob*> WaitingQueue::Ordered(const UsageByUser& usage) const {
  std::vector<const PendingJob*> out;
  out.reserve(by_id_.size());
  auto it = queues_.begin();
  while (it != queues_.end()) {
    // One level (a priority, a band): its users by standing.
    std::vector<std::pair<double, const Queue*>> users;
    int64_t level = it->first.first;
    for (; it != queues_.end() && it->first.first == level; ++it) {
      auto u = usage.find(it->first.second);
      users.emplace_back(u == usage.end() ? 0.0 : u->second, &it->second);
    }
    std::stable_sort(users.begin(), users.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<const Queue*> tied;
    for (size_t i = 0; i < users.size(); ++i) {
      if (i > 0 && users[i].first != users[i - 1].first) AppendTied(tied, out);
      tied.push_back(users[i].second);
    }
    AppendTied(tied, out);
  }
  return out;
}

}  // namespace trainq
