// The fence stamp's thread (liveness.h), driven round by round with fake parts: the loop's
// beats stamped, the thread's own beat while the loop is late, an outage of the store told
// from a partition of this node by asking the peers, and the watchdog.
#include "src/daemon/liveness.h"

#include <map>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

namespace trainq {
namespace {

constexpr int64_t kNt = 10'000;  // node_timeout
constexpr int64_t kBeat = 200;

class LivenessTest : public ::testing::Test {
 protected:
  LivenessTest() { Make(); }

  void Make() {
    Liveness::Parts p;
    p.times = MakeQuorumTimes(kNt, kBeat, kBeat);
    p.heartbeat_interval_ms = kBeat;
    p.fence_after_ms = kNt / 2;
    p.stall_ms = 2000;
    p.renew = [this](const NodeRecord& r) -> Result<UnixMs> {
      renewed_.push_back(r.name);
      if (!store_up_) return Status::Unavailable("store unreachable: redis 127.0.0.1:1");
      return UnixMs{1};
    };
    p.ask = [this](const Peer& peer, int64_t timeout_ms) -> Result<PeerView> {
      std::lock_guard lock(asked_mu_);  // the peers are asked at once, each on a thread
      asked_.push_back(peer.name);
      EXPECT_EQ(timeout_ms, times().round_ms);
      auto it = views_.find(peer.name);
      if (it == views_.end()) return Status::Unavailable("no answer");
      return it->second;
    };
    p.stamp = [this](int64_t at) {
      stamps_.push_back(at);
      return Status::Ok();
    };
    p.now = [this] { return now_; };
    live_ = std::make_unique<Liveness>(std::move(p));
  }
  QuorumTimes times() const { return MakeQuorumTimes(kNt, kBeat, kBeat); }
  void Record() {
    NodeRecord r;
    r.name = "n1";
    live_->OfferRecord(r);
  }
  void Peers(std::vector<std::string> names) {
    std::vector<Peer> peers;
    for (std::string& n : names) peers.push_back({n, "http://127.0.0.1:1"});
    live_->OfferPeers(std::move(peers));
  }
  PeerView NoStore() const { return {times().quiet_ms + 1, 0}; }
  PeerView SeesStore() const { return {0, 0}; }

