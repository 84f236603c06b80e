// The scheduler: the queue's index in memory, the passes that place it, the reasons each
// waiting job shows, fair share and the wake-ups that time alone makes due. A pass runs
// after every submit, exit and sample (coalesced into one per loop turn), never on a fixed
// tick, and never reads the whole queue from the store: submits add to the index, starts
// take from it, and rarer changes (retries, cancels, recovery) mark it stale for a reload.
//
// Where jobs are placed, where node facts come from and who decides are the Site's: one
// machine, or a cluster whose leader places over every node's GPUs (mode.h). The pure
// placement policy (src/core/placement.h) makes every decision.
// Everything runs on the event-loop thread. See docs/architecture.md, "The scheduler".
#pragma once

#include "src/api/asio.h"

#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/core/elastic.h"
#include "src/core/fair_share.h"
#include "src/core/placement.h"
#include "src/core/preemption.h"
#include "src/core/waiting_queue.h"
#include "src/core/workload_mix.h"
#include "src/daemon/agent.h"
#include "src/daemon/config.h"
#include "src/daemon/metrics.h"
#include "src/os/clock.h"
#include "src/store/store.h"

namespace trainq {

// What the placement policy reads of a job: its request, its user and its times.
PendingJob PendingOf(JobId id, const JobSpec& spec, UnixMs submitted_at, UnixMs queued_at,
                     UnixMs not_before);

// An attempt running now, as fair share counts it.
struct RunningUse {
  std::string user;
  int gpus = 0;
  UnixMs started_at = 0;
};
using RunningUses = std::map<std::pair<JobId, int>, RunningUse>;  // by (job, attempt)

class Scheduler {
 public:
  // What differs between one machine and a cluster, as the scheduler sees it.
  class Site {
   public:
    virtual ~Site() = default;
    // Whether this daemon places jobs now (a cluster's followers run what the leader placed).
    virtual bool Places() const = 0;
    // The policy's nodes for a pass, read afresh.
    virtual std::vector<NodeState> PassNodes() = 0;
    // The nodes as the last pass saw them, for when the next is due.
    virtual std::vector<NodeState> LastNodes() const = 0;
    // The attempts running now that fair share counts (this node's, or every node's).
    virtual RunningUses Running() = 0;
    // Carries out a pass's decision. kUnavailable: the job waits (for a MASTER_PORT).
    virtual Status Place(const Job& job, const StartDecision& decision) = 0;
    // Stops a running attempt for a preemption: `control` (a "preempted" stop, its reason and
    // lead) goes to the attempt's node, here or another.
    virtual Status Preempt(const Job& victim, const ShimControl& control) = 0;
    // An elastic gang grows: `parts` join its running attempt, in order (a cluster's leader
    // writes each for that node's agent to start). One machine runs no gang.
    virtual Status AddParts(const Job& job, std::span<const NodeGpus> parts) {
      (void)job, (void)parts;
      return Status::Invalid("a gang grows only in a cluster");
    }
    // Whether a waiting job's attempts are read with it (a cluster: it may wait for a lost
    // node's word).
    virtual bool ReadsLastAttempt() const = 0;
  };

  // `io`: the loop passes are posted on; `config`: the settings in force, read at each use;
  // `agent`: each pass first writes the ends the store refused, and a job waiting for a
  // MASTER_PORT makes a pass due; `largest_gpu`: the largest GPU's bytes now (the workload
  // mix's scale).
  Scheduler(boost::asio::io_context& io, Store& store, const Clock& clock, const Config& config,
            Agent& agent, std::string state_dir, std::function<uint64_t()> largest_gpu);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Given once, before the first pass; outlives the scheduler's use of it.
  void SetSite(Site* site) { site_ = site; }
  // Where passes and starts are counted for /metrics (null: nowhere).
  void SetCounters(DaemonCounters* counters) { counters_ = counters; }

  // Asks for a pass on the loop's next turn (many asks, one pass).
  void RequestSchedule();
  void OnWakeupTimer() { RequestSchedule(); }
  // When the next pass is due on time alone; 0 when nothing waits on time.
  UnixMs NextWakeup() const { return next_wakeup_; }
  // The daemon stops: no pass runs from now on.
  void Stop();

