// The daemon's insides, shared by daemon.cc (loop), agent.cc (attempts), scheduler.cc
// (placement passes) and routes.cc (the API); the roles already objects of their own
// (Authenticator, GpuSampler, SubmitBatcher, TokenRoutes, Dependencies, RuntimeConfig) are
// held here.
// Everything runs on the one event-loop thread: no locks.
//
// The OS reaches it only through seams given to the constructor: the clock, the GPU probe,
// the shim launcher and the store. Unit tests (daemon_test.cc) build it from fakes and drive
// it through its public face: the API (Handle), the timers' callbacks and the loop
// (io.poll()), with time moved by hand. See docs/architecture.md.
#pragma once

#include "src/api/asio.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/api/http.h"
#include "src/core/auth.h"
#include "src/core/fair_share.h"
#include "src/core/placement.h"
#include "src/core/ports.h"
#include "src/core/spec.h"
#include "src/core/waiting_queue.h"
#include "src/core/workload_mix.h"
#include "src/daemon/agent.h"
#include "src/daemon/authenticator.h"
#include "src/daemon/cluster_key.h"
#include "src/daemon/config.h"
#include "src/daemon/daemon.h"
#include "src/daemon/dependencies.h"
#include "src/daemon/gpu_sampler.h"
#include "src/daemon/notifier.h"
#include "src/daemon/outcome.h"
#include "src/daemon/runtime_config.h"
#include "src/daemon/scheduler.h"
#include "src/daemon/shim_launcher.h"
#include "src/daemon/submit_batcher.h"
#include "src/daemon/token_routes.h"
#include "src/os/cgroup.h"
#include "src/os/clock.h"
#include "src/os/gpu/gpu_probe.h"
#include "src/os/system.h"
#include "src/store/cluster.h"
#include "src/store/store.h"

namespace trainq {

// What the daemon is built from: each part is the OS (or the store) behind an interface.
struct DaemonSeams {
  std::unique_ptr<Store> store;
  ProbeChoice probe;
  std::unique_ptr<ShimLauncher> launcher;
  const Clock* clock = nullptr;  // outlives the daemon
  // Sends a notification (a webhook POST, a mail); null: the real one (notify.cc).
  DeliverFn deliver{};
  // A cluster's key (cluster_key_file); a cluster store without one is refused at Start.
  ClusterKey cluster_key{};
  // Where attempts' cgroups are (SetUpCgroups); off by default, as unit tests want.
  CgroupHost cgroups{CgroupVersion::kNone, "", "no cgroup root"};
};

class DaemonImpl : private Scheduler::Site {
 public:
  // `io` is the event loop the daemon (and the launcher) run on; it outlives the daemon.
  DaemonImpl(boost::asio::io_context& io, DaemonOptions options, Config config, DaemonSeams seams);
  DaemonImpl(const DaemonImpl&) = delete;
  DaemonImpl& operator=(const DaemonImpl&) = delete;

  // Open() then Serve(): what `trainqd` does.
  Status Start();
  // Re-adopts the attempts a previous daemon left, takes the first GPU sample, applies the
  // run-time settings and asks for a first pass. Touches no socket, signal or timer.
  Status Open();
  // Listens on the socket, handles SIGTERM/SIGINT, arms the GPU sample timer.
  Status Serve();
  // The `listen` addresses, each logged with the port it got.
  Status ListenTcp();
  void RequestStop();

  // The API: every route, answered through `respond` now or from the loop later.
  void Handle(HttpRequest request, Responder respond);

  // What the timers run. The real daemon arms asio timers for them; tests call them after
  // moving the fake clock.
  void OnSampleTimer();
  void OnWakeupTimer() { scheduler_->OnWakeupTimer(); }
  // When the next pass is due on time alone (OOM backoff over, a job reaching the aging
  // limit, a ramp-up window closing, a write the state dir refused to try again); 0 when
  // nothing waits on time.
  UnixMs NextWakeup() const { return scheduler_->NextWakeup(); }

  // Cluster mode (cluster.cc; nothing without a cluster's store): subscribes to the
  // cluster's events, beats once, takes part in the leader election and starts what is
  // placed here. Arms no timer: Serve() arms the cluster timer, tests call OnClusterTimer().
  void StartCluster();
  // Beats when due (and then syncs what is placed here), takes or renews the lease.
  void OnClusterTimer();

 private:
  friend class Routes;

  // daemon.cc
  // Returns whether the GPUs changed since the last sample, or sampling began to fail or
  // works again.
  bool SampleGpus();
  void ArmSampleTimer();
  Status OpenSocketToUsers();

  void RequestSchedule() { scheduler_->RequestSchedule(); }

  // The scheduler's site (scheduler.h): one machine, or a cluster (cluster.cc).
  bool Places() const override;
  std::vector<NodeState> PassNodes() override;
  std::vector<NodeState> LastNodes() const override;
  RunningUses Running() override;
  Status Start(const Job& job, const StartDecision& decision) override {
    return StartAttempt(job, decision);
  }
  bool ReadsLastAttempt() const override { return cluster_ != nullptr; }
  // This node alone, as the placement policy sees it.
  std::vector<NodeState> BuildNodes() const;