  int64_t now_ = 1'000'000;
  bool store_up_ = true;
  std::vector<std::string> renewed_;
  std::mutex asked_mu_;
  std::vector<std::string> asked_;
  std::map<std::string, PeerView> views_;
  std::vector<int64_t> stamps_;
  std::unique_ptr<Liveness> live_;
};

TEST_F(LivenessTest, UnthreadedTheLoopsBeatStampsAtOnce) {
  live_->LoopBeat(now_ - 5);
  EXPECT_EQ(stamps_, std::vector<int64_t>{now_ - 5});
}

TEST_F(LivenessTest, ARecentLoopBeatIsStampedWithoutABeatOfItsOwn) {
  Record();
  live_->LoopBeat(now_);
  now_ += kBeat;
  live_->Round();
  EXPECT_TRUE(renewed_.empty());
  EXPECT_EQ(stamps_, std::vector<int64_t>{now_ - kBeat});  // the same beat is stamped once
}

TEST_F(LivenessTest, ALateLoopIsCoveredByTheThreadsOwnBeat) {
  Record();
  live_->LoopBeat(now_);
  stamps_.clear();
  now_ += 10 * kBeat;  // the loop is stuck in a request
  live_->Round();
  EXPECT_EQ(renewed_, std::vector<std::string>{"n1"});
  EXPECT_EQ(stamps_, std::vector<int64_t>{now_});
  EXPECT_EQ(live_->NoStoreMs(), 0);
}

TEST_F(LivenessTest, NothingToBeatBeforeTheLoopsFirstRecord) {
  now_ += 10 * kBeat;
  live_->Round();
  EXPECT_TRUE(renewed_.empty());
  EXPECT_TRUE(stamps_.empty());
}

TEST_F(LivenessTest, WithoutAStoreTheLastStampHoldsUntilQuiet) {
  Record();
  Peers({"n2", "n3"});
  store_up_ = false;
  views_ = {{"n2", NoStore()}, {"n3", NoStore()}};
  now_ += times().quiet_ms;  // not more than quiet yet
  live_->Round();
  EXPECT_TRUE(asked_.empty());
  EXPECT_TRUE(stamps_.empty());
  EXPECT_GT(live_->NoStoreMs(), 0);
}

TEST_F(LivenessTest, AnOutageOfTheStoreForMostKeepsTheJobsRunning) {
  Record();
  Peers({"n2", "n3"});
  store_up_ = false;
  views_ = {{"n2", NoStore()}, {"n3", SeesStore()}};
  now_ += times().quiet_ms + 1;
  live_->Round();
  EXPECT_EQ(asked_.size(), 2u);
  EXPECT_EQ(stamps_, std::vector<int64_t>{now_});  // 2 of 3 without a store
  now_ += kBeat;
  live_->Round();
  EXPECT_EQ(stamps_.size(), 2u);
}

TEST_F(LivenessTest, ANodeCutOffAloneStampsNothing) {
  Record();
  Peers({"n2", "n3"});
  store_up_ = false;
  views_ = {{"n2", SeesStore()}, {"n3", SeesStore()}};
  now_ += times().quiet_ms + 1;
  live_->Round();
  EXPECT_TRUE(stamps_.empty());
  // A peer that was without a store only briefly is no witness of an outage.
  views_ = {{"n2", {times().quiet_ms - 1, 3}}, {"n3", SeesStore()}};
  live_->Round();
  EXPECT_TRUE(stamps_.empty());
}

TEST_F(LivenessTest, PeersThatDoNotAnswerCountAsSeeingTheStore) {
  Record();
  Peers({"n2", "n3", "n4"});
  store_up_ = false;
  views_ = {{"n2", NoStore()}};  // n3 and n4 are silent: 2 of 4 is not more than half
  now_ += times().quiet_ms + 1;
  live_->Round();
  EXPECT_TRUE(stamps_.empty());
  views_["n3"] = NoStore();
  live_->Round();
  EXPECT_EQ(stamps_.size(), 1u);
}

TEST_F(LivenessTest, APeerThatCountsMoreNodesRaisesTheBar) {
  Record();
  Peers({"n2"});
  store_up_ = false;
  views_ = {{"n2", {times().quiet_ms + 1, 4}}};  // n2 knows of four nodes
  now_ += times().quiet_ms + 1;
  live_->Round();
  EXPECT_TRUE(stamps_.empty());  // 2 of 4
}

TEST_F(LivenessTest, TwoNodesBothWithoutAStoreRunOnOneCutOffStops) {
  Record();
  Peers({"n2"});
  store_up_ = false;
  now_ += times().quiet_ms + 1;
  views_ = {{"n2", SeesStore()}};
  live_->Round();
  EXPECT_TRUE(stamps_.empty());
  views_ = {{"n2", NoStore()}};
  live_->Round();
  EXPECT_EQ(stamps_.size(), 1u);
}

TEST_F(LivenessTest, AloneInTheClusterAnOutageIsAlwaysTheStores) {
  Record();
  store_up_ = false;
  now_ += times().quiet_ms + 1;
  live_->Round();
  EXPECT_EQ(stamps_.size(), 1u);
}

TEST_F(LivenessTest, TooShortANodeTimeoutNeverClaimsAnOutage) {
  Liveness::Parts p;
  p.times = MakeQuorumTimes(4000, kBeat, kBeat);
  p.heartbeat_interval_ms = kBeat;
  p.fence_after_ms = 2000;
  p.stall_ms = 2000;
  p.renew = [](const NodeRecord&) -> Result<UnixMs> { return Status::Unavailable("away"); };
  p.ask = [this](const Peer& peer, int64_t) -> Result<PeerView> {
    std::lock_guard lock(asked_mu_);
    asked_.push_back(peer.name);
    return NoStore();
  };
  p.stamp = [this](int64_t at) {
    stamps_.push_back(at);
    return Status::Ok();
  };
  p.now = [this] { return now_; };
  Liveness live(std::move(p));
  NodeRecord r;
  r.name = "n1";
  live.OfferRecord(r);
  now_ += 60'000;
  live.Round();
  EXPECT_TRUE(asked_.empty());
  EXPECT_TRUE(stamps_.empty());
}

TEST_F(LivenessTest, StampsNeverGoBackwards) {
  Record();
  live_->LoopBeat(now_);
  live_->LoopBeat(now_ - 100);  // an older beat reported late
  EXPECT_EQ(stamps_, std::vector<int64_t>{now_});
}

TEST_F(LivenessTest, WhatTheLoopDoesIsNamedForTheWatchdog) {
  SetLoopActivity("POST", "/v1/jobs");
  EXPECT_EQ(LoopActivity(), "POST /v1/jobs");
  SetLoopActivity("idle");
  EXPECT_EQ(LoopActivity(), "idle");
}

}  // namespace
}  // namespace trainq
