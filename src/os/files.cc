// File helpers declared in run_dir.h: atomic replace, whole and tail reads, mkdir -p, rename,
// removal of a tree.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "src/os/fd.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {
namespace {

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write " + path, errno);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Reads from the current offset to EOF, at most `limit` bytes.
Status ReadUpTo(int fd, size_t limit, const std::string& path, std::string& out) {
  char buf[65536];
  while (out.size() < limit) {
    ssize_t n = ::read(fd, buf, std::min(sizeof(buf), limit - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path, errno);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return Status::Ok();
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status SyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open " + dir, errno);
  if (::fsync(fd.get()) < 0) return ErrnoStatus("fsync " + dir, errno);
  return Status::Ok();
}

// Writes and syncs the temp file; the caller renames it.
Status FillTemp(int fd, const std::string& tmp, const std::string& data, Durability durability) {
  TRAINQ_RETURN_IF_ERROR(WriteAll(fd, data, tmp));
  if (durability == Durability::kSync && ::fsync(fd) < 0) return ErrnoStatus("fsync " + tmp, errno);
  return Status::Ok();
}

}  // namespace

Status WriteFileAtomic(const std::string& path, const std::string& data, Durability durability) {
  std::string dir = DirOf(path);
  std::string tmp = path + ".tmp.XXXXXX";  // same directory: rename stays atomic
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("create temp file for " + path, errno);
  Status st = FillTemp(fd.get(), tmp, data, durability);
  fd.Reset();
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) < 0) st = ErrnoStatus("rename " + tmp, errno);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return durability == Durability::kSync ? SyncDir(dir) : Status::Ok();
}

Result<std::string> ReadFile(const std::string& path) {
  auto fd = OpenToRead(path);
  if (!fd.ok()) return fd.status();
  std::string out;
  TRAINQ_RETURN_IF_ERROR(ReadUpTo(fd->get(), std::string::npos, path, out));
  return out;
}

Result<std::string> ReadFileTail(const std::string& path, size_t max_bytes) {
  auto fd = OpenToRead(path);
  if (!fd.ok()) return fd.status();
  struct stat st = {};
  if (::fstat(fd->get(), &st) < 0) return ErrnoStatus("stat " + path, errno);
  auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes && ::lseek(fd->get(), static_cast<off_t>(size - max_bytes), SEEK_SET) < 0) {
    return ErrnoStatus("seek " + path, errno);
  }
  std::string out;
  TRAINQ_RETURN_IF_ERROR(ReadUpTo(fd->get(), max_bytes, path, out));
  return out;
}

Status MakeDirs(const std::string& path) {
  if (path.empty()) return Status::Invalid("empty directory path");
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    std::string prefix = path.substr(0, end);
    if (::mkdir(prefix.c_str(), 0700) < 0 && errno != EEXIST) {
      return ErrnoStatus("mkdir " + prefix, errno);
    }
    if (end == std::string::npos) break;
  }
  struct stat st = {};
  if (::stat(path.c_str(), &st) < 0) return ErrnoStatus("stat " + path, errno);
  if (!S_ISDIR(st.st_mode)) return Status::Io(path + ": not a directory");
  return Status::Ok();
}

namespace {

Result<std::vector<std::string>> ListDir(const std::string& dir, bool files_only) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return names;
    return ErrnoStatus("open directory " + dir, errno);
  }
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (!files_only || e->d_type == DT_REG) names.emplace_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Result<std::vector<std::string>> ListFiles(const std::string& dir) { return ListDir(dir, true); }

Result<std::vector<std::string>> ListEntries(const std::string& dir) { return ListDir(dir, false); }

uint64_t DirBytes(const std::string& dir) {
  uint64_t bytes = 0;
  Result<std::vector<std::string>> names = ListFiles(dir);
  if (!names.ok()) return 0;
  for (const std::string& name : *names) {
    struct stat st {};
    if (::stat((dir + "/" + name).c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
  }
  return bytes;
}

Result<UniqueFd> OpenToRead(const std::string& path, bool follow_links) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW)));
  if (fd.valid()) return fd;
  if (errno == ENOENT) return Status::NotFound(path + ": no such file");
  return ErrnoStatus("open " + path, errno);
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
  return ErrnoStatus("remove " + path, errno);
}

Status CreateNewFile(const std::string& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) {
    if (errno == EEXIST) return Status::Conflict(path + " exists");
    return ErrnoStatus("create " + path, errno);
  }
  Status st = WriteAll(fd.get(), std::string(data), path);
  if (st.ok() && ::fsync(fd.get()) != 0) st = ErrnoStatus("fsync " + path, errno);
  if (!st.ok()) ::unlink(path.c_str());
  return st;
}

Status RenameFile(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return Status::Ok();
  std::string what = "rename " + from + " to " + to;
  if (errno == ENOENT) return Status::NotFound(what + ": no such file");
  return ErrnoStatus(what, errno);
}

void RemoveTree(const std::string& path) { (void)RemoveTreeSaying(path); }

Result<bool> RemoveTreeSaying(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A daemon not running as root needs a read-only directory writable to empty it.
  if (fs::is_directory(fs::symlink_status(path, ec))) {
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) {
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
      }
    }
  }
  ec.clear();
  std::uintmax_t removed = fs::remove_all(path, ec);
  if (ec) return Status::Internal("removing " + path + ": " + ec.message());
  return removed > 0;
}

}  // namespace trainq
