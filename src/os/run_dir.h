// The run directory of one attempt, the contract between the daemon
// and the shim. All records are JSON, written atomically (temp file, rename); not fsync'd:
// they must survive a crash of the daemon or the shim, and a power loss ends the jobs too.
//   spec.json  written by the daemon before the shim starts: what to run
//   lock       flock'ed by the shim for its whole life: held <=> the shim is alive
//   shim.json  written by the shim once it runs: its pid and start time
//   output.log stdout and stderr of the command, kept within log_max_bytes by the shim
//   exit.json  written by the shim after the command ended
//   gpu_activity written by the daemon while an interactive session's GPUs are busy
//              (RunSpec::session_activity_file)
//   control.json written by the daemon, then SIGUSR1 to the shim: stop the job with a warning
//              (a preemption, a requeue) or send its processes a signal (ShimControl)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/os/cgroup.h"
#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

struct RunSpec {
  std::vector<std::string> command;  // argv, exec'd with execvpe semantics (PATH from env)
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> env;  // the whole environment
  std::string log_path;
  // The log's limit for this attempt (config log_max_size); 0: none. The shim keeps the
  // first half and the latest output with a marker between (src/os/log_writer.h).
  uint64_t log_max_bytes = 0;
  int64_t grace_ms = 10000;  // SIGTERM -> SIGKILL
  // Wall-clock limit of the command from its start; 0: none. The shim enforces it (so it
  // holds while the daemon is down): SIGTERM to the tree, grace_ms, SIGKILL.
  int64_t time_limit_ms = 0;
  // --signal (JobSpec::stop): warn_signal (0: none) sent warn_lead_ms before the time limit
  // (at the start when the limit is shorter) and before a ShimControl stop; to every process
  // of the tree that handles it, or to the batch shell only (warn_batch_only). checkpoint:
  // --checkpoint's glob, relative to cwd, checked once the command ended after a warning.
  int warn_signal = 0;
  int64_t warn_lead_ms = 0;
  bool warn_batch_only = false;
  std::string checkpoint;
  // How the batch shell of an sbatch script is known among the command's processes: an
  // argument (argv[0] or [1]) ending so ("/slurm_script"); "": the command's own process.
  std::string batch_script;
  // Self-fencing (cluster mode; docs/architecture.md, "Self-fencing"): the daemon's fence
  // file (absolute path, src/os/fence.h) and how stale its stamp may grow. When the node's
  // heartbeat was last renewed more than fence_after_ms ago (or the file has been absent or
  // unreadable that long since the shim started), the shim stops the tree as on cancel and
  // records ExitRecord::fenced. fence_file "": no fencing (one machine). The daemon picks
  // fence_after_ms so that the tree is gone before the leader may judge the node lost:
  // fence_after_ms + FenceCheckIntervalMs + grace_ms well within node_timeout.
  std::string fence_file;
  int64_t fence_after_ms = 0;
  // The umask the command runs with (0..0777), the one the daemon started with: the daemon
  // and shim run under 077 for their own files, and a job must not inherit that. -1 (absent
  // from spec.json): the shim's own.
  int umask = -1;
  // Who the command runs as (docs/operations.md, "Jobs run as their submitter"). uid -1
  // (absent from spec.json): the shim's own user, as the personal daemon wants. Otherwise a
  // shim running as root creates the log owned by uid:gid (0600), drops to the user (groups
  // of `user` from getgrouplist, gid, uid) before the command's chdir and exec, and sets
  // HOME, USER and LOGNAME to `home` and `user`.
  int64_t uid = -1;
  int64_t gid = -1;
  std::string user;
  std::string home;
  // The attempt's control group (src/os/cgroup.h): the shim creates it with its limits, the
  // command joins it before exec (the shim itself stays outside, so a job at its memory limit
  // never takes its supervisor with it), its processes are the tree the shim stops, and the
  // shim removes it once they are gone. version kNone (absent from spec.json): none.
  CgroupSpec cgroup;
  // Run once the command's tree is gone, whatever its end (a container job: the runtime's
  // `rm --force NAME`, for a container its killed client left behind). Empty: nothing.
  std::vector<std::string> cleanup;
  // Run before the command, as its user with its environment, outside its tree, and waited
  // for (rootless podman's `unshare true`: the user's namespace holder, which lives on
  // between jobs, is not started inside one job's tree). Empty: nothing.
  std::vector<std::string> prepare;
  // The GPU isolation probe (docs/containers.md, "GPU isolation"), run after `prepare` in the
  // same way: its output must list exactly `gpu_probe_expect`. Its verdict, under
  // `gpu_check_key` (the node's container setup), goes to `gpu_check_file`; a failed probe
  // fails the attempt. Empty: no probe.
  // Links the command's process makes as its user, after entering cwd, before exec: each
  // (path, target), absolute, parents made as needed; a link already at a path is replaced, a
  // file or directory there fails the attempt (docs/cluster.md, "Code and data": --stage).
  std::vector<std::pair<std::string, std::string>> links;
  // Lines the shim writes to the log before anything runs ("trainq: node n2 loads ...").
  std::vector<std::string> notices;
  std::vector<std::string> gpu_probe;
  std::vector<std::string> gpu_probe_expect;
  std::string gpu_check_file;
  std::string gpu_check_key;
  // An interactive session (JobSpec::interactive; docs/architecture.md, "Interactive
  // sessions"): the shim listens on this Unix socket (owned by the job's user, 0600), waits up
  // to session_wait_ms for the client's hello, then runs the command on a pseudo-terminal
  // (or pipes, for a client without a terminal) and relays it over the connection. The
  // client's going away hangs the session up. session_no_log: the program's output is not
  // copied into the log. "": a batch job.
  std::string session_socket;
  int64_t session_wait_ms = 60000;
  bool session_no_log = false;
  // A session with no input and no GPU use for session_idle_ms is hung up (0: never). GPU use
  // is the daemon's to see: it stamps session_activity_file (BootClockMs, as a fence stamp,
  // src/os/fence.h) while the attempt's GPUs are busy.
  int64_t session_idle_ms = 0;
  std::string session_activity_file;
  // A word the command gets at index session_tty_flag_at when the client has a terminal (a
  // container session's "--tty"); "": none.
  std::string session_tty_flag;
  int64_t session_tty_flag_at = -1;
};

