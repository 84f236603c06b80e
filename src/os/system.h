// Small OS facts and actions the daemon and the CLI need, kept in src/os (docs/architecture.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
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
// Who this process is: its pid, effective uid and gid, and real uid.
int64_t SelfPid();
int64_t EffectiveUid();
int64_t EffectiveGid();
int64_t RealUid();
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
// Whether this process may read `path` (access(2), with its real ids).
bool IsReadable(const std::string& path);
bool IsRegularFile(const std::string& path);  // links followed
// The size of the file at `path` (links followed), or open as `fd`; nullopt when it cannot be
// stat'ed.
std::optional<uint64_t> FileSize(const std::string& path);
std::optional<uint64_t> FdSize(int fd);
// Whether `fd` is a terminal.
bool IsTerminal(int fd);
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
// A counter that processes share through the file `path` (created 0600): returns the number
// it holds (0 when new or empty) and leaves the next one there, under an exclusive flock, so
// two callers never get the same number.
Result<int64_t> NextCounterValue(const std::string& path);

// Waits up to `timeout_ms` (0: not at all) for some of `fds` to be readable, or closed at the
// other end; returns their indices in `fds`, none after the timeout or a signal.
std::vector<size_t> WaitReadable(std::span<const int> fds, int timeout_ms);
// One read(2) into `buf`, retried when a signal interrupts it: the bytes read, 0 at the end.
Result<size_t> ReadSome(int fd, std::span<char> buf);
// The same at `offset` (pread(2)), the fd's own offset unchanged.
Result<size_t> ReadAt(int fd, uint64_t offset, std::span<char> buf);
// Opens `path` to read (O_CLOEXEC; with `follow_links` false, a link is refused: kIo, ELOOP);
// kNotFound when it does not exist.
Result<UniqueFd> OpenToRead(const std::string& path, bool follow_links = true);

// Runs `handler` (which only sets a flag) when one of `signals` arrives. Slow calls it
// interrupts fail with EINTR, so a loop sees the flag at once; with `restart_calls` they go on
// (SA_RESTART: requests in flight complete).
void CatchSignals(std::span<const int> signals, void (*handler)(int), bool restart_calls = false);

// Starts `argv` detached (double fork, new session, stdin /dev/null, output appended to
// `log_path`), and returns its pid at once; the caller then waits for it to be ready (it is
// not the caller's child: whether it still lives is kill(pid, 0)'s to tell).
Result<pid_t> StartDetached(const std::vector<std::string>& argv, const std::string& log_path);

// What a command printed (stdout and stderr interleaved) and how it ended.
struct CommandOutput {
  int exit_code = 0;  // 128 + N when killed by signal N, as a shell reports it
  std::string output;
};
// The longest path a Unix socket may be bound at (sun_path, less its terminating NUL).
size_t MaxSocketPathLength();
// Who is at the other end of the Unix socket `fd` (SO_PEERCRED): the process that connected,
// or listens. kIo when the kernel does not say.
struct PeerCredentials {
  int64_t pid = 0;
  int64_t uid = -1;
  int64_t gid = -1;
};
Result<PeerCredentials> PeerOf(int fd);
// The bytes argv and the environment may take together at exec (ARG_MAX); 0 when unknown.
size_t ArgumentSpaceBytes();
// `symbol` of the shared library at `library`, loaded once (dlopen RTLD_NOW|RTLD_LOCAL, never
// unloaded). kNotFound with the loader's words when the library cannot be loaded, kInvalid
// when it has no such symbol.
Result<void*> LoadSymbol(const std::string& library, const char* symbol);

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
