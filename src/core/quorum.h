// Telling an outage of the cluster's store from a partition of one node (docs/cluster.md,
// "When the store is away"). Pure: times in, judgements out; the daemon's Liveness thread and
// the leader act on them.
//
// Two rules meet here. A node cut off from the store keeps its jobs running only while more
// than half of the cluster's nodes, itself included, say they have had no store for longer
// than `quiet`, counted from the answer of their last heartbeat the store took
// (StoreDownForMost). The leader judges a node lost only after at least half of the nodes have
// heartbeat within `alive` at every one of its observations, with no gap longer than `gap`,
// for a whole node_timeout (MajorityWatch). The times are chosen so that both cannot hold at
// once (QuorumTimes): a node's "no store for `quiet`", heard at most `round` after a round
// began, means its last heartbeat is older than `alive` at the leader's last observation
// before that round — so a majority that keeps its jobs running is a majority the leader sees
// lapsed, and it then judges nobody.
#pragma once

#include <cstdint>
#include <optional>

namespace trainq {

struct QuorumTimes {
  int64_t alive_ms = 0;   // the leader counts a node heartbeating when it beat this recently
  int64_t gap_ms = 0;     // the most time between two of the leader's observations it bridges
  int64_t round_ms = 0;   // a round of asking the peers ends this long after it began
  int64_t quiet_ms = 0;   // a node says "no store" after this long without one
  int64_t window_ms = 0;  // how long the majority must have held before a node is judged lost
  // Whether a node can learn of an outage before its jobs' fence lapses (fence_after =
  // node_timeout / 2): false when heartbeat_interval is too long for node_timeout, and a node
  // cut off from the store then always stops its jobs, as a partitioned node does.
  bool outage_possible = false;
};

// From the config: node_timeout, heartbeat_interval and the cluster timer's period.
QuorumTimes MakeQuorumTimes(int64_t node_timeout_ms, int64_t heartbeat_interval_ms,
                            int64_t tick_ms);

// Whether `no_store` of `nodes` (the asker included in both) is more than half.
bool StoreDownForMost(int no_store, int nodes);

// The leader's record of whether at least half of the nodes heartbeat. Observe at each round
// (store clock); a failed read of the nodes is Lost(). MayJudge says whether that has held
// continuously, observations no more than gap_ms apart, for window_ms.
class MajorityWatch {
 public:
  explicit MajorityWatch(QuorumTimes times) : times_(times) {}

  // `heartbeating` of `nodes` (not lost) beat within alive_ms at store time `now`.
  void Observe(int64_t now, int heartbeating, int nodes);
  void Lost() { since_.reset(); }
  bool MayJudge(int64_t now) const;
  // Since when the majority has held (store clock); nullopt while it does not.
  std::optional<int64_t> since() const { return since_; }

 private:
  QuorumTimes times_;
  std::optional<int64_t> since_;
  std::optional<int64_t> last_;
};

}  // namespace trainq
