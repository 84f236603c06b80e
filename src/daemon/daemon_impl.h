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
#include "src/daemon/authenticator.h"
#include "src/daemon/cluster_key.h"
#include "src/daemon/config.h"
#include "src/daemon/daemon.h"
#include "src/daemon/dependencies.h"
#include "src/daemon/gpu_sampler.h"
#include "src/daemon/notifier.h"
#include "src/daemon/outcome.h"
#include "src/daemon/runtime_config.h"
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

// An attempt that ended without an exit record while its processes are being stopped: it
// keeps its GPUs and port until none is left (leftovers.cc).
struct StoppingAttempt {
  Unrecorded why = Unrecorded::kShimDied;
  UnixMs kill_at = 0;           // SIGTERM was sent; SIGKILL from then on (grace_period)
  UnixMs give_up_at = 0;        // what outlives SIGKILL this long (stuck in D state) is left
  size_t found = 0;             // processes found at the first scan
  std::vector<ProcStat> procs;  // the latest scan
  bool cancel_sent = false;     // the daemon had asked the shim to stop before it was gone
};

// An attempt this daemon runs (or re-adopted), with what the GPU samples say of it.
struct LiveAttempt {
  JobId job = 0;
  int n = 0;
  ShimProcess shim;
  std::vector<int> gpu_indices;
  std::vector<std::string> gpu_uuids;
  uint64_t reserved_bytes = 0;
  bool exclusive = false;
  int cpus = 0;
  UnixMs started_at = 0;
  std::string run_dir;
  std::string log_path;
  int master_port = 0;  // held in ports_ until the shim is gone
  int part = -1;        // a gang's part run here, of `parts`; -1: not a gang
  int parts = 0;
  bool cancel_requested = false;
  bool gate = false;                    // the "shim" is a trainq.gpu gate's own process
  std::map<int, uint64_t> used_by_gpu;  // latest sample: bytes its processes hold per GPU
  bool usage_known = false;
  uint64_t peak_bytes = 0;
  std::optional<StoppingAttempt> stopping;
};

// An attempt whose end the store refused (disk full, I/O error): its shim is gone, and each
// pass tries to record the end again until the store takes it.
struct UnrecordedEnd {
  int n = 0;
  AttemptEnd end;
  std::string problem;  // StorageProblem() of the last refusal
};

// POST /v1/jobs/ID/release: how a gate's block ended.
struct GateRelease {
  int exit_code = 0;
  std::string error;  // what the block raised ("" when it ended normally)
};

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

class DaemonImpl {
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
  void OnWakeupTimer() { RequestSchedule(); }
  // When the next pass is due on time alone (OOM backoff over, a job reaching the aging
  // limit, a ramp-up window closing, a write the state dir refused to try again); 0 when
  // nothing waits on time.
  UnixMs NextWakeup() const { return next_wakeup_; }

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

  // scheduler.cc
  void RequestSchedule();
  void SchedulePass();
  std::vector<NodeState> BuildNodes() const;
  // The placement policy's settings: the config's, and the workload mix of recent submits.
  PolicyConfig Policy() const;
  uint64_t LargestGpuBytes() const;  // of the latest sample; 0 before one
  // Counts a submitted job's request in the workload mix (workload_window).
  void NoteSubmitted(const JobSpec& spec);
  int MaxGpusPerNodeNow() const;
  void ArmWakeup(UnixMs now);
  // Starts the decisions of a pass. After one fails on the state dir (disk full, I/O
  // error) the rest are not tried: they and it keep the reason it gave, and a pass comes
  // again in kStorageRetryMs.
  void StartDecided(const std::vector<StartDecision>& starts, UnixMs now);
  // --array ...%N: keeps a group from running more than its limit (scheduler.cc).
  std::vector<std::pair<JobId, std::string>> ThrottleGroups(
      std::vector<const PendingJob*>& ordered);
  int ActiveInGroup(JobId group, int limit);
  void WriteStorageReasons(const std::vector<JobId>& ids, const std::string& reason);
  // Rebuilds waiting_ from the store when an event outside the hot path made it stale.
  Status RefreshWaiting();
  void AddWaiting(JobId id, const JobSpec& spec, UnixMs submitted_at, UnixMs queued_at,
                  UnixMs not_before = 0);
  void ForgetReasonsExcept();
  void WriteReasons(const PlacementResult& result);
  // Decayed GPU-hours per user now: ended attempts (read from the store once) plus running.
  UsageByUser FairShareNow(UnixMs now);
  void TrackRunning(JobId id, const std::string& user);
  // The numbers behind a waiting job's reason (`trainq explain`).
  Result<Explanation> ExplainWaiting(JobId id);