  // What a batch of submits just stored: the workload mix, the index, a pass.
  void Submitted(const std::vector<JobSpec>& specs, const std::vector<JobId>& ids, UnixMs now);
  // Job `job` was queued (its dependencies met) at `now`.
  void Queued(const Job& job, UnixMs now);
  // Job `id` left the queue for good (cancelled while waiting).
  void Left(JobId id);
  // Job `id` is waiting again (a retry): the index reloads and its reason is written anew.
  void Requeued(JobId id);
  // The store changed in ways the index cannot follow job by job: reload it before a pass.
  void MarkStale() { waiting_stale_ = true; }
  bool stale() const { return waiting_stale_; }
  // Job `id` was submitted or queued again elsewhere (a cluster's event): its place in the
  // index is read from the store.
  void NoteWaiting(JobId id);
  // The index, the holds, the written reasons and fair share are read anew (a node that
  // becomes the leader: another node placed until now).
  void Reload();
  // Forgets the reason written for `id`: the next pass writes it again.
  void ForgetReason(JobId id) { reasons_.erase(id); }
  // The reason the last pass gave waiting job `id`, fresher than the store's while a long
  // queue's changed reasons are written a chunk at a time; null when this daemon does not
  // place, or the pass did not explain `id` (the store's is then the one to show).
  const std::string* LiveReason(JobId id) const;
  // How many changed reasons wait to be written to the store.
  size_t reasons_unwritten() const { return unwritten_.size() - unwritten_next_; }
  // Writes them all now, chunk after chunk, as the timer would (benchmarks: the same work
  // without the pauses between chunks).
  void WriteReasonsNow();

  // The placement policy's settings: the config's, and the workload mix of recent submits.
  PolicyConfig Policy() const;
  // The numbers behind a waiting job's reason (`trainq explain`).
  Result<Explanation> ExplainWaiting(JobId id);
  // Every running job as a victim the waiting job `id` might preempt, with a verdict.
  Result<std::vector<PreemptCandidate>> ExplainPreemption(JobId id);
  // Queued jobs as of the last pass.
  int64_t waiting_jobs() const { return waiting_jobs_; }

 private:
  void SchedulePass();
  void ArmWakeup(UnixMs now);
  // Starts the decisions of a pass. After one fails on the state dir (disk full, I/O
  // error) the rest are not tried: they and it keep the reason it gave, and a pass comes
  // again in kStorageRetryMs.
  void StartDecided(const std::vector<StartDecision>& starts, UnixMs now);
  // --array ...%N: keeps a group from running more than its limit.
  std::vector<std::pair<JobId, std::string>> ThrottleGroups(
      std::vector<const PendingJob*>& ordered);
  int ActiveInGroup(JobId group, int limit);
  void WriteStorageReasons(const std::vector<JobId>& ids, const std::string& reason);
  Status RefreshWaiting();
  void AddWaiting(JobId id, const JobSpec& spec, UnixMs submitted_at, UnixMs queued_at,
                  UnixMs not_before = 0);
  void ForgetReasonsExcept();
  void WriteReasons(PlacementResult& result);
  // Writes up to kReasonRowsPerWrite of unwritten_ and, while some are left, arms
  // reason_timer_ to write the next chunk.
  void WriteUnwrittenReasons();
  // Decayed GPU-hours per user now: ended attempts (read from the store once) plus running.
  UsageByUser FairShareNow(UnixMs now);
  // Preemption (docs/scheduling.md): the waiting GPU jobs of a pass, copied before the
  // pass's starts change the index; then the victims they choose are
  // stopped, the GPUs they free held for them, and their reasons say so.
  std::vector<PendingJob> MayPreempt(const PlacementResult& result,
                                     std::span<const PendingJob* const> ordered, UnixMs now) const;
  void Preempt(const std::vector<PendingJob>& candidates, const std::vector<NodeState>& nodes,
               const PolicyConfig& policy, const UsageByUser& usage, UnixMs now,
               PlacementResult& result);
  // The running attempts as preemption sees them (read from the store), with their jobs.
  std::vector<RunningJob> RunningForPreemption(std::map<JobId, Job>* jobs, UnixMs now);
  PreemptConfig PreemptSettings() const;

  // Elastic jobs (docs/workflow.md, "Elastic jobs"; the decisions are src/core/elastic.h's;
  // scheduler_elastic.cc). A resize is a stop ("resized") and a restart at the new size.
  ElasticConfig ElasticSettings() const { return {config_.min_runtime_ms}; }
  // Before a pass: resizes past their time are dropped; the GPUs a growing job adds count as
  // its own in `nodes` while it stops; a resized job that waits asks for its new size
  // (a copy in `storage`, put in its place in `ordered`) on GPUs held for it (`holds`).
  void PrepareResizes(std::vector<NodeState>& nodes, std::vector<const PendingJob*>& ordered,
                      std::vector<PendingJob>& storage, std::vector<Hold>& holds, UnixMs now);
  void HoldAdded(std::vector<NodeState>& nodes, UnixMs now) const;
  // The idle GPUs of its node go with an elastic job a pass starts (ChooseGrowth), and the
  // idle nodes with an elastic gang (ChooseGangGrowth).
  void GrowAtStart(std::vector<StartDecision>& starts, const std::vector<NodeState>& nodes,
                   const std::vector<Hold>& holds, const PolicyConfig& policy, UnixMs now);
  // The elastic jobs running now (read from the store), with their jobs; the elastic gangs
  // among them go to `gangs` when given.
  std::vector<ElasticRun> ElasticRunning(std::map<JobId, Job>* jobs, UnixMs now,
                                         std::vector<GangRun>* gangs = nullptr);
  // Shrinks elastic jobs for `ready` before anything is preempted (ChooseShrinks); returns
  // the jobs still without room.
  std::vector<PendingJob> ShrinkFor(std::vector<PendingJob> ready,
                                    const std::vector<ElasticRun>& runs,
                                    const std::vector<GangRun>& gangs, std::map<JobId, Job>& jobs,
                                    const std::vector<NodeState>& nodes, const PolicyConfig& policy,
                                    UnixMs now);
  // Running elastic jobs grow into idle GPUs no waiting job can use, and elastic gangs by
  // parts on idle nodes; sets elastic_wakeup_.
  void GrowRunning(const PolicyConfig& policy, UnixMs now);
  bool BeginResize(const Job& job, const Resize& d, UnixMs now);

