// Control groups for attempts (docs/architecture.md, "Control groups"): each attempt's
// command runs in a cgroup of its own, which bounds its host memory and task count and names
// every process it started, whatever their session, parent or environment.
// v2 (a unified hierarchy at the root): ROOT/trainq.slice/NAME, with the memory and pids
// controllers enabled for the children of trainq.slice.
// v1 (separate hierarchies, as on hybrid hosts): ROOT/memory/trainq/NAME and
// ROOT/pids/trainq/NAME.
// The root is a parameter so that tests can point the module at a plain directory tree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq {

inline constexpr const char* kCgroupRoot = "/sys/fs/cgroup";

enum class CgroupVersion { kNone, kV1, kV2 };

// "v1", "v2", "" (none), as run dirs spell it.
std::string_view CgroupVersionName(CgroupVersion v);
// kNone for "" and for anything unknown.
CgroupVersion ParseCgroupVersion(std::string_view name);

// What the daemon found at its start: whether attempts get cgroups, and if not, why.
struct CgroupHost {
  CgroupVersion version = CgroupVersion::kNone;
  std::string root;     // the cgroup mount, e.g. kCgroupRoot
  std::string why_off;  // version kNone: a sentence saying why
  bool on() const { return version != CgroupVersion::kNone; }
};

// Finds the hierarchy under `root` and makes trainq's parent group there (kept if it
// exists; v2 also enables memory and pids for its children). Never fails: where cgroups are
// absent or not writable (a daemon not run as root, usually) it returns version kNone and
// the reason. `root` "": off ("no cgroup root"), as unit tests want.
CgroupHost SetUpCgroups(const std::string& root);

// The limits of one attempt's group; 0: none.
struct CgroupLimits {
  uint64_t mem_bytes = 0;  // host memory (memory.max; v1 memory.limit_in_bytes)
  int64_t max_tasks = 0;   // processes and threads (pids.max)
};

// One attempt's cgroup as the run dir names it (RunSpec::cgroup).
struct CgroupSpec {
  CgroupVersion version = CgroupVersion::kNone;  // kNone: the attempt runs without one
  std::string root;
  std::string name;  // one path component, AttemptCgroupName
  CgroupLimits limits;
  bool on() const { return version != CgroupVersion::kNone; }
};

// The group name of the attempt in `run_dir` ("RUNS/12/1" -> "12-1-<8 hex digits>"): the
// job and attempt for people, a hash of the whole path so that two daemons on one machine
// never share a group. Only [A-Za-z0-9._-].
std::string AttemptCgroupName(const std::string& run_dir);

// The group's directories: two under v1 (memory, pids), one under v2, none when off.
std::vector<std::string> CgroupDirs(const CgroupSpec& spec);
// The file of each directory a single-threaded process writes "0" to, to join the group:
// v2's cgroup.procs; v1's `tasks`, which moves only the writing thread and so skips the
// kernel's process-wide migration lock, whose RCU grace period (7-12 ms on an idle host) was
// most of an idle job start. The shim's freshly forked child has no other thread.
std::vector<std::string> CgroupJoinFiles(const CgroupSpec& spec);

// Makes the group's directories (an existing one is kept: a shim run again on its run dir)
// and writes its limits; kPermission/kIo naming the file that failed.
Status CreateCgroup(const CgroupSpec& spec);
// Whether any of the group's directories exists.
bool CgroupExists(const CgroupSpec& spec);
// The pids in the group (all of its directories together), sorted, each once; empty when the
// group does not exist.
std::vector<int64_t> CgroupProcs(const CgroupSpec& spec);
// How many times the kernel's OOM killer killed a process of the group at its memory limit
// (v2 memory.events, v1 memory.oom_control "oom_kill").
uint64_t CgroupOomKills(const CgroupSpec& spec);
// How many forks the task limit refused (pids.events "max").
uint64_t CgroupForksRefused(const CgroupSpec& spec);
// Removes the group's directories. Ok when already gone; kConflict while processes remain
// (never forced: the kernel would refuse anyway).
Status RemoveCgroup(const CgroupSpec& spec);

}  // namespace trainq
