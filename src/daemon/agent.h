// The agent: the attempts this node runs. It starts their shims (or watches a gate's
// process), re-adopts them after a restart, turns each exit into the attempt's end, stops
// what a dead shim left behind, holds the MASTER_PORTs, and attributes the GPU processes of
// each sample to the attempts that own them. It keeps every end the store refused and
// writes it again when asked.
//
// It knows nothing of the queue or of other nodes: the rest of the daemon hears of its
// events through Hooks, and chooses, once at start, whether records are checked before they
// run (a cluster's) and whether attempts carry a fence (docs/cluster.md, "Failure").
// Everything runs on the event-loop thread. See docs/architecture.md, "The agent".
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/core/container.h"
#include "src/core/placement.h"
#include "src/core/ports.h"
#include "src/core/spec.h"
#include "src/daemon/config.h"
#include "src/daemon/daemon.h"
#include "src/daemon/gpu_sampler.h"
#include "src/daemon/outcome.h"
#include "src/daemon/shim_launcher.h"
#include "src/daemon/trust.h"
#include "src/os/cgroup.h"
#include "src/os/clock.h"
#include "src/os/run_dir.h"
#include "src/os/users.h"
#include "src/store/store.h"

namespace trainq {

class ImageCensus;

// A write the state dir refused is tried again this often: soon after space is freed,
// never a busy loop while it is not.
inline constexpr int64_t kStorageRetryMs = 5000;

// A failure to write the state dir that waiting may cure (kNoSpace, kIo), as a reason:
// "disk full in STATE_DIR: ..."; empty for any other failure.
std::string StorageProblem(const Status& st, const std::string& state_dir);

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
  std::string user;  // the job's submitter
  ShimProcess shim;
  std::vector<int> gpu_indices;
  std::vector<std::string> gpu_uuids;
  uint64_t reserved_bytes = 0;
  bool exclusive = false;
  int cpus = 0;
  UnixMs started_at = 0;
  std::string run_dir;
  std::string log_path;
  int master_port = 0;  // held in the agent's ports until the shim is gone
  int part = -1;        // a gang's part run here, of `parts`; -1: not a gang
  int parts = 0;
  bool cancel_requested = false;
  std::string cancelled_by;  // who asked it, for the end's reason ("": not known)
  // Control (control.json): the last request's number, and a stop asked ("preempted",
  // "requeued"; "": none).
  int64_t control_seq = 0;
  std::string stop_requested;
  bool gate = false;                    // the "shim" is a trainq.gpu gate's own process
  bool session = false;                 // an interactive session (JobSpec::interactive)
  UnixMs activity_stamped_at = 0;       // its GPUs' use last told its shim (StampActivity)
  std::map<int, uint64_t> used_by_gpu;  // latest sample: bytes its processes hold per GPU
  bool usage_known = false;
  uint64_t peak_bytes = 0;
  // GPU time held and used since it was last written (Store::AddUsage), and the sample it was
  // counted to: written each minute and at the end; a crash loses at most that minute.
  AttemptUsage unwritten{};
  UnixMs usage_at = 0;
  UnixMs usage_written_at = 0;
  std::optional<StoppingAttempt> stopping;
};

// An attempt whose end the store did not take (disk full, I/O error, the cluster's store
// unreachable): its shim is gone, and each pass tries to record the end again, in the order
// the ends came, until the store takes it. What it ended with stays on disk meanwhile, in the
// run dir's exit record, where a restarted daemon reads it again.
struct UnrecordedEnd {
  int n = 0;
  AttemptEnd end;
  std::string problem;  // StorageProblem() of the last refusal, or the store's unreachability
  uint64_t order = 0;   // when it first failed, among the others
};

// POST /v1/jobs/ID/release: how a gate's block ended.
struct GateRelease {
  int exit_code = 0;
  std::string error;  // what the block raised ("" when it ended normally)
};

// Where a job's shipped trees are on a node that is not the one it was submitted on
// (docs/cluster.md, "Code and data"): its cwd in the copy of its snapshot ("": its own cwd),
// and the links its --stage destinations become (path, target), both absolute.
struct StagedPaths {
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> links;
  std::string notice;  // the log's first line: what was fetched and what was here
};

