#include "src/os/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "src/os/fd.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

constexpr const char* kV1Parent = "trainq";
constexpr const char* kV2Parent = "trainq.slice";
constexpr const char* kV1Controllers[] = {"memory", "pids"};

bool Exists(const std::string& path) {
  struct stat st = {};
  return ::stat(path.c_str(), &st) == 0;
}

// Writes a control file whole. O_CREAT only matters on a test's plain tree: cgroupfs
// refuses to create a file it does not already have.
Status WriteControl(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus("open " + path, errno);
  ssize_t n = ::write(fd.get(), text.data(), text.size());
  if (n < 0) return ErrnoStatus("write '" + text + "' to " + path, errno);
  return Status::Ok();
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) < 0 && errno != EEXIST) {
    return ErrnoStatus("mkdir " + path, errno);
  }
  struct stat st = {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  if (!S_ISDIR(st.st_mode)) return ErrnoStatus(path, ENOTDIR);
  if (::access(path.c_str(), W_OK) < 0) return ErrnoStatus("cannot write " + path, errno);
  return Status::Ok();
}

// The value of `key` in a flat keyed file ("oom_kill 3\nmax 0\n"); 0 when absent.
uint64_t KeyedValue(const std::string& path, std::string_view key) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return 0;
  std::string_view rest = *text;
  while (!rest.empty()) {
    std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ' ') continue;
    std::string_view number = line.substr(key.size() + 1);
    uint64_t v = 0;
    std::from_chars(number.data(), number.data() + number.size(), v);
    return v;
  }
  return 0;
}

bool Lists(const std::string& path, std::string_view word) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return false;
  std::string_view rest = *text;
  while (!rest.empty()) {
    size_t end = rest.find_first_of(" \n");
    if (rest.substr(0, end) == word) return true;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return false;
}

CgroupHost Off(const std::string& root, std::string why) {
  return {CgroupVersion::kNone, root, std::move(why)};
}

// The root's controllers must be there and handed down: the root group is exempt from the
// rule that a group with processes may not enable controllers for its children, and
// trainq.slice holds none of its own.
CgroupHost SetUpV2(const std::string& root) {
  for (const char* c : kV1Controllers) {
    if (!Lists(root + "/cgroup.controllers", c)) {
      return Off(root, fmt::format("cgroup v2 at {} lacks the {} controller", root, c));
    }
  }
  const std::string parent = root + "/" + kV2Parent;
  Status st = Status::Ok();
  if (!Lists(root + "/cgroup.subtree_control", "memory") ||
      !Lists(root + "/cgroup.subtree_control", "pids")) {
    st = WriteControl(root + "/cgroup.subtree_control", "+memory +pids");
  }
  if (st.ok()) st = MakeDir(parent);
  if (st.ok()) st = WriteControl(parent + "/cgroup.subtree_control", "+memory +pids");
  if (!st.ok()) return Off(root, "cgroup v2: " + st.message());
  return {CgroupVersion::kV2, root, ""};
}

CgroupHost SetUpV1(const std::string& root) {
  for (const char* c : kV1Controllers) {
    Status st = MakeDir(fmt::format("{}/{}/{}", root, c, kV1Parent));
    if (!st.ok()) return Off(root, "cgroup v1: " + st.message());
  }
  return {CgroupVersion::kV1, root, ""};
}

Status WriteV2Limits(const std::string& dir, const CgroupLimits& l) {
  std::string mem = l.mem_bytes > 0 ? std::to_string(l.mem_bytes) : "max";
  TRAINQ_RETURN_IF_ERROR(WriteControl(dir + "/memory.max", mem));
  // The limit is of memory, not memory plus swap: a job over it must not swap on instead.
  if (l.mem_bytes > 0 && Exists(dir + "/memory.swap.max")) {
    TRAINQ_RETURN_IF_ERROR(WriteControl(dir + "/memory.swap.max", "0"));
  }
  return WriteControl(dir + "/pids.max", l.max_tasks > 0 ? std::to_string(l.max_tasks) : "max");
}

Status WriteV1Limits(const std::string& memory, const std::string& pids, const CgroupLimits& l) {
  std::string mem = l.mem_bytes > 0 ? std::to_string(l.mem_bytes) : "-1";
  // memsw (memory + swap) must never be below the memory limit: lifted first, set after.
  const std::string memsw = memory + "/memory.memsw.limit_in_bytes";
  bool swap_accounting = Exists(memsw);
  if (swap_accounting) TRAINQ_RETURN_IF_ERROR(WriteControl(memsw, "-1"));
  TRAINQ_RETURN_IF_ERROR(WriteControl(memory + "/memory.limit_in_bytes", mem));
  if (swap_accounting) TRAINQ_RETURN_IF_ERROR(WriteControl(memsw, mem));
  return WriteControl(pids + "/pids.max", l.max_tasks > 0 ? std::to_string(l.max_tasks) : "max");
}

