// Small OS facts and actions the daemon and the CLI need, kept in src/os (docs/architecture.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/os/fd.h"
#include "src/os/users.h"  // UserName and HomeDir, which src/cli still finds here
#include "trainq/status.h"

struct stat;

namespace trainq {

// The running binary (/proc/self/exe), so the client can find `trainqd` beside itself.
Result<std::string> SelfExecutable();
// A program of trainq's installed with the running binary: beside it (a build tree), else in
// ../lib/trainq (an installed tree: bin/trainqd, lib/trainq/trainq-shim). kNotFound naming
// both places.
Result<std::string> CompanionProgram(const std::string& name);
std::string HostName();
int CpuCount();
// The machine's physical memory in bytes; 0 when unknown.
uint64_t PhysicalMemoryBytes();
// This process's soft RLIMIT_NOFILE: how many fds it may hold open.
uint64_t OpenFileLimit();
// 32 hex digits from the kernel's random source: a token no other process can guess.
std::string RandomToken();
// This process as Prometheus's process collector reports one (from /proc/self); a figure
// that cannot be read is 0.
struct ProcessStats {
  double cpu_seconds = 0;  // user and system
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  int64_t open_fds = 0;
  int64_t max_fds = 0;
  double start_time_seconds = 0;  // since the Unix epoch
};
ProcessStats SelfProcessStats();
// Nanoseconds of a clock that never steps (CLOCK_MONOTONIC): for durations.
int64_t MonotonicNs();
// The caller's environment as pairs, in order.
std::vector<std::pair<std::string, std::string>> CurrentEnvironment();
std::string CurrentDirectory();
bool IsDirectory(const std::string& path);
bool FileExists(const std::string& path);
// A stat's modification and change times in nanoseconds.
int64_t MtimeNs(const struct stat& st);
int64_t CtimeNs(const struct stat& st);
std::string GetEnv(const char* name);
// The first executable `name` in the directories of $PATH; kNotFound naming `name` if none.
Result<std::string> FindOnPath(const std::string& name);
bool IsExecutable(const std::string& path);

// flock(LOCK_EX|LOCK_NB) on `path` (created 0600); kConflict if another process holds it,
// kPermission if `path` is a symbolic link (never followed).
// The lock lives as long as the returned fd.
Result<UniqueFd> LockFile(const std::string& path);
// Whether another process holds `path` locked (as LockFile leaves it), without taking it:
// a shared probe, released at once. False when the file does not exist.
bool LockHeld(const std::string& path);

// Starts `argv` detached (double fork, new session, stdin /dev/null, output appended to
// `log_path`), and returns its pid at once; the caller then waits for it to be ready (it is
// not the caller's child: whether it still lives is kill(pid, 0)'s to tell).
Result<pid_t> StartDetached(const std::vector<std::string>& argv, const std::string& log_path);

// What a command printed (stdout and stderr interleaved) and how it ended.
struct CommandOutput {
  int exit_code = 0;  // 128 + N when killed by signal N, as a shell reports it
  std::string output;
};
// Whether a TCP listener could bind `port` on every address now, as torchrun's rendezvous
// store does (with SO_REUSEADDR, so only a port another program binds counts as taken).
bool TcpPortFree(int port);

// Runs `argv` (argv[0] a path) to its end with `input` on its stdin (/dev/null when empty);
// kIo if it cannot start. `input` is written whole before the output is read: keep it small.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, std::string_view input = "");

// Replaces this process with `argv` (argv[0] a path). Returns only on failure.
Status ExecReplace(const std::vector<std::string>& argv);

// Opens `path` for appending (O_CLOEXEC, created 0600), for the daemon's own log;
// kPermission naming `path` if it is a symbolic link (never followed).
Result<UniqueFd> OpenAppend(const std::string& path);

}  // namespace trainq
