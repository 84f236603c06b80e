#include "src/os/user_file.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace trainq {

std::string FileKindName(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFLNK:
      return "a symbolic link";
    case S_IFIFO:
      return "a FIFO (named pipe)";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    default:
      return "a special file";
  }
}

namespace {

bool Wanted(mode_t mode, FileWant want) {
  switch (want) {
    case FileWant::kRegular:
      return S_ISREG(mode);
    case FileWant::kDirectory:
      return S_ISDIR(mode);
    case FileWant::kRegularOrDirectory:
      return S_ISREG(mode) || S_ISDIR(mode);
  }
  return false;
}

Status OpenFailure(const std::string& path, int err, const UserInfo* as) {
  if (err == ENOENT || err == ENOTDIR) return Status::NotFound(path + " does not exist");
  if (err == EACCES || err == EPERM) {
    if (as == nullptr) return Status::Permission(path + ": permission denied");
    return Status::Permission(fmt::format("user {} may not read {}", as->name, path));
  }
  return ErrnoStatus("open " + path, err);
}

// The lookup and the open, with this thread's ids.
Result<UniqueFd> OpenHere(const std::string& path, FileWant want, const UserInfo* as) {
  // O_PATH opens nothing: no FIFO waits for a writer, no device's driver runs.
  UniqueFd at(::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!at.valid()) return OpenFailure(path, errno, as);
  struct stat st = {};
  if (::fstat(at.get(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  if (!Wanted(st.st_mode, want)) {
    return Status::Invalid(fmt::format("{} is {}", path, FileKindName(st.st_mode)));
  }
  // Through the descriptor checked: the very file, whatever the path names by now. The kernel
  // judges read permission here, with this thread's ids.
  int flags =
      O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0);
  UniqueFd fd(::open(fmt::format("/proc/self/fd/{}", at.get()).c_str(), flags));
  if (!fd.valid()) return OpenFailure(path, errno, as);
  return fd;
}

// Takes `as`'s file-system ids and groups for the calling thread alone: the kernel keeps
// credentials per thread, and setfsuid, setfsgid and the raw setgroups change only the caller's
// (glibc's setgroups would change every thread's).
Status BecomeForFiles(const UserInfo& as) {
  std::vector<gid_t> groups;
  for (int64_t g : as.groups) groups.push_back(static_cast<gid_t>(g));
  if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0) {
    return ErrnoStatus("setgroups for user " + as.name, errno);
  }
  auto uid = static_cast<uid_t>(as.uid);
  auto gid = static_cast<gid_t>(as.gid);
  ::setfsgid(gid);
  ::setfsuid(uid);
  // Neither reports failure: asked with an invalid id, each says which it holds.
  if (::setfsgid(static_cast<gid_t>(-1)) != static_cast<int>(gid) ||
      ::setfsuid(static_cast<uid_t>(-1)) != static_cast<int>(uid)) {
    return Status::Permission(
        fmt::format("cannot read files as user {}: this process is not root", as.name));
  }
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> OpenUserFile(const std::string& path, FileWant want, const UserInfo* as) {
  if (as == nullptr || static_cast<uid_t>(as->uid) == ::geteuid()) {
    return OpenHere(path, want, as);
  }
  Result<UniqueFd> out = Status::Internal("not opened");
  // The thread ends with the user's ids; the descriptor, in the process's table, stays.
  std::thread([&] {
    Status became = BecomeForFiles(*as);
    out = became.ok() ? OpenHere(path, want, as) : Result<UniqueFd>(became);
  }).join();
  return out;
}

Result<std::string> ReadUserFile(const std::string& path, uint64_t max_bytes, const UserInfo* as) {
  Result<UniqueFd> fd = OpenUserFile(path, FileWant::kRegular, as);
  if (!fd.ok()) return fd.status();
  struct stat st = {};
  if (::fstat(fd->get(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return Status::Invalid(fmt::format("{} holds {} bytes, more than {}", path, size, max_bytes));
  }
  return ReadAtMost(fd->get(), 0, size, path);
}

Result<std::string> ReadAtMost(int fd, uint64_t offset, uint64_t max_bytes,
                               const std::string& path) {
  std::string out(max_bytes, '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path, errno);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

}  // namespace trainq
