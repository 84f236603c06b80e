// Outage or partition (quorum.h). The argument behind the numbers is in docs/cluster.md.
#include "src/core/quorum.h"

#include <algorithm>

namespace trainq {

QuorumTimes MakeQuorumTimes(int64_t node_timeout_ms, int64_t heartbeat_interval_ms,
                            int64_t tick_ms) {
  QuorumTimes t;
  // A node heartbeats every interval: three missed beats, or a quarter of node_timeout.
  t.alive_ms = std::max(node_timeout_ms / 4, 3 * heartbeat_interval_ms);
  // The leader observes once a tick; a slower loop breaks the record rather than stretch it.
  t.gap_ms = std::max(node_timeout_ms / 16, 3 * tick_ms);
  t.round_ms = std::max<int64_t>(node_timeout_ms / 16, 100);
  // Long enough that the node's last heartbeat is older than alive_ms at the leader's last
  // observation before the round: alive + gap + round.
  t.quiet_ms = t.alive_ms + t.gap_ms + t.round_ms;
  // Past the fence (node_timeout / 2), a shim's check and its grace (at most a quarter).
  t.window_ms = node_timeout_ms;
  // The round that finds the outage must end before the jobs' last stamp lapses.
  t.outage_possible = t.quiet_ms + t.round_ms < node_timeout_ms / 2;
  return t;
}

bool StoreDownForMost(int no_store, int nodes) { return nodes > 0 && 2 * no_store > nodes; }

void MajorityWatch::Observe(int64_t now, int heartbeating, int nodes) {
  bool majority = nodes > 0 && 2 * heartbeating >= nodes;
  bool continuous = last_ && now - *last_ <= times_.gap_ms && now >= *last_;
  last_ = now;
  if (!majority) {
    since_.reset();
  } else if (!since_ || !continuous) {
    since_ = now;
  }
}

bool MajorityWatch::MayJudge(int64_t now) const {
  return since_ && last_ && now - *last_ <= times_.gap_ms && now - *since_ >= times_.window_ms;
}

}  // namespace trainq
