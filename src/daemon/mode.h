// One machine or a cluster: where a job is placed, where node facts come from, and who
// decides. The daemon chooses a Mode once, at start, from its store (a cluster's store is
// Redis; docs/cluster.md), with the Trust that goes with it (trust.h), and no other part asks
// which it is: they call the mode, or what it hands out (its Site, its Shipping). The mode
// answers in data; the HTTP answers are the routes' (routes.cc).
//
// LocalMode (local_mode.cc): this node alone; the scheduler always places, the agent starts.
// ClusterMode (cluster.cc): nodes that share one store; the node holding the leader lease
// places over every node's last report, and each node's agent starts what is placed on it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "src/api/http.h"
#include "src/core/spec.h"
#include "src/daemon/agent.h"
#include "src/daemon/gpu_sampler.h"
#include "src/daemon/scheduler.h"
#include "src/daemon/shipping.h"

namespace trainq {

class Mode {
 public:
  virtual ~Mode() = default;
  // Whether this node is one of a cluster's (listings then name each job's node).
  virtual bool Cluster() const { return false; }
  // What a starting job waits for before its command runs (a cluster: the copy of what it
  // ships, "staging 1.2 GiB/3 GiB to n2 from n1, 95 MiB/s"); "" for nothing.
  virtual std::string StartingReason(const Job&) const { return ""; }
  // Who places, on which nodes, and how a decision is carried out (scheduler.h).
  virtual Scheduler::Site& site() = 0;
  // What the mode needs before anything runs (a cluster: its key).
  virtual Status Check() const { return Status::Ok(); }
  // Starts taking part: a cluster subscribes to its events, beats, takes part in the leader
  // election and starts what is placed here. Arms no timer (tests drive OnTimer).
  virtual void Join() {}
  // The periodic duties, where the mode has any (a cluster's beat and lease), and the timer
  // that runs them (armed by Serve).
  virtual void OnTimer() {}
  virtual void ArmTimer() {}
  // The daemon stops: timers and subscriptions end; a leader resigns.
  virtual void Stop() {}
  // This node's GPUs or attempts changed: whoever places hears of it.
  virtual void Report() {}
  // The API's address as other nodes reach it ("" none), once the daemon listens.
  virtual void SetApiUrl(std::string url) { (void)url; }

  // Whether an attempt recorded for this node whose run dir does not exist yet is still to
  // start (a cluster's leader placed it while this daemon was away), rather than one whose
  // run dir was removed.
  virtual bool AttemptsStartLater() const { return false; }

  // Submits about to be stored (a cluster signs them for the node that will run them).
  virtual void BeforeStore(std::vector<JobSpec>& specs) { (void)specs; }
  // Submits stored as `ids` (on the loop).
  virtual void Stored(const std::vector<JobSpec>& specs, const std::vector<JobId>& ids) {
    (void)specs;
    (void)ids;
  }
  // What a submit is judged against, beyond this node (a cluster: its largest node).
  virtual void Limits(SpecLimits& limits) { (void)limits; }
  // A gate's job runs where its process is: here.
  virtual void PinHere(JobSpec& spec) { (void)spec; }
  // Cancels, for the user `by`, a job that runs nowhere on this node (kConflict: it runs
  // nowhere at all).
  virtual Status CancelElsewhere(const Job& job, const std::string& by, std::string* message) = 0;
  // Whether an attempt's log is on another node (then AskNode fetches it).
  virtual bool LogElsewhere(const Attempt& attempt) const {
    (void)attempt;
    return false;
  }
  // GET `path`?`query` (or POST `body`) of node `node`'s API, as this node's signed request:
  // another node's log, GPU history or batch-job step. `what` names what is asked for in the
  // errors ("the log of job 12 attempt 2"). One machine has no other node: kNotFound.
  virtual Result<HttpResponse> AskNode(const std::string& node, const std::string& method,
                                       const std::string& path,
                                       const std::map<std::string, std::string>& query,
                                       const std::string& body, std::string_view what) = 0;
  // Where a switched connection to `path`?`query` of node `node` goes (an interactive
  // session's terminal on another node): that node's API asked the same switch, as this
  // node's signed request. One machine has no other node: kNotFound.
  virtual Result<TunnelTarget> NodeTunnel(const std::string& node, const std::string& path,
                                          const std::map<std::string, std::string>& query,
                                          const std::string& protocol, std::string_view what) {
    (void)path, (void)query, (void)protocol;
    return Status::NotFound("node: " + std::string(what) + " is on node '" + node +
                            "', and this machine has no other");
  }
  // The nodes as GET /v1/nodes shows them: this one alone, or every node of the cluster.
  virtual Result<nlohmann::json> Nodes() = 0;
  // Every node's name and state (up, lost, drained), for the event stream.
  virtual Result<std::vector<std::pair<std::string, std::string>>> NodeStates() = 0;
  // Stops placing on node `name` (or places there again), or removes a node gone for good.
  // One machine has no node to drain: kInvalid saying what a cluster needs.
  virtual Status Drain(const std::string& name, bool drain) = 0;
  virtual Status RemoveNode(const std::string& name) = 0;
  // Whether this node sees the cluster's store, for its peers (GET /v1/cluster/store).
  virtual Result<nlohmann::json> StoreSeen() = 0;
  // What this node serves its peers of what jobs ship and leave (shipping.h).
  virtual Shipping& shipping() = 0;
};

// What --constraint and --gpu-type select this node by, besides its GPUs' model names (config
// node_features and gpu_type).
struct NodeLabels {
  std::vector<std::string> features;
  std::string gpu_label;
  std::vector<std::string> images{};  // the node's container store (ImageCensus)
};

// This node as the placement policy sees it: its GPUs as last sampled, and what the agent's
// attempts hold there.
NodeState ThisNode(const std::string& name, int cpu_slots, const Agent& agent,
                   const GpuSampler& sampler, const NodeLabels& labels);
// This node's GPUs and their use by its attempts, as a cluster's NodeRecord::info carries
// them (and GET /v1/nodes reads them back).
std::string NodeInfo(int cpu_slots, const Agent& agent, const GpuSampler& sampler,
                     const NodeLabels& labels);
// What this node offers a submit's --gpu-type and --constraint (SpecLimits::offers).
NodeOffer ThisOffer(const std::string& name, const GpuSampler& sampler, const NodeLabels& labels);

}  // namespace trainq
