// Elastic jobs (docs/scheduling.md, "Elastic jobs"): a job that runs on any GPU count between
// its min and max, on one node. A waiting elastic job is placed at its min; these functions
// decide when one grows into GPUs nothing else can use and when one shrinks toward its min to
// make room for a waiting job. Pure functions of their inputs, shared by the daemon's
// scheduler and the simulator, as placement is: no I/O, no clock.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "src/core/placement.h"
#include "trainq/job.h"

namespace trainq {

// One elastic job as the resize decisions see it: placed by this pass, or running.
struct ElasticRun {
  JobId job = 0;
  int priority = 0;
  std::string user{};  // whose: growth stays within max_gpus_per_user
  int min_gpus = 1;
  int max_gpus = 1;
  NodeGpus where;  // the node and GPUs it holds (or is about to start on)
  // This pass starts it: it grows before it starts, with no restart and no rate limit.
  bool starting = false;
  // When its running attempt started, at its present size: a resize waits min_runtime_ms
  // from here.
  UnixMs sized_at = 0;
  bool stopping = false;  // being stopped already (cancel, preemption, a resize)
  int64_t stop_ms = 0;    // how long its stop takes: its --signal lead plus the grace period

  int gpus() const { return static_cast<int>(where.gpu_indices.size()); }
};

struct ElasticConfig {
  // An attempt keeps its size at least this long (PreemptConfig::min_runtime_ms): a resize is
  // a restart, and this bounds how often a job pays for one.
  int64_t min_runtime_ms = 10 * 60 * 1000;
};

// One job's new size: `to` is a subset of ElasticRun::where when it shrinks, a superset when
// it grows. An elastic gang that shrinks restarts on `to_parts` (its parts but one; `to` is
// their first), from `from_nodes` nodes.
struct Resize {
  JobId job = 0;
  NodeGpus to;
  int from_gpus = 0;
  std::vector<NodeGpus> to_parts{};
  int from_nodes = 0;
  // "grows from 1 to 2 GPUs (GPU 1 was idle)", "shrinks from 4 to 2 GPUs for job 31".
  std::string reason;
};

// An elastic gang (--nodes MIN:MAX) as its growth sees it: placed by this pass, or running.
// It grows by whole parts, each a node's share of its request, that join its rendezvous: no
// restart of the parts it has (torchrun restarts their workers at the new world size).
struct GangRun {
  // One part's request (gpus, memory, cpus and host memory per node, where it may go, GPU type
  // and constraints, user, priority); its num_nodes is not read.
  PendingJob shape;
  std::vector<NodeGpus> parts;  // where it runs, in rank order
  bool starting = false;        // as ElasticRun::starting
  UnixMs sized_at = 0;          // when it started, or last grew
  bool stopping = false;
  int64_t stop_ms = 0;  // as ElasticRun::stop_ms

  int nodes() const { return static_cast<int>(parts.size()); }
};

// A waiting job that starts where shrinking elastic jobs free GPUs: preemption's decision
// (src/core/preemption.h), with resizes instead of victims.
struct Shrink {
  JobId job = 0;
  std::vector<Resize> resizes;
  std::vector<NodeGpus> parts;  // where it will start once they stopped
  UnixMs ready_at = 0;          // now + the longest stop among them
  // "will start when job 12 shrinks from 4 to 2 GPUs (in 1m10s)".
  std::string reason;
};

// Adds `h` to each GPU of `part` in `nodes`, and the GPUs to `user`'s use there (when not ""):
// a decision of this pass counted before the next.
void HoldOn(std::span<NodeState> nodes, const NodeGpus& part, const Holding& h,
            const std::string& user = "");

// Whether a running attempt may change size now: past min_runtime_ms at this size and not
// stopping. A starting job may always grow.
bool MayResize(const ElasticRun& run, const ElasticConfig& config, UnixMs now);

// The growth of this pass, after Place decided its starts (`nodes` count them, `holds` are the
// pass's): each node's idle GPUs (no holding, no foreign process, no more than
// whole_max_used_bytes used, open by the device allowlist and pauses, fresh facts, not held for
// another job, on a node that accepts new jobs) go one at a time to the elastic job there with
// the fewest GPUs that may grow (MayResize, below its max, its user below max_gpus_per_user
// with the nodes' use_by_user and what this call adds), lower job id first. A job that
// starts takes them with it; a running one grows only to at least twice its size, because
// every resize costs it a restart. GPUs are added in index order.
std::vector<Resize> ChooseGrowth(std::span<const ElasticRun> runs, std::span<const NodeState> nodes,
                                 std::span<const Hold> holds, const PolicyConfig& policy,
                                 const ElasticConfig& config, UnixMs now);

// Shrinks before preemption: for each of `waiting` (the jobs a pass left waiting for GPUs, in
// placement order; waiting gangs are left to preemption), the fewest GPUs taken from elastic
// jobs of no higher priority that may resize, toward their min, on one node, such that Place
// starts it there (judged on a copy of the node without them). A job larger than its min gives
// up GPUs first, the one with the most above its min first. Failing that, an elastic gang of
// `gangs` above its min nodes (no higher priority, past min_runtime, not stopping) gives up the
// node of one part, its last part first, the gang furthest above its min first: it restarts on
// the others (a departed part would be a failure to torchrun's agents). Jobs are served in
// order: GPUs an earlier one takes are gone for later ones, and a job shrinks once per call.
std::vector<Shrink> ChooseShrinks(std::span<const PendingJob* const> waiting,
                                  std::span<const NodeState> nodes,
                                  std::span<const ElasticRun> runs, const PolicyConfig& policy,
                                  const ElasticConfig& config, UnixMs now,
                                  std::span<const GangRun> gangs = {});

// The hold that keeps the GPUs `s` frees for its job until it starts (Hold::preempting).
Hold ShrinkHold(const Shrink& s);

// The parts one gang grows by.
struct GangGrowth {
  JobId job = 0;
  std::vector<NodeGpus> added;  // on nodes it has no part on, in the order they are added
  int from_nodes = 0;
  // "grows from 1 to 2 nodes (gpu2 idle)".
  std::string reason;
};

// The growth of elastic gangs in this pass, after Place decided its starts (`nodes` count
// them, `holds` are the pass's): a node where Place would start one more part of a gang on
// idle GPUs only (as ChooseGrowth's: no holding, no foreign process, open, fresh, not held for
// another job, the node accepting new jobs), and that the gang has no part on, goes to the gang
// with the fewest nodes that may grow (MayResize's rule, below its max_nodes), lower job id
// first, one node at a time. A starting gang takes them with it; a running one grows only to
// at least 1.5 times its node count, as a running elastic job does.
std::vector<GangGrowth> ChooseGangGrowth(std::span<const GangRun> runs,
                                         std::span<const NodeState> nodes,
                                         std::span<const Hold> holds, const PolicyConfig& policy,
                                         const ElasticConfig& config, UnixMs now);

}  // namespace trainq
