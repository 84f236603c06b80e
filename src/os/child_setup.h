// Helpers for code that runs between fork and exec (SpawnShim, the shim's command child).
// Internal to src/os. Functions in namespace `child` are async-signal-safe: raw system calls,
// no allocation, no locks, so they are safe after fork in a multithreaded daemon.
// The parent learns why a child failed through a close-on-exec pipe: EOF means exec worked.
#pragma once

#include <signal.h>

#include <optional>
#include <string>
#include <vector>

#include "src/os/fd.h"
#include "trainq/status.h"

namespace trainq {

// argv/envp for execve, built before fork (the child must not allocate).
class CStringArray {
 public:
  CStringArray() = default;
  explicit CStringArray(std::vector<std::string> strings);
  CStringArray(CStringArray&&) noexcept = default;
  CStringArray& operator=(CStringArray&&) noexcept = default;
  char* const* data() const { return ptrs_.data(); }  // null-terminated

 private:
  std::vector<std::string> strings_;
  std::vector<char*> ptrs_;
};

struct CloexecPipe {
  UniqueFd read;
  UniqueFd write;
};
Result<CloexecPipe> MakeCloexecPipe();

// What a child reported before it gave up: the step (caller-defined) and errno.
struct ChildFailure {
  int step = 0;
  int err = 0;
};
// Reads the report pipe until EOF. nullopt: the child reached exec (or died silently).
std::optional<ChildFailure> ReadChildReport(int read_fd);

namespace child {

// Duplicates `fd` to a number >= 10, close-on-exec, so that installing fds 0..3 cannot
// clobber it. -1 on error.
int MoveHigh(int fd);
// Default dispositions (ignored signals would survive exec) and exactly `blocked` blocked
// (nullptr: none). The mask is set first, so no signal of `blocked` is ever unblocked.
void ResetSignals(const sigset_t* blocked = nullptr);
// Makes fds[i] the child's fd i (not close-on-exec; a negative fds[i] leaves fd i as it is)
// and, with `cloexec_rest`, every fd >= count close-on-exec. count <= 4. False on error (errno
// set).
bool InstallFds(const int* fds, int count, bool cloexec_rest = true);
// flock(LOCK_EX|LOCK_NB), retried for ~100 ms: a probe (RunDirLocked) holds the lock only
// for an instant, a live shim holds it for its whole life. 0 or the errno.
int LockExclusive(int fd);
// Reports {step, err} through `report_fd` and exits with `code`.
[[noreturn]] void Fail(int report_fd, int step, int err, int code);

}  // namespace child
}  // namespace trainq
