// Reading /proc: process identity (pid + start time survives pid reuse) and the process tree.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "src/core/spec.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

// /proc files are small and generated on read: read until EOF.
std::optional<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string out;
  char buf[1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;  // ESRCH: the process went away while we read
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

template <class T>
bool ParseNumber(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Fields after the comm, split on spaces: [0] is field 3 (state).
std::vector<std::string_view> SplitFields(std::string_view rest) {
  std::vector<std::string_view> fields;
  while (!rest.empty()) {
    size_t sp = rest.find(' ');
    fields.push_back(rest.substr(0, sp));
    if (sp == std::string_view::npos) break;
    rest.remove_prefix(sp + 1);
  }
  return fields;
}

// "PID (COMM) S PPID PGRP SID ... STARTTIME ...". COMM may hold spaces and ')', so the
// fields start after the LAST ')'.
std::optional<ProcStat> ParseProcStat(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.remove_suffix(1);
  size_t open = line.find(" (");
  size_t close = line.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open ||
      close + 2 > line.size()) {
    return std::nullopt;
  }
  ProcStat st;
  auto fields = SplitFields(line.substr(close + 2));
  // fields[k] is stat field k + 3: state 3, ppid 4, sid 6, starttime 22.
  if (fields.size() < 20 || fields[0].size() != 1) return std::nullopt;
  st.state = fields[0][0];
  if (!ParseNumber(line.substr(0, open), st.pid) || !ParseNumber(fields[1], st.ppid) ||
      !ParseNumber(fields[3], st.sid) || !ParseNumber(fields[19], st.start_ticks)) {
    return std::nullopt;
  }
  return st;
}

bool IsLive(const ProcStat& st) { return st.state != 'Z' && st.state != 'X'; }

// The value of `name` in /proc/PID/environ (the environment the process was exec'd with);
// nullopt when it has none or the file cannot be read.
std::optional<std::string> EnvironValue(int64_t pid, std::string_view name) {
  auto text = ReadSmallFile("/proc/" + std::to_string(pid) + "/environ");
  if (!text) return std::nullopt;
  std::string_view rest = *text;
  while (!rest.empty()) {
    std::string_view entry = rest.substr(0, rest.find('\0'));
    rest.remove_prefix(std::min(rest.size(), entry.size() + 1));
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=') {
      return std::string(entry.substr(name.size() + 1));
    }
  }
  return std::nullopt;
}

// The session rule: the shim (while it lives) and processes that stayed in its session but
// dropped the marker. A session id is never reused while a member lives; the start time
// keeps out a process that took the number later.
bool InShimSession(const ProcStat& st, int64_t shim_pid, uint64_t shim_start_ticks) {
  return shim_pid > 0 && st.sid == shim_pid && st.start_ticks >= shim_start_ticks;
}

}  // namespace

std::optional<ProcStat> ReadProcStat(int64_t pid) {
  if (pid <= 0) return std::nullopt;
  auto text = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return std::nullopt;
  return ParseProcStat(*text);
}

bool ProcessAlive(int64_t pid, uint64_t start_ticks) {
  auto st = ReadProcStat(pid);
  return st && IsLive(*st) && st->start_ticks == start_ticks;
}

bool ProcessExited(int64_t pid) {
  std::optional<ProcStat> st = ReadProcStat(pid);
  return !st || !IsLive(*st);
}

std::vector<ProcStat> ScanProcesses() {
  std::vector<ProcStat> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (struct dirent* e = ::readdir(dir)) {
    int64_t pid = 0;
    if (!ParseNumber(std::string_view(e->d_name), pid)) continue;
    if (auto st = ReadProcStat(pid); st && IsLive(*st)) out.push_back(*st);
  }
  ::closedir(dir);
  return out;
}

std::vector<int64_t> Descendants(int64_t root) {
  std::unordered_map<int64_t, std::vector<int64_t>> children;
  for (const ProcStat& st : ScanProcesses()) children[st.ppid].push_back(st.pid);
  std::vector<int64_t> out;
  std::unordered_set<int64_t> seen = {root};  // pids reused during the scan could form a cycle
  std::vector<int64_t> todo = {root};
  while (!todo.empty()) {
    int64_t pid = todo.back();
    todo.pop_back();
    auto it = children.find(pid);
    if (it == children.end()) continue;
    for (int64_t c : it->second) {
      if (!seen.insert(c).second) continue;
      out.push_back(c);
      todo.push_back(c);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool CatchesSignal(int64_t pid, int sig) {
  Result<std::string> status = ReadFile(fmt::format("/proc/{}/status", pid));
  if (!status.ok() || sig < 1 || sig > 64) return false;
  size_t at = status->find("\nSigCgt:");
  if (at == std::string::npos) return false;
  uint64_t mask = std::strtoull(status->c_str() + at + 8, nullptr, 16);
  return (mask >> (sig - 1)) & 1;
}

std::vector<std::string> ProcessArgv(int64_t pid) {
  Result<std::string> text = ReadFile(fmt::format("/proc/{}/cmdline", pid));
  std::vector<std::string> out;
  if (!text.ok()) return out;
  for (size_t start = 0; start < text->size();) {
    size_t end = text->find('\0', start);
    if (end == std::string::npos) end = text->size();
    out.push_back(text->substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<ProcStat> AttemptProcesses(const std::string& run_dir, int64_t shim_pid,
                                       uint64_t shim_start_ticks) {
  std::vector<ProcStat> out;
  const int64_t self = ::getpid();
  for (const ProcStat& st : ScanProcesses()) {
    if (st.pid == self) continue;
    std::optional<std::string> marker = EnvironValue(st.pid, kRunDirEnv);
    bool ours = marker ? *marker == run_dir : InShimSession(st, shim_pid, shim_start_ticks);
    if (ours) out.push_back(st);
  }
  return out;
}

std::vector<ProcStat> AttemptProcesses(const std::string& run_dir, int64_t shim_pid,
                                       uint64_t shim_start_ticks, const CgroupSpec& cgroup) {
  if (!cgroup.on() || !CgroupExists(cgroup)) {
    return AttemptProcesses(run_dir, shim_pid, shim_start_ticks);
  }
  std::vector<ProcStat> out;
  const int64_t self = ::getpid();
  if (shim_pid > 0 && shim_pid != self && ProcessAlive(shim_pid, shim_start_ticks)) {
    if (auto st = ReadProcStat(shim_pid)) out.push_back(*st);
  }
  for (int64_t pid : CgroupProcs(cgroup)) {
    auto st = ReadProcStat(pid);
    if (pid != self && pid != shim_pid && st && IsLive(*st)) out.push_back(*st);
  }
  // And those that carry the attempt's marker from outside the group: a container's, which
  // its runtime moved to a group of its own (docs/containers.md).
  std::unordered_set<int64_t> seen;
  for (const ProcStat& st : out) seen.insert(st.pid);
  for (const ProcStat& st : ScanProcesses()) {
    if (st.pid == self || seen.count(st.pid)) continue;
    std::optional<std::string> marker = EnvironValue(st.pid, kRunDirEnv);
    if (marker && *marker == run_dir) out.push_back(st);
  }
  return out;
}

std::optional<std::string> ProcessRunDir(int64_t pid) { return EnvironValue(pid, kRunDirEnv); }

}  // namespace trainq
