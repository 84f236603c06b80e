// File helpers declared in run_dir.h: atomic replace, whole and tail reads, mkdir -p.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "src/os/fd.h"
#include "src/os/run_dir.h"

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

Result<UniqueFd> OpenForRead(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.valid()) return fd;
  if (errno == ENOENT) return Status::NotFound(path + ": no such file");
  return ErrnoStatus("open " + path, errno);
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
  auto fd = OpenForRead(path);
  if (!fd.ok()) return fd.status();
  std::string out;
  TRAINQ_RETURN_IF_ERROR(ReadUpTo(fd->get(), std::string::npos, path, out));
  return out;
}

Result<std::string> ReadFileTail(const std::string& path, size_t max_bytes) {
  auto fd = OpenForRead(path);
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

Result<std::vector<std::string>> ListFiles(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return names;
    return ErrnoStatus("open directory " + dir, errno);
  }
  while (const dirent* e = ::readdir(d)) {
    if (e->d_type == DT_REG) names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

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

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
  return ErrnoStatus("remove " + path, errno);
}

}  // namespace trainq
