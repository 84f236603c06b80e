// The daemon's seam to the processes it supervises: every shim is started, re-adopted,
// signalled and watched through a ShimLauncher. The real one (MakeShimLauncher) spawns
// `trainq-shim RUN_DIR` and watches pidfds on the event loop; the fake one
// (fake_shim_launcher.h) lets unit tests start and end "shims" by hand, with no process and
// no sleep, the way ninja tests its build loop against a fake command runner.
// Thread: the event loop's, like the daemon.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/os/process.h"
#include "trainq/status.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace trainq {

// A shim process, named by pid and start time so a reused pid is never mistaken for it.
struct ShimProcess {
  int64_t pid = 0;
  uint64_t start_ticks = 0;
};

class ShimLauncher {
 public:
  // Runs on the event loop once the shim has exited (never while it still runs).
  using ExitHandler = std::function<void()>;

  virtual ~ShimLauncher() = default;
  // Starts the shim of `run_dir` (its spec.json written) in a new session; kConflict when
  // another shim holds the run dir, kIo when it could not be started.
  virtual Result<ShimProcess> Launch(const std::string& run_dir, ExitHandler on_exit) = 0;
  // Runs on the event loop with what an adoption found.
  using AdoptHandler = std::function<void(Result<ShimProcess>)>;

  // A shim started before this daemon did. Never waits: `on_adopted` gets the shim (watched
  // from then on: `on_exit` runs once it has exited), or kNotFound when none is alive for
  // `run_dir`. It runs before Adopt returns when the run dir tells at once; a shim that holds
  // its lock but has not written shim.json yet (started a moment before) is asked again from
  // a timer every 10 ms, for up to 2 s, then kUnavailable. StopWatching drops an adoption
  // still waiting: neither handler runs.
  virtual void Adopt(const std::string& run_dir, AdoptHandler on_adopted, ExitHandler on_exit) = 0;
  // A process trainq did not start (the Python gate's, named by pid and start time), watched
  // as the shim of `run_dir` is: `on_exit` runs once it has ended. kNotFound when it is gone,
  // kPermission when it does not run as `uid` (the job's user): a process of another user,
  // one that took the gate's pid, is never watched, and so never signalled.
  virtual Result<ShimProcess> WatchProcess(const std::string& run_dir, const ShimProcess& process,
                                           int64_t uid, ExitHandler on_exit) = 0;
  // Signals a shim, or any process named by pid and start time (an attempt's process found
  // by AttemptProcesses); kNotFound when it is gone. A watched process is signalled through
  // its pidfd, and a watched gate's only while it still runs as its user.
  virtual Status Signal(const ShimProcess& process, int sig) = 0;
  // Every live process with its parent: GPU processes are traced up to their shim.
  virtual std::vector<ProcStat> Processes() = 0;
  // The live processes of the attempt in `run_dir` whose shim was `shim` ({0, 0}: none known),
  // wherever they are now: its shim if it still lives, and what its command started, found by
  // the TRAINQ_RUN_DIR in their environment or the shim's session (AttemptProcesses in
  // src/os/process.h). Asked when a shim is gone without an exit record.
  // Where the attempt has a cgroup, its cgroup.procs is the authority (src/os/process.h).
  virtual std::vector<ProcStat> AttemptProcesses(const std::string& run_dir,
                                                 const ShimProcess& shim) = 0;
  // The attempt (its run dir) process `pid` carries in its environment (ProcessRunDir).
  virtual std::optional<std::string> RunDirOf(int64_t pid) = 0;
  // Removes the attempt's cgroup, if it has one, once AttemptProcesses finds none of its
  // processes left (its shim died before it could). Best effort: a failure is logged.
  virtual void RemoveAttemptCgroup(const std::string& run_dir) = 0;
  // Runs the attempt's RunSpec::cleanup (a container's `rm --force`) as its shim would have
  // once the tree was gone, detached and as the job's user, for an attempt whose shim died.
  virtual void RunCleanup(const std::string& run_dir) = 0;
  // Stops watching every shim (the daemon is stopping; the shims keep running).
  virtual void StopWatching() = 0;
};

// `shim` starts each shim (ShimCommand: trainq-shim, or trainqd shim); shims write to
// `daemon_log_fd` (-1: /dev/null) until they open the job's log. `cgroups`: where attempts'
// cgroups are (SetUpCgroups), named by AttemptCgroupName(run_dir).
std::unique_ptr<ShimLauncher> MakeShimLauncher(boost::asio::io_context& io, ShimCommand shim,
                                               int daemon_log_fd, CgroupHost cgroups);

}  // namespace trainq