  // agent.cc
  void RecoverAttempts();
  // Says once, at start, whether attempts get cgroups and, if not, why.
  void LogCgroups();
  // What submit checks --mem-limit and --max-procs against (SpecLimits' host fields).
  void HostSpecLimits(SpecLimits& limits) const;
  // The cgroup an attempt of `job` in `run_dir` runs in; version kNone where cgroups are off.
  CgroupSpec AttemptCgroup(const Job& job, const std::string& run_dir) const;
  void RecoverOne(const Job& job, const Attempt& attempt);
  // kUnavailable (and the job's reason set) when a multi-GPU job finds every MASTER_PORT
  // of the range held: the job stays queued and is placed again after the next exit.
  Status StartAttempt(const Job& job, const StartDecision& decision);
  Result<int> TakeMasterPort(const Job& job);  // 0 for jobs that need none
  // The handler a launcher calls when attempt `n` of `job` has exited.
  ShimLauncher::ExitHandler ExitHandlerFor(JobId job, int n);
  void OnShimExit(JobId job);
  // Records how a live attempt ended and lets its GPUs and port go.
  void RecordEnd(JobId job, const AttemptEnd& end);

  // leftovers.cc: a live attempt (in live_) ended without an exit record. Its processes are
  // found and stopped (SIGTERM, grace_period, SIGKILL) before its end is recorded; until then
  // it keeps its GPUs and port.
  void EndUnrecorded(JobId job, Unrecorded why);
  // Run each sample: rescans the attempts being stopped, escalates, records those done.
  void CheckStopping();
  void RecordUnrecorded(JobId job, size_t survivors);
  // Writes an attempt's end to the store; one the state dir refused is kept in
  // unrecorded_ends_ and written again by a later pass.
  void StoreEnd(JobId id, int n, const AttemptEnd& end);
  void RetryUnrecordedEnds(UnixMs now);
  // A failure to write the state dir that waiting may cure (kNoSpace, kIo), as a reason:
  // "disk full in STATE_DIR: ..."; empty for any other failure.
  std::string StorageProblem(const Status& st) const;
  Status CancelJob(const Job& job, std::string* message);
  // What follows a waiting job's cancel once the store has it (CancelWaiting or, for a
  // request that cancels many, CancelWaitingMany): the queue, reasons, dependents, notice.
  void CancelledWaiting(const Job& job, std::string* message);
  void AttributeUsage();

  // notify.cc: job `id` reached a done state here (its end, a cancel, a dependency that
  // failed): its notifications (--notify, --mail, notify_url) are handed to notifier_.
  void JobEnded(JobId id);
  // Gates (agent.cc): the Python process that holds GPUs in a `with trainq.gpu()` block.
  ExitRecord GateEndRecord(const LiveAttempt& live) const;
  Status EndUnstarted(const Job& job, int n, const Status& runner, const Status& launch);
  void RecoverGate(const Job& job, const Attempt& a, LiveAttempt live);
  Status ReleaseGate(const Job& job, const GateRelease& r, std::string* message);
  std::string WithGpuModels(const std::string& record) const;
  Status StartNotifier();

