// A cluster's leadership (cluster_mode.h, docs/cluster.md): the lease every node contends
// for each round, and — while this node holds it — the scheduler's site over the whole
// cluster: a view of every node's last report with the store's active attempts as holdings,
// placements written to the store (fenced by the lease epoch) for the chosen node to start,
// and nodes whose heartbeat lapsed judged lost.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "src/api/http.h"
#include "src/core/quorum.h"
#include "src/daemon/config.h"
#include "src/daemon/dependencies.h"
#include "src/daemon/scheduler.h"
#include "src/os/clock.h"
#include "src/store/cluster.h"

namespace trainq {

// A node's state as GET /v1/nodes and the event stream name it: "up", "lost" or "drained".
std::string NodeStateName(const NodeRecord& r);

class ClusterLeader final : public Scheduler::Site {
 public:
  struct Parts {
    ClusterStore* store = nullptr;
    const Clock* clock = nullptr;
    const Config* config = nullptr;
    Scheduler* scheduler = nullptr;
    Dependencies* deps = nullptr;
    std::string node;
    // Job `id` reached a done state (a lost node's attempt that may not run again).
    std::function<void(JobId)> job_ended;
  };
  ClusterLeader(Parts parts, QuorumTimes times)
      : p_(std::move(parts)),
        store_(*p_.store),
        config_(*p_.config),
        majority_(times),
        times_(times) {}

  // Scheduler::Site: the leader places, over the view of every node it reads each pass.
  bool Places() const override { return leader_; }
  std::vector<NodeState> PassNodes() override;
  std::vector<NodeState> LastNodes() const override { return view_.nodes; }
  RunningUses Running() override;
  // The placement written to the store (fenced by the lease); the chosen node starts it.
  Status Place(const Job& job, const StartDecision& decision) override;
  // Through the store: each node running a part of the victim stops it (SyncAssigned).
  Status Preempt(const Job& victim, const ShimControl& control) override;
  Status AddParts(const Job& job, std::span<const NodeGpus> parts) override;
  bool ReadsLastAttempt() const override { return true; }

  // Takes or renews the lease and reads the nodes (every node does, so that a new leader
  // knows whether most nodes have been heartbeating); a node that gains the lease reloads the
  // queue and schedules, and the leader judges the nodes whose heartbeat lapsed.
  void LeadOrFollow();
  // The nodes as the last round read them; empty when it could not.
  const std::vector<NodeRecord>& LastRecords() const { return records_; }
  // The daemon stops: another node need not wait for the lease to lapse.
  void Resign();
  // GET /v1/nodes's document: every node, its GPUs with the memory a job could use there now, and
  // its attempts (asking for the lease as it reads, as a round would).
  Result<nlohmann::json> Nodes();

 private:
  // The leader: marks the nodes whose heartbeat lapsed past node_timeout lost, while at least
  // half of the nodes heartbeat and have for a whole node_timeout (quorum.h): when most lapse
  // together, the store was away, not they.
  void CheckLostNodes(UnixMs store_now);
  // Reads the nodes and notes whether at least half of those not lost heartbeat.
  void ObserveNodes(UnixMs store_now);
  // Every node's last record, with the store's active attempts as holdings.
  Status RefreshView();
  // A MASTER_PORT of `node`'s range that no active attempt there holds, now held in the view;
  // kUnavailable (and the job's reason set) when every one is.
  Result<int> TakePortOn(JobId job, const NodeRecord& node);
  Result<AttemptPart> PartOn(JobId job, int n, const NodeGpus& want) const;

  Parts p_;
  ClusterStore& store_;
  const Config& config_;
  bool leader_ = false;
  LeaderLease lease_;
  int64_t fenced_epoch_ = 0;  // the epoch the store's fenced writes carry; 0: none yet
  MajorityWatch majority_;
  QuorumTimes times_;
  std::vector<NodeRecord> records_;  // the last round's read of the nodes
  bool holding_back_ = false;        // logged once while lapsed nodes are not judged
  // The view of the cluster for a pass: the nodes' records, the policy's nodes, and the
  // MASTER_PORTs active attempts hold on each node.
  struct View {
    std::map<std::string, NodeRecord> records;
    std::vector<NodeState> nodes;
    std::map<std::string, std::set<int>> ports;
    std::vector<Job> active;  // jobs with an active attempt, anywhere
  };
  View view_;
};

}  // namespace trainq