uint32_t Fnv1a(std::string_view text) {
  uint32_t h = 2166136261u;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

std::string Sanitized(std::string_view part) {
  std::string out(part);
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

}  // namespace

std::string_view CgroupVersionName(CgroupVersion v) {
  switch (v) {
    case CgroupVersion::kV1:
      return "v1";
    case CgroupVersion::kV2:
      return "v2";
    case CgroupVersion::kNone:
      break;
  }
  return "";
}

CgroupVersion ParseCgroupVersion(std::string_view name) {
  if (name == "v1") return CgroupVersion::kV1;
  if (name == "v2") return CgroupVersion::kV2;
  return CgroupVersion::kNone;
}

CgroupHost SetUpCgroups(const std::string& root) {
  if (root.empty()) return Off(root, "no cgroup root");
  if (Exists(root + "/cgroup.controllers")) return SetUpV2(root);
  if (Exists(root + "/memory/cgroup.procs") && Exists(root + "/pids/cgroup.procs")) {
    return SetUpV1(root);
  }
  return Off(root, fmt::format("neither cgroup v2 nor the v1 memory and pids hierarchies are "
                               "mounted at {}",
                               root));
}

std::string AttemptCgroupName(const std::string& run_dir) {
  std::string_view path = run_dir;
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t last = path.rfind('/');
  std::string_view attempt = last == std::string_view::npos ? path : path.substr(last + 1);
  std::string_view job;
  if (last != std::string_view::npos && last > 0) {
    std::string_view above = path.substr(0, last);
    size_t slash = above.rfind('/');
    job = slash == std::string_view::npos ? above : above.substr(slash + 1);
  }
  std::string head = job.empty() ? Sanitized(attempt) : Sanitized(job) + "-" + Sanitized(attempt);
  return fmt::format("{}-{:08x}", head, Fnv1a(run_dir));
}

std::vector<std::string> CgroupDirs(const CgroupSpec& spec) {
  switch (spec.version) {
    case CgroupVersion::kV1:
      return {fmt::format("{}/memory/{}/{}", spec.root, kV1Parent, spec.name),
              fmt::format("{}/pids/{}/{}", spec.root, kV1Parent, spec.name)};
    case CgroupVersion::kV2:
      return {fmt::format("{}/{}/{}", spec.root, kV2Parent, spec.name)};
    case CgroupVersion::kNone:
      break;
  }
  return {};
}

std::vector<std::string> CgroupJoinFiles(const CgroupSpec& spec) {
  std::vector<std::string> out;
  const char* file = spec.version == CgroupVersion::kV1 ? "/tasks" : "/cgroup.procs";
  for (const std::string& dir : CgroupDirs(spec)) out.push_back(dir + file);
  return out;
}

Status CreateCgroup(const CgroupSpec& spec) {
  std::vector<std::string> dirs = CgroupDirs(spec);
  for (const std::string& dir : dirs) TRAINQ_RETURN_IF_ERROR(MakeDir(dir));
  if (spec.version == CgroupVersion::kV2) return WriteV2Limits(dirs[0], spec.limits);
  if (spec.version == CgroupVersion::kV1) return WriteV1Limits(dirs[0], dirs[1], spec.limits);
  return Status::Ok();
}

bool CgroupExists(const CgroupSpec& spec) {
  std::vector<std::string> dirs = CgroupDirs(spec);
  return std::any_of(dirs.begin(), dirs.end(), Exists);
}

std::vector<int64_t> CgroupProcs(const CgroupSpec& spec) {
  std::vector<int64_t> out;
  for (const std::string& dir : CgroupDirs(spec)) {
    Result<std::string> text = ReadFile(dir + "/cgroup.procs");
    if (!text.ok()) continue;
    std::string_view rest = *text;
    while (!rest.empty()) {
      std::string_view line = rest.substr(0, rest.find('\n'));
      rest.remove_prefix(std::min(rest.size(), line.size() + 1));
      int64_t pid = 0;
      auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), pid);
      if (ec == std::errc() && end == line.data() + line.size() && pid > 0) out.push_back(pid);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

uint64_t CgroupOomKills(const CgroupSpec& spec) {
  std::vector<std::string> dirs = CgroupDirs(spec);
  if (dirs.empty()) return 0;
  const char* file = spec.version == CgroupVersion::kV2 ? "/memory.events" : "/memory.oom_control";
  return KeyedValue(dirs[0] + file, "oom_kill");
}

uint64_t CgroupForksRefused(const CgroupSpec& spec) {
  std::vector<std::string> dirs = CgroupDirs(spec);
  if (dirs.empty()) return 0;
  return KeyedValue(dirs.back() + "/pids.events", "max");
}

Status RemoveCgroup(const CgroupSpec& spec) {
  for (const std::string& dir : CgroupDirs(spec)) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) continue;
    if (errno == EBUSY) return Status::Conflict("rmdir " + dir + ": processes remain in it");
    return ErrnoStatus("rmdir " + dir, errno);
  }
  return Status::Ok();
}

}  // namespace trainq