  boost::asio::io_context& io_;
  Store& store_;
  const Clock& clock_;
  const Config& config_;
  Agent& agent_;
  std::string state_dir_;
  std::function<uint64_t()> largest_gpu_;
  DaemonCounters* counters_ = nullptr;
  Site* site_ = nullptr;

  bool schedule_posted_ = false;
  bool stopping_ = false;
  UnixMs next_wakeup_ = 0;
  UnixMs storage_retry_at_ = 0;  // when a pass tries failed writes again; 0: none pending
  boost::asio::steady_timer wakeup_timer_{io_};
  int64_t waiting_jobs_ = 0;
  // The queued jobs' requests, so a pass never reads the store.
  WaitingQueue waiting_;
  bool waiting_stale_ = true;
  // Each waiting job's reason: a digest of the text the store holds (ReasonDigest), so a
  // pass writes only those that changed (a million kept as text cost 200 MB), seeded from
  // the store when the queue is read, so a restart rewrites none a pass leaves unchanged;
  // and the last pass's text, an index into live_texts_ (kNoLiveReason: none).
  struct ReasonState {
    uint64_t written = 0;
    uint32_t live = kNoLiveReason;
    uint32_t pass = 0;  // the pass that gave `live`: one of an older pass is no longer true
  };
  static constexpr uint32_t kNoLiveReason = UINT32_MAX;
  uint32_t pass_ = 0;  // passes that explained the queue, counted
  std::unordered_map<JobId, ReasonState> reasons_;
  std::vector<std::string> live_texts_;  // the last pass's reason texts
  std::vector<uint64_t> live_digests_;   // their digests, one per text
  // Jobs whose live reason differs from the written one, in queue order, left by the last
  // pass for reason_timer_: a pass after a few exits changes every reason of a long queue
  // (they name free memory), and writing 100,000 rows took half a second of the loop.
  std::vector<JobId> unwritten_;
  size_t unwritten_next_ = 0;
  boost::asio::steady_timer reason_timer_{io_};
  std::vector<Hold> holds_;  // GPUs held for aged jobs, handed to the next pass
  // Preemptions under way, by preemptor: its victims (stopping: no other preemption takes
  // them), when their GPUs should be free, and what the preemptor's reason says.
  struct Preempting {
    std::vector<JobId> victims;
    std::string victims_text;  // "job 12 (bob, priority 0)"
    UnixMs ready_at = 0;
    UnixMs give_up_at = 0;  // past this the hold goes: the victims did not stop
    bool shrink = false;    // the "victims" are elastic jobs shrinking, not stopping
  };
  std::map<JobId, Preempting> preempting_;
  UnixMs preempt_wakeup_ = 0;  // when time alone may change a preemption; 0: never
  // Resizes under way, by job: the GPUs it restarts on (held for it), those it adds (kept from
  // other jobs while it stops) and when the resize is given up (it did not stop or restart).
  // A gang that shrinks restarts on `parts` (`to` their first).
  struct Resizing {
    NodeGpus to;
    std::vector<int> added;
    UnixMs give_up_at = 0;
    std::vector<NodeGpus> parts{};
  };
  std::map<JobId, Resizing> resizing_;
  UnixMs elastic_wakeup_ = 0;  // when an elastic job may next resize; 0: none
  // Whether an elastic job may be running: cleared when none is found, set by whatever may
  // bring one (a submit, a queueing, a reload), so a queue without them lists nothing more.
  bool elastic_seen_ = true;
  // The last workload_window GPU requests submitted: the mix FGD placement expects. Kept in
  // memory only; after a restart it fills again from new submits.
  RecentRequests recent_;
  // Fair share: ended attempts folded per user; the attempts seen running, so one that is
  // gone is added as ended.
  FairShareLedger fair_share_{0};
  bool fair_share_loaded_ = false;
  RunningUses running_use_;
};

}  // namespace trainq
