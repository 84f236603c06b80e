#include "src/os/system.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "src/os/crypto/token_crypto.h"

extern char** environ;

namespace trainq {

Result<std::string> SelfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ErrnoStatus("readlink /proc/self/exe", errno);
  return std::string(buf, static_cast<size_t>(n));
}

Result<std::string> CompanionProgram(const std::string& name) {
  Result<std::string> self = SelfExecutable();
  if (!self.ok()) return self.status();
  std::string dir = self->substr(0, self->rfind('/') + 1);
  std::string beside = dir + name;
  std::string installed = dir + "../lib/trainq/" + name;
  for (const std::string& path : {beside, installed}) {
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return Status::NotFound(name + " is in neither " + beside + " nor " + installed +
                          "; reinstall trainq");
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

int64_t SelfPid() { return ::getpid(); }
int64_t EffectiveUid() { return ::geteuid(); }
int64_t EffectiveGid() { return ::getegid(); }
int64_t RealUid() { return ::getuid(); }

uint64_t PhysicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

int CpuCount() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

uint64_t OpenFileLimit() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 1 << 20;
  return rl.rlim_cur;
}

std::string RandomToken() {
  Result<std::string> hex = RandomHex(16);
  if (hex.ok()) return *hex;
  // Not before Linux 3.17: the pid and time still differ per call.
  return fmt::format("{:032}-{}-{}", 0, ::getpid(), ::time(nullptr));
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

bool IsReadable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<uint64_t> FileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.st_size);
}

std::optional<uint64_t> FdSize(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.st_size);
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

int64_t CtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
}

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

namespace {

// ELOOP from O_NOFOLLOW: a link planted where trainq creates its own file.
Status OpenFailure(const std::string& path, int err) {
  if (err != ELOOP) return ErrnoStatus("open " + path, err);
  return Status::Permission(path +
                            " is a symbolic link; trainq never follows links in its state dir: "
                            "remove the link (rm " +
                            path + ") and start again");
}

}  // namespace

Result<UniqueFd> LockFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return OpenFailure(path, errno);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return Status::Conflict(path + " is locked by another process");
    return ErrnoStatus("flock " + path, errno);
  }
  return fd;
}

bool LockHeld(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return false;
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) return errno == EWOULDBLOCK;
  (void)::flock(fd.get(), LOCK_UN);
  return false;
}

Result<UniqueFd> OpenAppend(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return OpenFailure(path, errno);
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

Result<pid_t> StartDetached(const std::vector<std::string>& argv, const std::string& log_path) {
  Result<UniqueFd> log = OpenAppend(log_path);
  if (!log.ok()) return log.status();
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The intermediate child tells the grandchild's pid through this pipe.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  pid_t child = ::fork();
  if (child < 0) return ErrnoStatus("fork", errno);
  if (child == 0) {
    // The intermediate child exits at once so the daemon is not our child (no zombie).
    pid_t grandchild = ::fork();
    if (grandchild == 0) ExecDetached(args.data(), log->get());
    ssize_t n = ::write(write_end.get(), &grandchild, sizeof grandchild);
    ::_exit(grandchild < 0 || n != sizeof grandchild ? 1 : 0);
  }
  write_end.Reset();
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  pid_t daemon = -1;
  ssize_t n;
  while ((n = ::read(read_end.get(), &daemon, sizeof daemon)) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n != sizeof daemon)
    return Status::Io("could not start the daemon");
  return daemon;
}

namespace {

std::vector<char*> ArgvPointers(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  return args;
}

}  // namespace

bool IsExecutable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

Result<std::string> FindOnPath(const std::string& name) {
  std::string path = GetEnv("PATH");
  std::string_view rest = path;
  for (;;) {
    size_t colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    std::string candidate(dir.empty() ? std::string_view(".") : dir);  // "" is the cwd
    candidate += '/';
    candidate += name;
    if (IsExecutable(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return Status::NotFound(name + " is not on PATH");
}

size_t MaxSocketPathLength() { return sizeof(sockaddr_un::sun_path) - 1; }

Result<PeerCredentials> PeerOf(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return ErrnoStatus("SO_PEERCRED", errno);
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

size_t ArgumentSpaceBytes() {
  long n = ::sysconf(_SC_ARG_MAX);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

Result<void*> LoadSymbol(const std::string& library, const char* symbol) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return Status::NotFound(::dlerror());
  void* found = ::dlsym(lib, symbol);
  if (found == nullptr) return Status::Invalid(library + " has no " + symbol);
  return found;
}

bool TcpPortFree(int port) {
  // IPv6 with v4-mapped addresses covers both families where the host has IPv6; otherwise IPv4.
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int on = 1, off = 0;
  if (fd.valid()) {
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return true;
    if (errno == EADDRINUSE) return false;
  }
  fd.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return true;  // cannot tell: hand it out, as before this check
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ||
         errno != EADDRINUSE;
}

Status ExecReplace(const std::vector<std::string>& argv) {
  std::vector<char*> args = ArgvPointers(argv);
  ::execv(args[0], args.data());
  return ErrnoStatus("cannot run " + argv[0], errno);
}

ProcessStats SelfProcessStats() {
  ProcessStats out;
  std::ifstream stat_file("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // The command name may hold spaces and parentheses: fields count from the last ')'.
  size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(text.substr(close + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(fields),
                               std::istream_iterator<std::string>()};
    // f[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
    if (f.size() > 21) {
      double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
      auto number = [&f](size_t i) { return std::strtod(f[i].c_str(), nullptr); };
      out.cpu_seconds = (number(11) + number(12)) / ticks;
      out.virtual_bytes = std::strtoull(f[20].c_str(), nullptr, 10);
      out.resident_bytes = std::strtoull(f[21].c_str(), nullptr, 10) *
                           static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
      std::ifstream proc_stat("/proc/stat");
      std::string key;
      while (proc_stat >> key) {
        if (key == "btime") {
          double boot = 0;
          proc_stat >> boot;
          out.start_time_seconds = boot + number(19) / ticks;
          break;
        }
      }
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++out.open_fds;
  }
  out.max_fds = static_cast<int64_t>(OpenFileLimit());
  return out;
}

int64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace trainq
