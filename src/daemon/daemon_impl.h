// The daemon's composition root: it builds the daemon's objects (the agent, the scheduler,
// the mode, the API and the smaller roles), hands each the others it calls, and runs the
// loop's edges itself: start, the socket and listeners, signals, the GPU sample timer, stop,
// and the notifications (notify.cc). Everything runs on the one event-loop thread: no locks.
//
// The OS reaches it only through seams given to the constructor: the clock, the GPU probe,
// the shim launcher and the store. Unit tests (daemon_test.cc) build it from fakes and drive
// it through its public face: the API (Handle), the timers' callbacks and the loop
// (io.poll()), with time moved by hand. See docs/architecture.md, "The daemon and its seams".
#pragma once

#include "src/api/asio.h"

#include <memory>
#include <string>
#include <vector>

#include "src/api/http.h"
#include "src/core/spec.h"
#include "src/daemon/agent.h"
#include "src/daemon/api.h"
#include "src/daemon/authenticator.h"
#include "src/daemon/cluster_key.h"
#include "src/daemon/config.h"
#include "src/daemon/daemon.h"
#include "src/daemon/dependencies.h"
#include "src/daemon/gpu_sampler.h"
#include "src/daemon/mode.h"
#include "src/daemon/notifier.h"
#include "src/daemon/runtime_config.h"
#include "src/daemon/scheduler.h"
#include "src/daemon/shim_launcher.h"
#include "src/daemon/stager.h"
#include "src/daemon/step_routes.h"
#include "src/daemon/submit_batcher.h"
#include "src/daemon/token_routes.h"
#include "src/daemon/trust.h"
#include "src/daemon/watch.h"
#include "src/os/cgroup.h"
#include "src/os/clock.h"
#include "src/os/container_host.h"
#include "src/os/gpu/gpu_probe.h"
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
  // The folder of srun and scontrol, first on a `trainq sbatch` job's PATH; "": none found.
  std::string slurm_bin_dir{};
  // A cluster node's fence stamp from a thread of its own (liveness.h); unit tests drive the
  // loop by hand and leave it off.
  bool liveness_thread = false;
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
  void Handle(HttpRequest request, Responder respond) {
    api_->Handle(std::move(request), std::move(respond));
  }

  // What the timers run. The real daemon arms asio timers for them; tests call them after
  // moving the fake clock.
  void OnSampleTimer();
  void OnWakeupTimer() { scheduler_->OnWakeupTimer(); }
  // The event stream's look at the store (its own timer runs it once a second).
  void OnWatchTimer() { watch_->Look(); }
  // When the next pass is due on time alone (OOM backoff over, a job reaching the aging
  // limit, a ramp-up window closing, a write the state dir refused to try again); 0 when
  // nothing waits on time.
  UnixMs NextWakeup() const { return scheduler_->NextWakeup(); }
  // Changed reasons the scheduler has yet to write to the store, a chunk per loop turn.
  size_t ReasonsUnwritten() const { return scheduler_->reasons_unwritten(); }
  void WriteReasonsNow() { scheduler_->WriteReasonsNow(); }

  // The mode's start and periodic duties (mode.h; a cluster's events, beat and lease).
  // StartCluster arms no timer: Serve() arms the mode's, tests call OnClusterTimer().
  void StartCluster() { mode_->Join(); }
  void OnClusterTimer() { mode_->OnTimer(); }

 private:
  // daemon.cc: the constructor's parts.
  void MakeRoles(DaemonSeams& seams, bool cluster);
  std::unique_ptr<Mode> MakeMode(ClusterStore* cluster);
  void MakeWatch();
  std::unique_ptr<Api> MakeApi();
  void Wire();
  // Returns whether the GPUs changed since the last sample, or sampling began to fail or
  // works again.
  bool SampleGpus();
  void ArmSampleTimer();
  Status OpenSocketToUsers();

  void RequestSchedule() { scheduler_->RequestSchedule(); }

  // notify.cc: job `id` reached a done state here (its end, a cancel, a dependency that
  // failed): its notifications (--notify, --mail, notify_url) are handed to notifier_.
  void JobEnded(JobId id);
  Status StartNotifier();

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
  // Declared before every role that signs or checks with it, so it outlives them.
  ClusterKey cluster_key_;                // DaemonSeams::cluster_key
  std::unique_ptr<Trust> cluster_trust_;  // a cluster's (trust.h), or null
  const Trust* trust_ = nullptr;          // cluster_trust_, or OneMachineTrust()

  std::unique_ptr<HttpServer> server_;
  DeliverFn deliver_;
  // Declared after everything its thread's deliveries read, so it stops first.
  std::unique_ptr<Notifier> notifier_;
  boost::asio::signal_set signals_{io_};
  // TRAINQ_TEST_STALL_MS: SIGUSR2 holds the loop that long (integration tests of a blocked
  // loop); unset, SIGUSR2 is not handled here.
  boost::asio::signal_set stall_signal_{io_};
  void ArmStallHook(int64_t ms);
  bool liveness_thread_ = false;
  boost::asio::steady_timer sample_timer_{io_};
  std::unique_ptr<ImageCensus> images_;     // a cluster node's container store (or null)
  std::unique_ptr<Stager> stager_;          // a cluster node's shipped code and data (or null)
  std::unique_ptr<Agent> agent_;            // the attempts this node runs
  std::unique_ptr<Scheduler> scheduler_;    // the queue's index, passes, reasons, fair share
  std::unique_ptr<SubmitBatcher> submits_;  // the group commit of submits
  std::unique_ptr<Watch> watch_;            // GPU history, event stream, /metrics
  bool stopping_ = false;

  // One machine or a cluster, chosen once at start (mode.h).
  std::unique_ptr<Mode> mode_;
  std::string address_;                  // node_address, or the host name
  std::unique_ptr<Authenticator> auth_;  // who sent a request (after what it reads)
  std::unique_ptr<TokenRoutes> tokens_;  // the token API
  std::unique_ptr<StepRoutes> steps_;    // `trainq sbatch` jobs' steps
  std::unique_ptr<Dependencies> deps_;   // moves jobs whose dependencies changed
  std::unique_ptr<Api> api_;             // the routes, calling the roles above
};

}  // namespace trainq