  // What a batch of submits just stored means for the rest: the workload mix, the waiting
  // index, a pass.
  void Submitted(const std::vector<JobSpec>& specs, const std::vector<JobId>& ids, UnixMs now);

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
  // The leader: job `id` was submitted or queued again elsewhere; its place in waiting_ is
  // read from the store.
  void NoteWaiting(JobId id);
  // The agent: starts the attempts placed on this node, stops those the store took away,
  // carries out cancels asked for on other nodes.
  void SyncAssigned();
  // The end of an attempt placed here whose --cwd this node lacks: queued again without this
  // node while enough others are left, else failed.
  AttemptEnd CwdMissing(const Job& job, const Attempt& a, int rank);
  // This node's GPUs and their use by its attempts, as NodeRecord::info.
  std::string NodeInfo() const;
  NodeRecord OwnRecord() const;
  // The placement policy's nodes: this node alone, or (cluster) every node's last record
  // with the store's active attempts as holdings (cluster_view_).
  std::vector<NodeState> PolicyNodes();
  Status RefreshClusterView();
  // The leader's half of a start: the placement written to the store (fenced by the
  // lease); the node's agent starts it.
  Status PlaceOnNode(const Job& job, const StartDecision& decision);
  // The agent's half: the run dir, the shim, `running`. `record_start`: the single-node
  // path, which records `starting` itself just before the shim starts.
  // `rank`: a gang's part run here (-1: not a gang's; only part 0 records `running`).
  Status RunPlaced(const Job& job, int n, const Placement& p, bool record_start, int rank = -1);
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
  std::unique_ptr<ShimLauncher> launcher_;
  const Clock& clock_;
  GpuSampler sampler_;  // the GPUs as last sampled
  std::string node_;
  int cpu_slots_ = 1;
  UnixMs next_wakeup_ = 0;
  // A write the state dir refused is tried again this often: soon after space is freed,
  // never a busy loop while it is not.
  static constexpr int64_t kStorageRetryMs = 5000;
  UnixMs storage_retry_at_ = 0;  // when a pass tries failed writes again; 0: none pending
  static constexpr int64_t kPortRetryMs = 2000;
  UnixMs port_retry_at_ = 0;  // when a pass looks again for a MASTER_PORT; 0: none needed
  std::map<JobId, UnrecordedEnd> unrecorded_ends_;

  std::unique_ptr<HttpServer> server_;
  DeliverFn deliver_;
  // Declared after everything its thread's deliveries read, so it stops first.
  std::unique_ptr<Notifier> notifier_;
  boost::asio::signal_set signals_{io_};
  boost::asio::steady_timer sample_timer_{io_};
  boost::asio::steady_timer wakeup_timer_{io_};
  std::map<JobId, LiveAttempt> live_;
  // MASTER_PORTs of live multi-GPU attempts (config_ is declared, so initialised, earlier).
  PortPool ports_{config_.master_port_first, config_.master_port_last};
  // Whether another program listens on a port; a seam for the unit tests.
  std::function<bool(int)> port_free_ = TcpPortFree;
  // The last workload_window GPU requests submitted: the mix FGD placement expects. Kept in
  // memory only; after a restart it fills again from new submits.
  RecentRequests recent_{static_cast<size_t>(config_.workload_window)};
  // The reason last written for each waiting job; hashed: every pass looks up each job.
  std::unordered_map<JobId, std::string> written_reasons_;
  std::map<int64_t, JobId> pid_owner_;      // GPU process pid -> the attempt it belongs to
  std::unique_ptr<SubmitBatcher> submits_;  // the group commit of submits
  bool schedule_posted_ = false;
  bool stopping_ = false;
  int64_t waiting_jobs_ = 0;
  // The queued jobs' requests, so a pass never reads the store: submits add, starts
  // remove; rarer changes (retries, cancels, recovery) mark it stale for a reload.
  WaitingQueue waiting_;
  bool waiting_stale_ = true;
  std::vector<Hold> holds_;  // GPUs held for aged jobs, handed to the next pass
  // Fair share: ended attempts folded per user; the attempts seen running, by (job,
  // attempt), so one that is gone is added as ended.
  FairShareLedger fair_share_{0};
  bool fair_share_loaded_ = false;
  struct RunningUse {
    std::string user;
    int gpus = 0;
    UnixMs started_at = 0;
  };
  std::map<std::pair<JobId, int>, RunningUse> running_use_;
  std::map<JobId, std::string> user_of_;  // for attempts started or adopted by this daemon

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
  CgroupHost cgroups_;                   // DaemonSeams::cgroups
  std::string fence_file_;
  int64_t fence_after_ms_ = 0;
  bool store_unreachable_ = false;  // logged once per outage
  std::string last_info_;           // NodeRecord::info last sent
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