  // Starts a pass's decision: here (the agent), or, in a cluster, on the node it names.
  // kUnavailable when the job must wait for a MASTER_PORT (Agent::StartLocal).
  Status StartAttempt(const Job& job, const StartDecision& decision);

  // daemon.cc
  Status CancelJob(const Job& job, std::string* message);
  // What follows a waiting job's cancel once the store has it (CancelWaiting or, for a
  // request that cancels many, CancelWaitingMany): the queue, reasons, dependents, notice.
  void CancelledWaiting(const Job& job, std::string* message);

  // notify.cc: job `id` reached a done state here (its end, a cancel, a dependency that
  // failed): its notifications (--notify, --mail, notify_url) are handed to notifier_.
  void JobEnded(JobId id);
  std::string WithGpuModels(const std::string& record) const;
  Status StartNotifier();

  // cluster.cc (docs/cluster.md): only where the store is a cluster's (cluster_ set). Every
  // node runs the agent part: heartbeats, and runs what the leader placed on it. The node
  // holding the leader lease also schedules, over every node's GPUs.
  void ArmClusterTimer();
  // Renews this node's record (GPUs, usage) and, on success, the shims' fence stamp.
  void Beat();
  // Takes or renews the leader lease; a node that gains it reloads the queue and schedules.
  void LeadOrFollow();
  // The leader: marks the nodes whose heartbeat lapsed past node_timeout lost.
  void CheckLostNodes(UnixMs store_now);
  void OnClusterEvent(const std::string& event);
  // The agent: starts the attempts placed on this node, stops those the store took away,
  // carries out cancels asked for on other nodes.
  void SyncAssigned();
  // The end of an attempt placed here whose --cwd this node lacks: queued again without this
  // node while enough others are left, else failed.
  AttemptEnd CwdMissing(const Job& job, const Attempt& a, int rank);
  // This node's GPUs and their use by its attempts, as NodeRecord::info.
  std::string NodeInfo() const;
  NodeRecord OwnRecord() const;
  Status RefreshClusterView();
  // The leader's half of a start: the placement written to the store (fenced by the
  // lease); the node's agent starts it.
  Status PlaceOnNode(const Job& job, const StartDecision& decision);
  // A submit is judged against the largest node and GPU of the whole cluster.
  void ClusterLimits(SpecLimits& limits);
  void NodesRoute(Responder& respond);
  void DrainRoute(const std::string& name, bool drain, Responder& respond);
  void ProxyLog(const std::string& path, const std::map<std::string, std::string>& query,
                const Job& job, const Attempt& attempt, Responder& respond);

  // After the settings in force changed (at start, `trainq config set`): what derives from
  // them.
  void SettingsChanged();

  boost::asio::io_context& io_;
  DaemonOptions options_;
  RuntimeConfig settings_;  // the config file's, with `trainq config set` on top
  const Config& config_;    // settings_.config(): what every part reads
  std::unique_ptr<Store> store_;
  const Clock& clock_;
  GpuSampler sampler_;  // the GPUs as last sampled
  std::string node_;
  int cpu_slots_ = 1;

  std::unique_ptr<HttpServer> server_;
  DeliverFn deliver_;
  // Declared after everything its thread's deliveries read, so it stops first.
  std::unique_ptr<Notifier> notifier_;
  boost::asio::signal_set signals_{io_};
  boost::asio::steady_timer sample_timer_{io_};
  std::unique_ptr<Agent> agent_;            // the attempts this node runs
  std::unique_ptr<Scheduler> scheduler_;    // the queue's index, passes, reasons, fair share
  std::unique_ptr<SubmitBatcher> submits_;  // the group commit of submits
  bool stopping_ = false;

  // Cluster (cluster.cc); cluster_ is store_ seen as a cluster's store, or null.
  ClusterStore* cluster_ = nullptr;
  bool leader_ = false;
  LeaderLease lease_;
  int64_t fenced_epoch_ = 0;             // the epoch the store's fenced writes carry; 0: none yet
  std::string address_;                  // node_address, or the host name
  std::string api_url_;                  // the first `listen` address as peers reach it; "" none
  ClusterKey cluster_key_;               // DaemonSeams::cluster_key
  std::unique_ptr<Authenticator> auth_;  // who sent a request (after what it reads)
  std::unique_ptr<TokenRoutes> tokens_;  // the token API
  std::unique_ptr<Dependencies> deps_;   // moves jobs whose dependencies changed
  std::string fence_file_;               // the heartbeat stamp the attempts' shims read
  bool store_unreachable_ = false;       // logged once per outage
  std::string last_info_;                // NodeRecord::info last sent
  std::unique_ptr<EventSubscription> events_;
  boost::asio::steady_timer cluster_timer_{io_};
  UnixMs next_beat_ = 0;  // clock_ time
  // The leader's view of the cluster for a pass: the nodes' records, the policy's nodes,
  // and the MASTER_PORTs active attempts hold on each node.
  struct ClusterView {
    std::map<std::string, NodeRecord> records;
    std::vector<NodeState> nodes;
    std::map<std::string, std::set<int>> ports;
    std::vector<Job> active;  // jobs with an active attempt, anywhere
  };
  ClusterView view_;
};

}  // namespace trainq