class Agent {
 public:
  // What the rest of the daemon does when an attempt's life moves on.
  struct Hooks {
    // An attempt of the job started here.
    std::function<void(JobId)> started;
    // The job's end is settled (done, or a start that failed): its dependents move, and, when
    // `stored`, its notifications go out.
    std::function<void(JobId, bool stored)> done;
    // The job went back to the queue (`oom`: its attempt ran out of GPU memory).
    std::function<void(JobId, bool oom)> requeued;
    // An attempt let go of its GPUs, CPUs and port: sample, report, place again.
    std::function<void()> freed;
  };
  struct Parts {
    Store* store = nullptr;
    const Clock* clock = nullptr;
    const Config* config = nullptr;  // the settings in force, read at each use
    const DaemonOptions* options = nullptr;
    const GpuSampler* sampler = nullptr;  // the GPUs as last sampled
    std::unique_ptr<ShimLauncher> launcher;
    CgroupHost cgroups{CgroupVersion::kNone, "", "no cgroup root"};
    std::string node;
    // Checks a record before it runs (a cluster's store is written by many hands; trust.h).
    const Trust* trust = &OneMachineTrust();
    // A cluster's attempts stop themselves once this file's stamp is older than after_ms.
    std::string fence_file;
    int64_t fence_after_ms = 0;
    // Whether another program listens on a port; a seam for the unit tests.
    std::function<bool(int)> port_free;
    // The folder of a `trainq sbatch` job's srun and scontrol (AttemptEnvInput).
    std::string slurm_bin_dir;
    // A cluster node's container store: a container job whose image it lacks says in its
    // log that the node loads it first. Null: not known.
    const ImageCensus* images = nullptr;
  };

  // Its hooks come later (SetHooks), once what they call is made; none runs before.
  explicit Agent(Parts parts);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  void SetHooks(Hooks hooks) { hooks_ = std::move(hooks); }

  // Says once, at start, whether attempts get cgroups and, if not, why.
  void LogCgroups() const;
  // What submit checks --mem-limit and --max-procs against (SpecLimits' host fields).
  void HostSpecLimits(SpecLimits& limits) const;

  // Re-adopts the attempts a previous daemon left on this node. A cluster's attempt placed
  // here whose run dir does not exist yet was never started (`unstarted_wait`): it is left
  // for StartPart; on one machine such an attempt is a run dir removed meanwhile.
  void RecoverAttempts(bool unstarted_wait);
  // A cluster: the attempt of `job` that ran here until the leader judged this node lost
  // while this daemon was away (stopped, then killed, say). Its shim is watched again, or its
  // record read, so the store hears how it ended while it still waits for this node's word
  // (lost_node_wait). An attempt that left nothing to tell (no record, no process) is left to
  // that wait.
  void ReadoptLost(const Job& job);

  // One machine: records the attempt as starting and starts it where `decision` says.
  // kUnavailable (and the job's reason set) when a multi-GPU job finds every MASTER_PORT of
  // the range held: the job stays queued and is placed again after the next exit.
  Status StartLocal(const Job& job, const StartDecision& decision);
  // A cluster: starts this node's part `rank` of attempt `n`, already recorded by the
  // leader (-1: not a gang's). Part 0 holds the attempt's MASTER_PORT here.
  // `staged`: where this node put what the job ships (null: it runs where it was submitted).
  Status StartPart(const Job& job, int n, const Placement& p, int rank,
                   const StagedPaths* staged = nullptr);

  // Cancels the attempt running here for the user `by` ("": not known): SIGTERM to its shim
  // (or, for one whose shim is gone, noted so its end says cancelled, and by whom). kNotFound
  // when no attempt of the job runs here.
  Status Cancel(JobId id, const std::string& by, std::string* message);
  // Asks the shim of the attempt running here to act (control.json, then SIGUSR1): stop it
  // with a warning (a preemption, a requeue) or signal its processes. kNotFound when no attempt
  // of the job runs here, kConflict when it is being stopped already. `message` (may be null)
  // says what was done.
  Status Control(JobId id, ShimControl control, std::string* message);
  // Ends a gate's block (docs/python.md, "The GPU gate").
  Status ReleaseGate(const Job& job, const GateRelease& r, std::string* message);
  // Stops the attempts running here that are not in `keep` (a cluster's node judged lost
  // while it was away: the store placed them elsewhere).
  void StopAllBut(const std::set<JobId>& keep);

  // Writes an attempt's end to the store; one the state dir refused is kept and written
  // again by RetryUnrecordedEnds.
  void StoreEnd(JobId id, int n, const AttemptEnd& end);
  // Returns whether ends are still waiting for the store.
  bool RetryUnrecordedEnds();
  const UnrecordedEnd* UnrecordedEndOf(JobId id) const;

