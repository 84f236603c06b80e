// Outage or partition (quorum.h): the times, the node's majority rule, the leader's watch, and
// the argument that joins them — a majority that keeps its jobs running is one the leader sees
// lapsed, at its last observation before the round that found it.
#include "src/core/quorum.h"

#include <gtest/gtest.h>

namespace trainq {
namespace {

constexpr int64_t kSec = 1000;

TEST(QuorumTimes, TheDefaultsLeaveRoomToLearnOfAnOutage) {
  // node_timeout 300 s, heartbeat_interval 10 s, the cluster timer every 5 s.
  QuorumTimes t = MakeQuorumTimes(300 * kSec, 10 * kSec, 5 * kSec);
  EXPECT_EQ(t.alive_ms, 75 * kSec);
  EXPECT_EQ(t.quiet_ms, t.alive_ms + t.gap_ms + t.round_ms);
  EXPECT_LT(t.quiet_ms + t.round_ms, 150 * kSec);  // before the fence (node_timeout / 2)
  EXPECT_TRUE(t.outage_possible);
  EXPECT_EQ(t.window_ms, 300 * kSec);
}

TEST(QuorumTimes, TooShortANodeTimeoutFencesAsAPartitionDoes) {
  // 4 s with beats every 200 ms: no round could end before the fence lapses.
  QuorumTimes t = MakeQuorumTimes(4 * kSec, 200, 200);
  EXPECT_FALSE(t.outage_possible);
  EXPECT_TRUE(MakeQuorumTimes(10 * kSec, 200, 200).outage_possible);
  // A heartbeat every quarter of node_timeout (the most the config allows) leaves no room.
  EXPECT_FALSE(MakeQuorumTimes(300 * kSec, 75 * kSec, 5 * kSec).outage_possible);
}

TEST(StoreDownForMost, MoreThanHalfItselfIncluded) {
  EXPECT_TRUE(StoreDownForMost(1, 1));   // alone: nobody could run its jobs elsewhere
  EXPECT_FALSE(StoreDownForMost(1, 2));  // two nodes, the other sees the store
  EXPECT_TRUE(StoreDownForMost(2, 2));
  EXPECT_FALSE(StoreDownForMost(2, 4));  // exactly half is not more than half
  EXPECT_TRUE(StoreDownForMost(3, 5));
  EXPECT_FALSE(StoreDownForMost(0, 0));
}

TEST(MajorityWatch, JudgesOnlyAfterAWholeWindowOfMajority) {
  QuorumTimes t = MakeQuorumTimes(10 * kSec, 200, 200);
  MajorityWatch w(t);
  EXPECT_FALSE(w.MayJudge(0));
  int64_t now = 0;
  for (; now < t.window_ms; now += 200) {
    w.Observe(now, 2, 3);
    EXPECT_FALSE(w.MayJudge(now)) << now;
  }
  w.Observe(now, 2, 3);
  EXPECT_TRUE(w.MayJudge(now));
  EXPECT_EQ(w.since(), 0);
}

TEST(MajorityWatch, HalfIsEnoughButLessIsAnOutage) {
  QuorumTimes t = MakeQuorumTimes(10 * kSec, 200, 200);
  MajorityWatch w(t);
  w.Observe(0, 1, 2);  // two nodes, one beating: the other is judged as a node, not an outage
  EXPECT_EQ(w.since(), 0);
  w.Observe(200, 1, 3);  // most lapsed together: the store, not they
  EXPECT_FALSE(w.since().has_value());
  w.Observe(400, 3, 3);
  EXPECT_EQ(w.since(), 400);
  EXPECT_FALSE(w.MayJudge(400 + t.window_ms - 1));
}

TEST(MajorityWatch, AGapOrALostReadStartsAgain) {
  QuorumTimes t = MakeQuorumTimes(10 * kSec, 200, 200);
  MajorityWatch w(t);
  w.Observe(0, 3, 3);
  w.Observe(t.gap_ms + 1, 3, 3);  // the loop was away longer than the gap: the store may have been
  EXPECT_EQ(w.since(), t.gap_ms + 1);
  w.Lost();
  EXPECT_FALSE(w.since().has_value());
  w.Observe(t.gap_ms + 200, 3, 3);
  EXPECT_EQ(w.since(), t.gap_ms + 200);
  // Judging also needs a recent observation.
  for (int64_t now = t.gap_ms + 400; now <= 3 * t.window_ms; now += 200) w.Observe(now, 3, 3);
  EXPECT_TRUE(w.MayJudge(3 * t.window_ms));
  EXPECT_FALSE(w.MayJudge(3 * t.window_ms + t.gap_ms + 1));
}

// The argument of docs/cluster.md, "When the store is away", replayed: nodes lose the store at
// `lost_at`; a node that asks at `round` hears "no store for quiet" from every node whose last
// heartbeat landed before round - quiet (+ the round's length). At the leader's last
// observation before the round, those nodes' heartbeats are older than alive: the majority
// fails there, so the leader cannot judge anyone within a window of it.
TEST(Quorum, AMajorityWithoutAStoreIsAMajorityTheLeaderSeesLapsed) {
  for (int64_t nt : {10 * kSec, 60 * kSec, 300 * kSec}) {
    int64_t beat = std::max<int64_t>(200, nt / 50);
    int64_t tick = beat;
    QuorumTimes t = MakeQuorumTimes(nt, beat, tick);
    ASSERT_TRUE(t.outage_possible) << nt;
    // The worst case for the argument: the peer answers at the round's end, and the leader's
    // last observation is a whole gap before the round began.
    int64_t round = 100 * nt;
    int64_t answered = round + t.round_ms;
    // The latest a heartbeat can have landed for "no store for more than quiet".
    int64_t last_beat = answered - t.quiet_ms - 1;
    int64_t observed = round - t.gap_ms;
    EXPECT_GT(observed - last_beat, t.alive_ms) << nt;
    // So three nodes of five without a store leave two beating at that observation.
    MajorityWatch w(t);
    for (int64_t now = round - 2 * nt; now < observed; now += tick) w.Observe(now, 5, 5);
    w.Observe(observed, 2, 5);
    for (int64_t now = observed + tick; now <= round + nt / 2; now += tick) {
      w.Observe(now, 5, 5);  // even if they all came back at once
      EXPECT_FALSE(w.MayJudge(now)) << nt << " " << now;
    }
  }
}

}  // namespace
}  // namespace trainq