// A node's GPU isolation verdict for one container setup (RunSpec::gpu_check_file).
struct GpuCheck {
  std::string key;
  bool ok = false;
  std::string problem;
};
Status WriteGpuCheck(const std::string& path, const GpuCheck& check);
Result<GpuCheck> ReadGpuCheck(const std::string& path);

// Where the daemon stamps a session's GPU use (RunSpec::session_activity_file).
inline std::string SessionActivityPath(const std::string& run_dir) {
  return run_dir + "/gpu_activity";
}

struct ShimRecord {
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/PID/stat field 22
};

struct ExitRecord {
  std::optional<int> exit_code;  // set when the command exited
  std::optional<int> signal;     // set when it was killed by a signal
  bool cancelled = false;        // the shim was told to stop it
  bool time_limit = false;       // the shim stopped it at RunSpec::time_limit_ms
  bool fenced = false;           // the shim stopped it: the node's heartbeat lapsed (fence)
  bool spawn_failed = false;     // exec failed (message in `error`)
  // The cgroup memory limit (RunSpec::cgroup) at which the kernel killed a process of the job;
  // 0: it was not reached.
  uint64_t mem_limit_hit = 0;
  // A ShimControl stop carried out: its kind ("preempted", "requeued") and reason as the daemon
  // wrote them; "": none.
  std::string stop;
  std::string stop_reason;
  // An interactive session the shim hung up, and why ("the terminal disconnected"); "": none.
  std::string hangup;
  // When the warning signal (RunSpec::warn_signal) was sent, 0: never; and with a checkpoint
  // glob, the newest matching file (relative to cwd) modified after it ("": none was).
  UnixMs warned_at = 0;
  std::string checkpoint;
  std::string error;
  UnixMs started_at = 0;
  UnixMs ended_at = 0;
};

