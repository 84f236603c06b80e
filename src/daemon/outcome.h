// What an ended attempt means for its job: succeeded, failed, cancelled, or back to the
// queue after an out-of-memory death. Pure: the caller reads the exit record and log tail.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/os/run_dir.h"
#include "src/store/store.h"

namespace trainq {

struct OutcomeInput {
  std::optional<ExitRecord> record;  // nullopt: DecideUnrecorded's kShimDied
  std::string log_tail;
  std::vector<std::string> oom_patterns;
  int oom_retries_used = 0;  // earlier attempts of this job that died of OOM
  int retries_allowed = 3;
  int64_t backoff_ms = 30000;
  int64_t backoff_max_ms = 3600000;
  UnixMs now = 0;
  int64_t time_limit_ms = 0;  // the job's --time, for the reason; 0: none
  int master_port = 0;        // the attempt's MASTER_PORT; 0: none
  std::string cancelled_by;   // who cancelled it, when it was ("": not known)
  int port_retries_used = 0;  // earlier attempts ended by a taken rendezvous port
  // A container job (docs/containers.md): its runtime's exit codes 125 to 127 with the
  // runtime's error line in the log mean the container did not start; that line is the
  // reason, word for word.
  bool container = false;
  // --signal, --requeue, --checkpoint: what a stop (ExitRecord::stop) and a warned time limit
  // say, and whether a preempted job is queued again.
  StopSpec stop{};
};

// How often a job whose rendezvous port another program took is queued again at once.
inline constexpr int kPortRetries = 3;
// The start of such an attempt's end reason, by which earlier ones are counted.
inline constexpr std::string_view kPortTakenReason = "rendezvous port ";

// Cancelled beats everything; a stop the daemon asked for (ExitRecord::stop) comes next: a job
// that asked to be requeued, or was preempted with --requeue, is queued again under the same id
// (the attempt ends cancelled, the reason the stop's: "requeued by itself", "preempted by job 31
// (priority 100)"); one preempted without --requeue ends cancelled, saying so; a shim that fenced
// itself (its node's heartbeat lapsed) fails the attempt and queues the job again, whatever the
// exit status says; a stop at the time limit is a failure "time limit (2h30m)" whatever the exit
// status or the log says (never an OOM retry: the limit would only fire again); then success; a
// failure after the cgroup's OOM killer acted is "host memory limit 4.0 GiB reached (--mem-limit);
// killed by SIGKILL" (never a GPU OOM retry either); then OOM (retry or fail), a rendezvous port
// another program took between placement and bind (queued again at once, up to kPortRetries times,
// not counted as OOM), other failures.
AttemptEnd DecideOutcome(const OutcomeInput& in);

// Why an attempt ends with no exit record. Its processes are stopped before the end is
// recorded (docs/architecture.md, "The shim and re-adoption").
enum class Unrecorded {
  kShimDied,       // the shim is gone (kill -9, a crash) and wrote no exit.json
  kNeverStarted,   // run dir without shim.json: the daemon stopped before the shim ran
  kRunDirMissing,  // the run dir was removed, records and all
};

// When a cancel of the attempt reached the daemon, if it did.
enum class CancelAt {
  kNever,
  kBeforeTheEnd,   // the daemon had signalled the shim when it found it gone
  kWhileStopping,  // the shim was already gone; its processes were being stopped
};

struct UnrecordedInput {
  Unrecorded why = Unrecorded::kShimDied;
  std::string run_dir;
  size_t stopped = 0;    // processes of the attempt found alive and stopped
  size_t survivors = 0;  // of those, alive still when the daemon gave up (stuck in D state)
  UnixMs now = 0;
  CancelAt cancel = CancelAt::kNever;
};

// kShimDied fails the job; the other two queue it again (nothing says the job went wrong).
// A cancel overrides both: one sent before the end makes any end cancelled (the daemon's own
// stop may be what ended a shim that had no record yet: that is no failure of the job), one
// sent while the processes were being stopped cancels what would be queued again but leaves
// a death that came first a failure. The reason says why, and how many processes were stopped
// or left.
AttemptEnd DecideUnrecorded(const UnrecordedInput& in);

// "SIGKILL" for 9, "signal 64" for unknown numbers.
std::string SignalName(int sig);

}  // namespace trainq
