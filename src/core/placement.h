// The placement policy (docs/scheduling.md): a pure function from the waiting jobs, the
// nodes' GPUs and what trainq already holds on them, to decisions. No I/O, no clock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/core/fair_share.h"
#include "src/core/fragmentation.h"
#include "trainq/job.h"

namespace trainq {

// A trainq attempt holding memory on one GPU.
struct Holding {
  JobId job = 0;
  uint64_t reserved_bytes = 0;
  std::optional<uint64_t> used_now;  // what its processes hold now; nullopt: unknown
  bool exclusive = false;
  UnixMs started_at = 0;
};

struct GpuState {
  int index = 0;
  std::string uuid;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;    // as the probe measured it
  int foreign_processes = 0;  // compute processes that are not trainq attempts'
  std::vector<Holding> holdings;
  // When these facts were measured: the last sample that succeeded. 0: current (a caller
  // that always has fresh facts, the simulator, need not say).
  UnixMs sampled_at = 0;
  // Why the samples since sampled_at failed ("" when the last one succeeded): shown where
  // stale facts keep a job off this GPU.
  std::string sample_error{};  // {}: callers may leave it out of an aggregate
  // What --gpu-type matches (GpuTypeMatches): the model name ("NVIDIA A100-SXM4-80GB") and
  // its node's label (config gpu_type); "": none.
  std::string model{};
  std::string label{};
};

// What one user's running or starting attempts take on a node: the per-user limits count it.
struct UserUse {
  int gpus = 0;  // GPUs held (a 2-GPU job counts 2; a CPU job 0)
  int jobs = 0;  // attempts, CPU jobs included
};

struct NodeState {
  std::string name;
  std::vector<GpuState> gpus;
  int cpu_slots = 0;
  int cpu_slots_used = 0;
  uint64_t host_mem_bytes = 0;  // 0: host memory is not enforced
  uint64_t host_mem_used = 0;
  // topology[i][j]: how far apart gpus[i] and gpus[j] are, as NVML's common-ancestor
  // level (0 same board, 10 one PCIe switch, 20 several switches, 30 host bridge,
  // 40 same NUMA node, 50 across sockets). Empty: unknown, every pair counts as equal.
  std::vector<std::vector<int>> topology;
  // The running or starting attempts here, by user (PendingJob::user). Only read where
  // PolicyConfig sets a per-user limit; a caller may leave it empty otherwise.
  std::map<std::string, UserUse> use_by_user;
  // false for a drained or lost node: nothing new is placed here (no start, no hold), but
  // what it holds still counts (its GPUs' holdings, use_by_user).
  bool accepts_new = true;
  // What --constraint asks of a node (config node_features): "ib", "nvlink".
  std::vector<std::string> features{};
  // The image names in the node's container store (a cluster node's NodeInfo "images").
  std::vector<std::string> images{};
  // The manifests of shipped trees this node holds whole (NodeInfo "staged").
  std::vector<std::string> staged{};
};

struct PendingJob {
  JobId id = 0;
  int gpus = 1;
  std::optional<uint64_t> mem_bytes;
  std::optional<double> mem_percent;
  int cpus = 1;
  int priority = 0;
  UnixMs submitted_at = 0;  // the order in line
  // When it last became queued (submit, retry, dependencies met, an OOM retry): aging counts
  // from here, so a retried job is not aged at once. 0: submitted_at.
  UnixMs queued_at = 0;
  UnixMs not_before = 0;  // OOM backoff, or the wait for a lost node's word (below)
  // A job whose node was judged lost waits until not_before for that node to report how
  // its attempt ended (lost_node_wait): the node's name; "" for an OOM backoff.
  std::string lost_node;
  std::string held_by;  // a held job (not_before kHeldNotBefore): who held it; "": not known
  std::string user;     // fair share is between users
  uint64_t host_mem_bytes = 0;
  // Where it may go, by NodeState::name: only these when not empty (--node), never these
  // (--exclude-node).
  std::vector<std::string> nodes_allowed;
  std::vector<std::string> nodes_excluded;
  // A gang: this many distinct nodes, each giving `gpus` GPUs, `cpus` slots and
  // `host_mem_bytes`, all at once or none.
  int num_nodes = 1;
  // Its group and how many of the group may run at once (--array 0-15%4; 0: no limit). The
  // policy ignores them: the daemon passes it only the jobs their group has room for.
  JobId group = 0;
  int group_limit = 0;
  // Its GPUs' type (GpuTypeMatches; "": any) and the features every node it uses has
  // (MeetsConstraints; empty: none asked).
  std::string gpu_type{};
  std::vector<std::string> constraints{};
  // A container job's image names (the image, or an archive's names): with the rest equal,
  // nodes whose store holds one come first (docs/containers.md, "In a cluster").
  std::vector<std::string> images{};
  // What it ships (docs/cluster.md, "Code and data"): each tree's manifest and bytes, and the
  // node that holds them all (where it was submitted). With the rest equal, nodes that hold
  // more of them come first.
  std::vector<std::pair<std::string, uint64_t>> shipped{};
  std::string shipped_from{};
  // The attained-service order (docs/scheduling.md, "Order"): 0 while the GPU-time its
  // earlier attempts received is below the threshold (or the order is off), 1 once past it.
  // Jobs of band 0 go before band 1 at equal priority, as 2D-LAS serves its first queue first.
  int service_band = 0;
  // An elastic job (--gpus MIN:MAX): placed at `gpus`, its min, then grown toward this
  // (src/core/elastic.h); 0: not elastic. Place itself reads only `gpus`.
  int max_gpus = 0;
  // An elastic gang (--nodes MIN:MAX): placed on `num_nodes`, its min, then grown by nodes
  // toward this (ChooseGangGrowth); 0: a fixed count. Place itself reads only `num_nodes`.
  int max_nodes = 0;