// What the daemon asks of a running shim (control.json, then SIGUSR1; docs/architecture.md,
// "The shim and re-adoption"). Each request has a higher `seq` than the last; the shim acts on
// each new one once.
struct ShimControl {
  int64_t seq = 0;
  // Stop the job: "preempted" (the warning signal now, the stop stop_in_ms later),
  // "resized" (the same, for an elastic job that restarts at another size at once) or
  // "requeued" (asked by the job itself: stopped at once); "": no stop.
  std::string stop;
  std::string reason;  // what the exit record carries ("preempted by job 31 (priority 100)")
  int64_t stop_in_ms = 0;
  // A signal for the job's processes now (scancel --signal), to the whole tree or the
  // command's own process only; 0: none.
  int signal = 0;
  bool batch_only = false;
};

std::string SpecPath(const std::string& run_dir);
std::string LockPath(const std::string& run_dir);
std::string ShimPath(const std::string& run_dir);
std::string ExitPath(const std::string& run_dir);
std::string LogPath(const std::string& run_dir);
std::string ControlPath(const std::string& run_dir);

Status WriteRunSpec(const std::string& run_dir, const RunSpec& spec);
Result<RunSpec> ReadRunSpec(const std::string& run_dir);
Status WriteShimRecord(const std::string& run_dir, const ShimRecord& rec);
// kNotFound when absent (the shim has not written it yet).
Result<ShimRecord> ReadShimRecord(const std::string& run_dir);
Status WriteShimControl(const std::string& run_dir, const ShimControl& control);
// kNotFound when absent (nothing was asked).
Result<ShimControl> ReadShimControl(const std::string& run_dir);
Status WriteExitRecord(const std::string& run_dir, const ExitRecord& rec);
// kNotFound when absent (the command has not ended, or the shim died first).
Result<ExitRecord> ReadExitRecord(const std::string& run_dir);

// kSync: also fsync the file and then its directory, so the write survives a power loss.
// kNoSync: atomic against crashes of processes only, which is all a run dir's records
// need — a power loss ends every job with them — and it saves milliseconds a record.
enum class Durability { kSync, kNoSync };

// Writes `data` to `path` atomically: temp file in the same directory, rename.
Status WriteFileAtomic(const std::string& path, const std::string& data,
                       Durability durability = Durability::kSync);
Result<std::string> ReadFile(const std::string& path);
// The last `max_bytes` of a file (the OOM matcher reads log tails).
Result<std::string> ReadFileTail(const std::string& path, size_t max_bytes);
// mkdir -p with mode 0700 for new directories.
Status MakeDirs(const std::string& path);
// The names of the regular files in `dir`, sorted; empty when it does not exist.
Result<std::vector<std::string>> ListFiles(const std::string& dir);
// The names of every entry of `dir` (files, directories, links; not . and ..), sorted; empty
// when it does not exist.
Result<std::vector<std::string>> ListEntries(const std::string& dir);
// What the regular files in `dir` take (a run dir: the log and the records); 0 when it cannot
// be read.
uint64_t DirBytes(const std::string& dir);
// Removes a file; Ok when it is already gone.
Status RemoveFile(const std::string& path);
// Creates `path` holding `data`, mode 0600 whatever the umask, only if nothing is there (never
// through a link), synced to disk: kConflict when something is; a failed write leaves no
// file.
Status CreateNewFile(const std::string& path, std::string_view data);
// rename(2): `from` takes the place of `to` at once. kNotFound when `from` does not exist;
// the error names both ("rename FROM to TO").
Status RenameFile(const std::string& from, const std::string& to);
// Removes `path` and everything below it, links not followed (a link is removed, never what
// it points at), its directories made writable first so a read-only tree can be emptied. Best
// effort: what cannot be removed stays.
void RemoveTree(const std::string& path);
// RemoveTree, saying whether anything was there to remove, or why what was there could not
// all be removed.
Result<bool> RemoveTreeSaying(const std::string& path);

}  // namespace trainq
