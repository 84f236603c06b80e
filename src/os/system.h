// Small OS facts and actions the daemon and the CLI need, kept in src/os (docs/architecture.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/os/fd.h"
#include "trainq/status.h"

namespace trainq {

// The running binary (/proc/self/exe), so the daemon can start `trainq shim`.
Result<std::string> SelfExecutable();
std::string HostName();
int CpuCount();
// The login name of `uid`, or its number as text.
std::string UserName(int64_t uid);
// The caller's environment as pairs, in order.
std::vector<std::pair<std::string, std::string>> CurrentEnvironment();
std::string CurrentDirectory();
bool IsDirectory(const std::string& path);
bool FileExists(const std::string& path);
std::string GetEnv(const char* name);

// flock(LOCK_EX|LOCK_NB) on `path` (created 0600); kConflict if another process holds it.
// The lock lives as long as the returned fd.
Result<UniqueFd> LockFile(const std::string& path);

// Starts `argv` detached (double fork, new session, stdin /dev/null, output appended to
// `log_path`), and returns at once; the caller then waits for it to be ready.
Status StartDetached(const std::vector<std::string>& argv, const std::string& log_path);

// Opens `path` for appending (O_CLOEXEC), for the daemon's own log.
Result<UniqueFd> OpenAppend(const std::string& path);

}  // namespace trainq