  // Each sample: rescans the attempts being stopped, escalates, records those done.
  void CheckStopping();
  // After a fresh sample: which attempt each GPU process belongs to, and the attempts' peaks.
  void AttributeUsage();
  // How often an attempt's GPU usage is written to the store while it runs.
  static constexpr int64_t kUsageWriteMs = 60000;
  bool OwnsGpuProcess(int64_t pid) const { return pid_owner_.count(pid) > 0; }

  const std::map<JobId, LiveAttempt>& live() const { return live_; }
  // When a pass should look again for a free MASTER_PORT (0: none waits for one); a pass
  // clears it before it starts anything.
  UnixMs port_retry_at() const { return port_retry_at_; }
  void ClearPortRetry() { port_retry_at_ = 0; }

  // The daemon stops: shims run on, unwatched, for the next daemon to re-adopt.
  void Stop();

 private:
  // Adds the GPU time from the last sample to `t` to the attempt's unwritten usage.
  void CountUsage(LiveAttempt& live, UnixMs t, const std::map<int, int>& utilization);
  // Writes what is unwritten; kept for the next try when the store refuses.
  void StampActivity(LiveAttempt& live, UnixMs t, const std::map<int, int>& utilization);
  void WriteUsage(JobId id, LiveAttempt& live, UnixMs now);
  static constexpr int64_t kPortRetryMs = 2000;

  Result<int> TakeMasterPort(const Job& job);  // 0 for jobs that need none
  // The run dir, the spec, the shim, `running`. `record_start`: the single-node path, which
  // records `starting` itself just before the shim starts.
  Status RunPlaced(const Job& job, int n, const Placement& p, bool record_start, int rank,
                   const StagedPaths* staged = nullptr);
  RunSpec ShimSpec(const Job& job, int n, const Placement& p, int rank, const UserInfo& runner,
                   const StagedPaths* staged) const;
  // The cgroup an attempt of `job` in `run_dir` runs in; version kNone where cgroups are off.
  CgroupSpec AttemptCgroup(const Job& job, const std::string& run_dir) const;
  Status EndUnstarted(const Job& job, int n, const Status& runner, const Status& launch);
  void RecoverOne(const Job& job, const Attempt& a);
  // What ShimLauncher::Adopt found for attempt `a` of `job`, recovered by RecoverOne.
  void Adopted(const Job& job, const Attempt& a, Result<ShimProcess> shim);
  void RecoverGate(const Job& job, const Attempt& a, LiveAttempt live);
  ExitRecord GateEndRecord(const LiveAttempt& live) const;
  ShimLauncher::ExitHandler ExitHandlerFor(JobId job, int n);
  void OnShimExit(JobId job);
  // Records how a live attempt ended and lets its GPUs and port go.
  void RecordEnd(JobId job, const AttemptEnd& end);
  // leftovers.cc: a live attempt ended without an exit record. Its processes are found and
  // stopped (SIGTERM, grace_period, SIGKILL) before its end is recorded; until then it keeps
  // its GPUs and port.
  void EndUnrecorded(JobId job, Unrecorded why);
  void RecordUnrecorded(JobId job, size_t survivors);

  Store& store_;
  const Clock& clock_;
  const Config& config_;
  const DaemonOptions& options_;
  const GpuSampler& sampler_;
  std::unique_ptr<ShimLauncher> launcher_;
  CgroupHost cgroups_;
  std::string node_;
  std::string slurm_bin_dir_;
  void InContainer(const Job& job, const Placement& p, RunSpec& spec) const;
  std::string SimulatedGpusAsCdi(ContainerHost& host) const;
  const Trust& trust_;
  std::string fence_file_;
  const ImageCensus* images_;
  static constexpr const char* kGpuCheckPrefix = "container_gpu_check";
  std::string GpuCheckFile(const std::string& user) const;
  std::vector<std::string> LoadNotice(const ContainerSpec& c, const std::vector<std::string>& held,
                                      const ContainerHost& host) const;
  int64_t fence_after_ms_ = 0;
  std::function<bool(int)> port_free_;
  Hooks hooks_;

  std::map<JobId, LiveAttempt> live_;
  // MASTER_PORTs of live multi-GPU attempts.
  PortPool ports_;
  UnixMs port_retry_at_ = 0;
  std::map<JobId, UnrecordedEnd> unrecorded_ends_;
  uint64_t unrecorded_count_ = 0;
  std::map<int64_t, JobId> pid_owner_;  // GPU process pid -> the attempt it belongs to
  bool stopping_ = false;
};

}  // namespace trainq
