#include "src/os/permissions.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {
namespace {

PathFacts FactsOf(int rc, const struct stat& st) {
  PathFacts f;
  if (rc != 0) return f;
  f.exists = true;
  f.symlink = S_ISLNK(st.st_mode);
  f.directory = S_ISDIR(st.st_mode);
  f.uid = st.st_uid;
  f.gid = st.st_gid;
  f.mode = st.st_mode & 07777;
  f.ctime_ns = CtimeNs(st);
  return f;
}

std::string Owner(int64_t uid) { return fmt::format("{} (uid {})", UserName(uid), uid); }

std::string NotYours(const PathFacts& facts, int64_t euid) {
  return fmt::format("it is owned by {}, not by you ({})", Owner(facts.uid), Owner(euid));
}

// What is wrong with the socket's directory, or "".
std::string PrivateDirProblem(const PathFacts& facts, int64_t euid) {
  if (!facts.exists) return "it does not exist";
  if (facts.symlink) return "it is a symbolic link";
  if (!facts.directory) return "it is not a directory";
  if (facts.uid != euid) return NotYours(facts, euid);
  if ((facts.mode & 077) != 0)
    return fmt::format("its mode is {:04o}; others may enter it", facts.mode);
  return "";
}

// What is wrong with an existing state dir, or "".
std::string StateDirProblem(const PathFacts& facts, int64_t euid) {
  if (!facts.directory) return "it is not a directory";
  if (facts.uid != euid) return NotYours(facts, euid);
  if ((facts.mode & 022) != 0)
    return fmt::format("its mode is {:04o}; others may write in it", facts.mode);
  return "";
}

}  // namespace

PathFacts LstatFacts(const std::string& path) {
  struct stat st = {};
  return FactsOf(::lstat(path.c_str(), &st), st);
}

PathFacts StatFacts(const std::string& path) {
  struct stat st = {};
  return FactsOf(::stat(path.c_str(), &st), st);
}

PathFacts FdFacts(int fd) {
  struct stat st = {};
  return FactsOf(::fstat(fd, &st), st);
}

Status JudgePrivateDir(const std::string& dir, const PathFacts& facts, int64_t euid) {
  std::string problem = PrivateDirProblem(facts, euid);
  if (problem.empty()) return Status::Ok();
  return Status::Permission(fmt::format(
      "unsafe socket directory {}: {}. trainq keeps its socket in a directory only you can "
      "enter (yours, mode 0700, not a link); remove {} (trainq creates it again) or set "
      "XDG_RUNTIME_DIR to a directory of yours",
      dir, problem, dir));
}

Status JudgeStateDir(const std::string& dir, const PathFacts& facts, int64_t euid) {
  if (!facts.exists) return Status::NotFound("state dir " + dir + " does not exist");
  std::string problem = StateDirProblem(facts, euid);
  if (problem.empty()) return Status::Ok();
  return Status::Permission(fmt::format(
      "unsafe state dir {}: {}. It holds every job's environment, so it must be yours and "
      "writable by you alone: run 'chmod 700 {}' as its owner, or use a state dir of your own "
      "(--state-dir or TRAINQ_STATE_DIR)",
      dir, problem, dir));
}

Status CheckPrivateDir(const std::string& dir) {
  return JudgePrivateDir(dir, LstatFacts(dir), ::geteuid());
}

Status MakePrivateDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) return ErrnoStatus("mkdir " + dir, errno);
  return CheckPrivateDir(dir);
}

std::vector<std::string> StateFiles(const StatePaths& paths) {
  return {paths.db,  paths.db + "-wal", paths.db + "-shm", paths.state_dir + "/settings.json",
          paths.log, paths.lock};
}

Status CheckStateDir(const StatePaths& paths) {
  TRAINQ_RETURN_IF_ERROR(JudgeStateDir(paths.state_dir, StatFacts(paths.state_dir), ::geteuid()));
  for (const std::string& file : StateFiles(paths)) {
    if (!LstatFacts(file).symlink) continue;
    return Status::Permission(
        file +
        " is a symbolic link; trainq never follows links in its state dir, since it "
        "would write into the file the link points at: remove the link (rm " +
        file + ") and start again");
  }
  return Status::Ok();
}

Status TightenStateFiles(const std::vector<std::string>& files) {
  for (const std::string& file : files) {
    PathFacts f = LstatFacts(file);
    if (!f.exists || f.symlink || (f.mode & 077) == 0) continue;
    if (::fchmodat(AT_FDCWD, file.c_str(), 0600, 0) < 0) return ErrnoStatus("chmod " + file, errno);
  }
  return Status::Ok();
}

Status CloseEntriesToOthers(const std::string& dir, const std::vector<std::string>& open) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (std::find(open.begin(), open.end(), name) != open.end()) continue;
    PathFacts f = LstatFacts(it->path().string());
    if (!f.exists || f.symlink || (f.mode & 077) == 0) continue;
    TRAINQ_RETURN_IF_ERROR(ChangeMode(it->path().string(), f.mode & 07700));
  }
  if (ec) return Status::Internal(fmt::format("listing {}: {}", dir, ec.message()));
  return Status::Ok();
}

Status ChangeMode(const std::string& path, mode_t mode) {
  if (::chmod(path.c_str(), mode) == 0) return Status::Ok();
  return ErrnoStatus(fmt::format("chmod {:04o} {}", mode, path), errno);
}

Status ChangeGroup(const std::string& path, int64_t gid) {
  if (::chown(path.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(gid)) == 0) {
    return Status::Ok();
  }
  return ErrnoStatus("chown " + path, errno);
}

Status ChangeOwner(const std::string& path, int64_t uid, int64_t gid) {
  if (::chown(path.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) == 0) {
    return Status::Ok();
  }
  return ErrnoStatus("chown " + path, errno);
}

Status MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return Status::Ok();
  return ErrnoStatus("mkdir " + path, errno);
}

mode_t RestrictUmask() { return ::umask(077); }

mode_t SetUmask(mode_t mask) { return ::umask(mask); }

mode_t CurrentUmask() {
  // umask(2) only reads by writing: put the same mask straight back.
  mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}

}  // namespace trainq