  bool exclusive() const { return gpus > 0 && !mem_bytes && !mem_percent; }
  // GPUs over all its nodes: what max_gpus_per_user counts.
  int64_t total_gpus() const { return int64_t{gpus} * num_nodes; }
};

struct PolicyConfig {
  uint64_t headroom_bytes = 256ull << 20;
  // Where per-process figures are unknown, a reservation counts in full this long after
  // its attempt started, then the probe's free memory is trusted.
  int64_t ramp_up_ms = 60000;
  // Limits an operator changes at run time (`trainq config set`).
  std::vector<int> devices;  // GPU indices jobs may use; empty: all
  // `trainq pause`: no job starts at all, or none on these GPUs (NVML indices, every node);
  // running jobs go on.
  bool paused = false;
  std::vector<int> paused_gpus;
  int max_jobs_per_gpu = 0;  // trainq attempts on one GPU; 0: no limit
  // A whole-GPU (exclusive) job takes only a GPU whose memory others use at most this much
  // (total - free, with no trainq attempt on it): NVML lists no process for memory held from
  // another container, so an empty process list alone does not make a GPU free.
  uint64_t whole_max_used_bytes = 1ull << 30;
  // Nothing starts on a GPU whose facts (GpuState::sampled_at) are older than this: they may
  // no longer be true. <= 0: never stale.
  int64_t stale_after_ms = 10000;
  // Per user, over every node given (NodeState::use_by_user) plus what the pass starts:
  // GPUs held and attempts running; 0: no limit.
  int max_gpus_per_user = 0;
  int max_jobs_per_user = 0;
  // A job that has waited this long gets the GPUs it would best use held for it; <= 0:
  // never.
  int64_t aging_ms = 2 * 3600 * 1000;
  // How many aged jobs that cannot start yet get GPUs held at once, oldest in line
  // first; 0: every aged job.
  int max_holds = 1;
  // The plain rule (docs/scheduling.md, "Choice of GPUs"): false (spread) puts a job on the
  // GPUs with the fewest trainq jobs, then the most usable memory, so jobs balance over the
  // GPUs and share compute as little as they can; true (pack) puts shares on GPUs already in
  // use first, then best fit (the least usable memory left), keeping whole GPUs free for
  // jobs that need them.
  bool pack = false;
  // Fragmentation-aware GPU choice: the mix of requests expected to arrive. Empty: the
  // plain rule (spread or pack, then best fit).
  // (src/core/fragmentation.h; a class may also name the host CPUs and memory it needs.)
  using WorkloadClass = trainq::WorkloadClass;
  std::vector<WorkloadClass> workload;
};

// One node's share of a decision or a hold: its name and the GPUs taken there (NVML
// indices, ascending).
struct NodeGpus {
  std::string node;
  std::vector<int> gpu_indices;
};

// GPUs held for a job that has waited past the aging limit: no other job starts there.
// `node` and `gpu_indices` are the first node's; `parts` has every node's (one for a
// single-node job, num_nodes for a gang; parts[0] repeats node and gpu_indices). A hold
// handed back with `parts` empty is read as the single part {node, gpu_indices}.
struct Hold {
  JobId job = 0;
  std::string node;
  std::vector<int> gpu_indices;
  std::vector<NodeGpus> parts{};  // {}: callers may leave it out of an aggregate
  // GPUs a preemption frees for `job` (src/core/preemption.h): held for it whatever its age,
  // outside max_holds, while it waits, until it starts there or the caller drops the hold.
  bool preempting = false;
};

// UsageByUser (src/core/fair_share.h): decayed GPU-hours per user; fewer goes first.

// A job to start. Every decision Place makes fills `parts`, one per node, in rank order:
// a single-node job has one part; a gang (num_nodes N > 1) has N parts on N distinct nodes,
// part 0 the master node (MASTER_ADDR, the node rank 0). `node` and `gpu_indices` always
// repeat parts[0], so a caller that knows only single-node jobs reads them as before.
// reserved_bytes and cpus hold on every part's node.
struct StartDecision {
  JobId job = 0;
  std::string node;
  std::vector<int> gpu_indices;
  uint64_t reserved_bytes = 0;  // per GPU; the GPU's total for exclusive jobs
  int cpus = 0;
  std::vector<NodeGpus> parts{};  // {}: callers may leave it out of an aggregate
};

struct PlacementResult {
  std::vector<StartDecision> starts;
  // A reason for every job given that is not started, e.g.
  // "needs 1 GPU with 20.0 GiB usable; best: GPU 1 with 11.2 GiB", in placement order.
  // Jobs of one shape share one text, so a pass over a long queue builds a string per
  // shape, not per job.
  struct Waiting {
    JobId job = 0;
    uint32_t reason = 0;  // index in reason_texts
  };
  std::vector<Waiting> waiting;
  std::vector<std::string> reason_texts;
  const std::string& ReasonOf(const Waiting& w) const { return reason_texts[w.reason]; }
  // The same as (job, text) pairs: for tests and callers with short queues.
  std::vector<std::pair<JobId, std::string>> Reasons() const;
  // Holds in force after this pass; the caller hands them back to the next pass so a
  // hold stays on the same GPUs while it still fits there.
  std::vector<Hold> holds;
};

// usable = free - sum over holdings of max(0, reserved - used_now) - headroom, floored at 0.
uint64_t UsableBytes(const GpuState& gpu, const PolicyConfig& config, UnixMs now);

// The bytes `job` needs on `gpu` (its percent of the total, or its bytes).
uint64_t NeededBytes(const PendingJob& job, const GpuState& gpu);

// Places `jobs` in order: priority (higher first), then fair share (the user with fewer
// decayed GPU-hours in `usage` first; a user not in it has none), then submit order, then
// id. A later job may start where an earlier one does not fit (backfill). Decisions already
// taken in this pass count against the GPUs for later jobs.
//
// Starvation protection: a job that has waited longer than config.aging_ms (since it was
// queued, or since its not_before if later) and does not fit gets the GPUs where it would
// fit soonest held for it (result.holds); no other job starts there until it starts. A
// previous hold (`previous_holds`) stays on its GPUs while they are still a valid choice.
// Aged jobs are served in order, each holding GPUs no earlier one holds.
//
// Per-user limits: a job whose user would pass config.max_gpus_per_user or already has
// config.max_jobs_per_user attempts (NodeState::use_by_user plus this pass's starts) is not
// started, and gets no GPUs held; later jobs of other users still start. Its reason names
// the limit ("waiting: ada has 2 jobs running; max_jobs_per_user = 2").
//
// Node choice: a job goes only to nodes that accept new jobs (NodeState::accepts_new), are
// in its nodes_allowed (when not empty) and not in its nodes_excluded; its reason says so
// when that is why it waits. A gang (num_nodes N > 1) starts only when N distinct such nodes
// each have its GPUs (chosen on each node as for a single-node job); of the nodes that
// could, those whose chosen GPUs are closest, then rank best by the placement rule (spread:
// fewest trainq jobs, then most usable memory; pack: most GPUs in use, then least usable
// memory left), then the first by name, in that order; part 0 is the first of them. Gangs take the
// plain rule even with config.workload. A gang counts total_gpus() for max_gpus_per_user,
// one attempt for max_jobs_per_user, and an aged gang gets GPUs held on N nodes.
//
// GPU choice: only GPUs in config.devices (when not empty) and with fewer than
// config.max_jobs_per_gpu trainq attempts (when > 0), and whose facts are no older than
// config.stale_after_ms. Exclusive jobs take only GPUs with no holding, no foreign process and
// at most config.whole_max_used_bytes used; no job joins a GPU held exclusively. Host memory is
// checked where the node enforces it. Multi-GPU jobs take GPUs of one node, closest in topology
// where it is known (least worst, then summed, pairwise distance). Among GPUs that fit, spread
// takes those with the fewest trainq jobs, then the most usable memory; pack those in use, then
// best fit; with config.workload, the choice that raises the node's expected fragmentation least
// (FGD), ties to best fit.
PlacementResult Place(std::span<const PendingJob> jobs, std::span<const NodeState> nodes,
                      const PolicyConfig& config, UnixMs now, const UsageByUser& usage = {},
                      std::span<const Hold> previous_holds = {});

// As Place, for jobs already in placement order (PlacedBefore): a caller keeping its queue
// in an ordered index need not sort the world on every pass.
PlacementResult PlaceOrdered(std::span<const PendingJob* const> ordered,
                             std::span<const NodeState> nodes, const PolicyConfig& config,
                             UnixMs now, std::span<const Hold> previous_holds = {});

// The placement order: whether `a` goes before `b`.
bool PlacedBefore(const PendingJob& a, const PendingJob& b, const UsageByUser& usage);

// One GPU as the job sees it, for `trainq explain`.
struct GpuExplanation {
  std::string node;
  int index = 0;
  uint64_t usable_bytes = 0;
  uint64_t total_bytes = 0;
  std::vector<JobId> jobs;  // trainq attempts on it
  int foreign_processes = 0;
  bool fits = false;  // the job's share of it would fit there now
  // why the job may not use it ("not in the device allowlist", "node drained"), or ""
  std::string closed;
  JobId held_for = 0;  // the aged job it is held for, 0: none
};

struct Explanation {
  JobId job = 0;
  bool waiting = false;      // among `jobs`; nothing else below is set otherwise
  bool would_start = false;  // a pass now would start it
  std::string reason;        // as the pass would write it ("" when it would start)
  int position = 0;          // 1-based, in placement order
  int ahead = 0;             // waiting jobs placed before it
  std::string user;
  double user_gpu_hours = 0;  // decayed, as in `usage`
  int user_rank = 0;          // 1-based among the users with waiting jobs, fewest hours first
  int users_waiting = 0;
  std::vector<GpuExplanation> gpus;
  std::vector<Hold> holds;  // in force after the pass
};

// The numbers behind one job's reason: the same pass Place runs, seen from `job`.
Explanation Explain(JobId job, std::span<const PendingJob> jobs, std::span<const NodeState> nodes,
                    const PolicyConfig& config, UnixMs now, const UsageByUser& usage = {},
                    std::span<const Hold> previous_holds = {});

// When time alone can change what a pass decides, so the caller wakes for it even while
// nothing else happens: the earliest moment after `now` at which a waiting job's backoff
// ends (not_before), a waiting job passes config.aging_ms, a holding whose usage is
// unknown leaves its ramp-up window, or a GPU's facts turn stale (config.stale_after_ms). 0 when
// none is ahead. Time limits of running jobs need no wake-up: the shim enforces them and its exit
// wakes the loop.
UnixMs NextPassDue(std::span<const PendingJob* const> waiting, std::span<const NodeState> nodes,
                   const PolicyConfig& config, UnixMs now);

// A held job's reason, naming who held it ("": not known): "held by carol: no pass starts it
// until trainq release 12". HeldBy reads the name back from a reason ("" for none), so the
// passes that write the reason again keep it.
std::string HeldReason(int64_t job, const std::string& by);
std::string HeldBy(std::string_view reason);

}  // namespace trainq
