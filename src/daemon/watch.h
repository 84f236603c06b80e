// What people watch the daemon through (docs/dashboard.md): the GPUs over the last hour
// (GET /v1/gpus/history), the live event stream (GET /v1/events, Server-Sent Events) and
// Prometheus's /metrics, with the counters behind it. One object, on the loop's thread.
//
// The event stream learns of jobs by looking at the store, not from each code path that
// changes one: what another node of a cluster did reads the same as what this one did. It
// looks once a second while anyone follows, and soon after a poke (a submit, a start, an end
// here); a look reads the waiting and running jobs and those newer than the last it saw, and
// tells each change in the order a job's life has (submitted, started, state, ended).
#pragma once

#include "src/api/asio.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/api/http.h"
#include "src/core/placement.h"
#include "src/daemon/config.h"
#include "src/daemon/gpu_history.h"
#include "src/daemon/gpu_sampler.h"
#include "src/daemon/metrics.h"
#include "src/os/clock.h"
#include "src/store/store.h"

namespace trainq {

class Watch {
 public:
  struct Parts {
    boost::asio::io_context* io = nullptr;
    Store* store = nullptr;
    const Clock* clock = nullptr;
    const Config* config = nullptr;  // the settings in force
    const GpuSampler* sampler = nullptr;
    std::string node;
    // This node's GPUs as placement sees them (holdings included), and the policy in force.
    std::function<NodeState()> this_node;
    std::function<PolicyConfig()> policy;
    // Every node and its state (up, lost, drained): Mode::NodeStates.
    std::function<Result<std::vector<std::pair<std::string, std::string>>>()> node_states{};
    // Open API connections (HttpServer::Connections); null: none counted.
    std::function<size_t()> connections{};
  };
  explicit Watch(Parts parts);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  DaemonCounters& counters() { return counters_; }
  const GpuHistory& history() const { return history_; }

  // A GPU sample was taken: kept in the history and sent to followers.
  void Sampled();
  // Job `job` reached a done state on this node: counted.
  void Ended(const Job& job);
  // Something about the jobs changed here: followers hear of it soon.
  void Poke();
  // The daemon stops: every stream ends.
  void Stop();

  // GET /v1/gpus/history?since=MS
  void History(const HttpRequest& req, Responder& respond);
  // GET /v1/events
  void Events(const HttpRequest& req, Responder& respond);
  // GET /metrics
  void Metrics(const HttpRequest& req, Responder& respond);

  size_t followers() const { return followers_.size(); }
  // A look at the store now (the timers call it; tests too).
  void Look();
  // Writes a comment to every follower: a vanished client is found when its write fails.
  void KeepAlive();

 private:
  struct Follower {
    std::shared_ptr<StreamBody> body;
    uint64_t dropped = 0;  // messages it missed since it last had room
  };
  struct Seen {
    JobState state = JobState::kQueued;
    int attempt = 0;
  };
  void Publish(const std::string& type, const std::string& data);
  void TellJob(const Job& job, const char* kind, JobState state);
  // What changed since `seen` (nullptr: a job new to the look), told in life order.
  void TellChanges(const Job& job, const Seen* seen);
  Status Prime();
  void ArmLook(int64_t after_ms);
  void ArmKeepAlive();
  void LookNodes();
  // dcgm-exporter's job-mapping files (hpc_job_mapping_dir) for the last sample.
  void WriteJobMapping();

  Parts p_;
  GpuHistory history_;
  DaemonCounters counters_;
  std::vector<Follower> followers_;
  bool primed_ = false;
  JobId last_id_ = 0;
  std::unordered_map<JobId, Seen> active_;
  std::map<std::string, std::string> nodes_;
  std::map<int, std::string> mapped_;  // what each GPU's mapping file holds
  std::string mapping_dir_;            // where mapped_ was written
  boost::asio::steady_timer look_timer_;
  boost::asio::steady_timer keepalive_timer_;
  bool look_armed_ = false;
  int64_t look_at_ms_ = 0;  // MonotonicNs / 1e6 of the armed look
  bool stopping_ = false;
};

}  // namespace trainq
