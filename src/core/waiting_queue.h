// The waiting jobs in placement order, kept incrementally: one queue per (priority, user) in
// submit order, merged on demand by the users' fair-share standing. A scheduling pass over
// many thousands of waiting jobs thus never sorts them; only the few users are ordered.
// Reads like a std::map<JobId, PendingJob> (emplace, erase, count, iteration by id).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/core/placement.h"

namespace trainq {

class WaitingQueue {
 public:
  // Adds the job unless one with its id is there; returns whether it was added.
  bool emplace(JobId id, PendingJob job);
  size_t erase(JobId id);
  void clear();
  size_t size() const { return by_id_.size(); }
  bool empty() const { return by_id_.empty(); }
  size_t count(JobId id) const { return by_id_.count(id); }
  const PendingJob* find(JobId id) const;
  auto begin() const { return by_id_.begin(); }
  auto end() const { return by_id_.end(); }

  // Every job in placement order (PlacedBefore under `usage`); the pointers stay valid until
  // the job is erased.
  std::vector<const PendingJob*> Ordered(const UsageByUser& usage) const;

 private:
  struct Entry {
    UnixMs submitted_at;
    JobId id;
    const PendingJob* job;
    bool operator<(const Entry& o) const {
      return std::pair(submitted_at, id) < std::pair(o.submitted_at, o.id);
    }
  };
  // Sorted by (submitted_at, id); an erased job leaves a null entry until the queue is
  // compacted, so erasing is O(log n) and a pass walks contiguous memory.
  struct Queue {
    std::vector<Entry> entries;
    size_t live = 0;
  };
  using Key = std::pair<int64_t, std::string>;  // (-priority, user): higher priority first

  void AppendTied(std::vector<const Queue*>& tied, std::vector<const PendingJob*>& out) const;

  std::map<JobId, PendingJob> by_id_;
  std::map<Key, Queue> queues_;
};

}  // namespace trainq
