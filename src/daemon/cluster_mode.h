// A cluster (mode.h, docs/cluster.md): nodes that share one Redis store. Every node is a
// member: it heartbeats its GPUs and attempts, and its agent starts what is placed on it and
// stops what the store no longer places there. The node holding the leader lease also
// places (ClusterLeader, cluster_leader.h).
// Everything runs on the event-loop thread; the store's events arrive on their own thread
// and are posted to the loop.
#pragma once

#include "src/api/asio.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "src/daemon/cluster_key.h"
#include "src/daemon/cluster_leader.h"
#include "src/daemon/config.h"
#include "src/daemon/daemon.h"
#include "src/daemon/dependencies.h"
#include "src/daemon/liveness.h"
#include "src/daemon/mode.h"
#include "src/daemon/stager.h"
#include "src/os/clock.h"
#include "src/os/container_host.h"
#include "src/store/cluster.h"

namespace trainq {

class ClusterMode final : public Mode {
 public:
  struct Parts {
    boost::asio::io_context* io = nullptr;
    ClusterStore* store = nullptr;
    const Clock* clock = nullptr;
    const Config* config = nullptr;
    const DaemonOptions* options = nullptr;
    const GpuSampler* sampler = nullptr;
    const ClusterKey* key = nullptr;
    Agent* agent = nullptr;
    Scheduler* scheduler = nullptr;
    Dependencies* deps = nullptr;
    std::string node;
    std::string address;  // node_address, or the host name
    std::function<int()> cpu_slots;
    // Job `id` reached a done state (a lost node's attempt that may not run again).
    std::function<void(JobId)> job_ended;
    // This node's image names, reported for placement (docs/containers.md, "In a
    // cluster"); null without a container runtime.
    const ImageCensus* images = nullptr;
    // Fetches and copies what jobs submitted on other nodes ship (null: nothing is fetched).
    Stager* stager = nullptr;
    // The fence stamp renewed by a thread of its own (liveness.h); false in unit tests, which
    // drive the loop by hand: the loop's heartbeat then stamps at once.
    bool liveness_thread = false;
  };
  explicit ClusterMode(Parts parts);
  ~ClusterMode() override;

  // The file the shims read the heartbeat's freshness from (self-fencing).
  static std::string FenceFile(const StatePaths& paths) { return paths.state_dir + "/heartbeat"; }

  // The scheduler's site: the leader's view of every node, placing while it holds the lease.
  Scheduler::Site& site() override { return leader_; }
  bool AttemptsStartLater() const override { return true; }

  Status Check() const override;
  void Join() override;
  void OnTimer() override;
  void ArmTimer() override;
  void Stop() override;
  // Beats now: the leader places from this node's report.
  void Report() override { Beat(); }
  void SetApiUrl(std::string url) override { api_url_ = std::move(url); }

  // Notes the jobs with --collect patterns (STATE/collect-pending/ID): what their attempts
  // on other nodes leave comes back even when this daemon missed their end.
  void Stored(const std::vector<JobSpec>& specs, const std::vector<JobId>& ids) override;
  // A submit is judged against the largest node and GPU of the whole cluster.
  void Limits(SpecLimits& limits) override;
  void PinHere(JobSpec& spec) override { spec.nodes_allowed = {p_.node}; }
  // Its node stops it: it watches for the flag the store keeps.
  Status CancelElsewhere(const Job& job, const std::string& by, std::string* message) override;
  bool LogElsewhere(const Attempt& attempt) const override { return attempt.node != p_.node; }
  bool Cluster() const override { return true; }
  std::string StartingReason(const Job& job) const override;
  // One request to node `node`'s API, signed with the cluster key as this node's; the node's
  // address is looked up for `what` (said when there is none). kUnavailable: it did not answer.
  // Synchronous and short (its own timeout): a log chunk, an hour of GPU history and a step
  // are small.
  Result<HttpResponse> AskNode(const std::string& node, const std::string& method,
                               const std::string& path,
                               const std::map<std::string, std::string>& query,
                               const std::string& body, std::string_view what) override;
  Result<TunnelTarget> NodeTunnel(const std::string& node, const std::string& path,
                                  const std::map<std::string, std::string>& query,
                                  const std::string& protocol, std::string_view what) override;
  Result<nlohmann::json> Nodes() override;
  Result<std::vector<std::pair<std::string, std::string>>> NodeStates() override;
  Status Drain(const std::string& name, bool drain) override;
  Status RemoveNode(const std::string& name) override;
  // How long this node has had no store, for a peer telling an outage of the store from its
  // own partition (liveness.h).
  Result<nlohmann::json> StoreSeen() override;
  Shipping& shipping() override { return p_.stager ? *p_.stager : NoShipping(); }

 private:
  // A signed request of this node's for `path`?`query` of node `node`: its endpoint, target
  // and options (5 s, the Authorization, the peers' CA).
  Result<TunnelTarget> PeerRequest(const std::string& node, const std::string& method,
                                   const std::string& path,
                                   const std::map<std::string, std::string>& query,
                                   std::string_view what);
  // The attempts this node ran until it was judged lost while this daemon was away: their
  // ends are read and reported while the store still waits for them.
  void ReadoptLost();
  // Renews this node's record (GPUs, usage) and, on success, the shims' fence stamp.
  void Beat();
  void OnEvent(const std::string& event);
  // The agent's side: starts the attempts placed on this node, stops those the store took
  // away, carries out cancels asked for on other nodes.
  void SyncAssigned();
  void StartPlaced(const Job& job, const Attempt& a, const AttemptPart& part, int rank);
  // The end of an attempt placed here whose --cwd this node lacks: queued again without this
  // node while enough others are left, else failed.
  AttemptEnd CwdMissing(const Job& job, const Attempt& a, int rank);
  // The same for a reason of this node's: queued again without it, or failed.
  AttemptEnd NotHere(const Job& job, const Attempt& a, int rank, const std::string& reason);
  // Whether the job may start here now: what it ships is here (`staged` set), being fetched
  // (false; SyncAssigned runs again when it is done), or cannot be (false; the attempt ended).
  bool Staged(const Job& job, const Attempt& a, int rank, StagedPaths* staged);
  void AbandonLostHolders();
  void CollectOutputs(JobId id);
  // CollectOutputs for each noted job; a job over whose every attempt came back is unnoted.
  void CollectPending();
  // GET of a target from `node` (its API URL from the store), signed as this node.
  Stager::PeerGet PeerGetter(const std::string& to, const std::string& what);
  std::set<std::string> LostNodes();
  // Hands the nodes the last round read, but this one and the lost, to Liveness.
  void OfferPeers();
  // Liveness's parts: its own store connection, the peers' answers, the stamp.
  Liveness::Parts LivenessParts();
  static std::string HolderLost(const std::string& holder);
  NodeRecord OwnRecord() const;

  Parts p_;
  ClusterStore& store_;
  const Config& config_;
  ClusterLeader leader_;
  bool stopping_ = false;
  std::string api_url_;  // the first `listen` address as peers reach it; "" none
  std::string fence_file_;
  bool store_unreachable_ = false;  // logged once per outage
  std::unique_ptr<Liveness> liveness_;
  std::unique_ptr<EventSubscription> events_;
  // What the events' posts hold on to: gone with the mode.
  std::shared_ptr<ClusterMode*> self_ = std::make_shared<ClusterMode*>(this);
  boost::asio::steady_timer timer_;

  UnixMs next_beat_ = 0;  // clock time
};

}  // namespace trainq
