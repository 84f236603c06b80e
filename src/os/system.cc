#include "src/os/system.h"

#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace trainq {

Result<std::string> SelfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ErrnoStatus("readlink /proc/self/exe", errno);
  return std::string(buf, static_cast<size_t>(n));
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

int CpuCount() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string UserName(int64_t uid) {
  if (uid < 0) return "unknown";
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf, sizeof(buf), &found) == 0 && found) {
    return found->pw_name;
  }
  return std::to_string(uid);
}

std::vector<std::pair<std::string, std::string>> CurrentEnvironment() {
  std::vector<std::pair<std::string, std::string>> env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq || eq == *e) continue;
    env.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

std::string CurrentDirectory() {
  char buf[PATH_MAX];
  return ::getcwd(buf, sizeof(buf)) ? std::string(buf) : std::string();
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Result<UniqueFd> LockFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("open " + path, errno);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return Status::Conflict(path + " is locked by another process");
    return ErrnoStatus("flock " + path, errno);
  }
  return fd;
}

Result<UniqueFd> OpenAppend(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("open " + path, errno);
  return fd;
}

namespace {

// Runs in the grandchild after fork: only async-signal-safe calls.
[[noreturn]] void ExecDetached(char* const* argv, int log_fd) {
  ::setsid();
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  if (log_fd >= 0) {
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
  }
  ::execv(argv[0], argv);
  ::_exit(127);
}

}  // namespace

Status StartDetached(const std::vector<std::string>& argv, const std::string& log_path) {
  Result<UniqueFd> log = OpenAppend(log_path);
  if (!log.ok()) return log.status();
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t child = ::fork();
  if (child < 0) return ErrnoStatus("fork", errno);
  if (child == 0) {
    // The intermediate child exits at once so the daemon is not our child (no zombie).
    pid_t grandchild = ::fork();
    if (grandchild == 0) ExecDetached(args.data(), log->get());
    ::_exit(grandchild < 0 ? 1 : 0);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::Io("could not start the daemon");
  return Status::Ok();
}

}  // namespace trainq
