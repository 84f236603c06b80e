// Shims without processes, for the daemon's unit tests. FakeShims is the machine: it
// remembers every shim "started" on it, alive until the test ends it with Exit(), which
// writes the exit record and the log as a real shim would and then tells the daemon.
// Launchers made from one FakeShims share its shims, so a second daemon (a restart) finds
// the shims the first one started.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "src/daemon/shim_launcher.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {

class FakeShims {
 public:
  struct Shim {
    ShimProcess process;
    bool alive = true;
    std::vector<int> signals;  // as sent, in order
    int owner = 0;             // the launcher whose daemon watches it; 0: none
    ShimLauncher::ExitHandler on_exit;
  };

  // Makes the next Launch fail with `st` (once).
  void FailNextLaunch(Status st) { launch_error_ = std::move(st); }
  std::vector<ProcStat> processes;  // what Processes() reports
  // By run dir: an attempt's processes outside its shim (what a shim killed -9 leaves), which
  // AttemptProcesses reports besides the live shim. A test ends them by erasing them.
  std::map<std::string, std::vector<ProcStat>> leftovers;
  std::map<int64_t, std::vector<int>> leftover_signals;  // by pid, as sent, in order
  std::set<int64_t> gone_pids;                // processes WatchProcess finds gone (a gate's)
  std::map<int64_t, int64_t> watched_uids;    // pid -> the uid WatchProcess was asked for
  std::vector<std::string> cgroups_removed;   // run dirs RemoveAttemptCgroup was called for
  std::vector<std::string> cleanups_run;      // run dirs RunCleanup was called for
  std::map<int64_t, std::string> run_dir_of;  // TRAINQ_RUN_DIR in a process's environment

  // The shim of `run_dir`, or nullptr.
  const Shim* Find(const std::string& run_dir) const {
    auto it = shims_.find(run_dir);
    return it == shims_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> alive_run_dirs() const {
    std::vector<std::string> dirs;
    for (const auto& [dir, shim] : shims_) {
      if (shim.alive) dirs.push_back(dir);
    }
    return dirs;
  }
  int alive_count() const {
    int n = 0;
    for (const auto& [dir, shim] : shims_) n += shim.alive ? 1 : 0;
    return n;
  }

  // Ends the shim of `run_dir`: its log gets `log`, exit.json `record`; then the daemon
  // watching it (if any) is told. Returns false when no live shim runs there.
  bool Exit(const std::string& run_dir, const ExitRecord& record, const std::string& log = "") {
    auto it = shims_.find(run_dir);
    if (it == shims_.end() || !it->second.alive) return false;
    if (!log.empty()) (void)WriteFileAtomic(LogPath(run_dir), log, Durability::kNoSync);
    (void)WriteExitRecord(run_dir, record);
    it->second.alive = false;
    it->second.owner = 0;
    ShimLauncher::ExitHandler on_exit = std::move(it->second.on_exit);
    if (on_exit) on_exit();
    return true;
  }

  // The shim of `run_dir` dies without an exit record (kill -9); the daemon watching it is
  // told. False when no live shim runs there.
  bool Crash(const std::string& run_dir) {
    auto it = shims_.find(run_dir);
    if (it == shims_.end() || !it->second.alive) return false;
    it->second.alive = false;
    it->second.owner = 0;
    ShimLauncher::ExitHandler on_exit = std::move(it->second.on_exit);
    if (on_exit) on_exit();
    return true;
  }

  std::unique_ptr<ShimLauncher> Launcher() {
    return std::make_unique<Launcher_>(*this, ++launchers_);
  }

 private:
  class Launcher_ final : public ShimLauncher {
   public:
    Launcher_(FakeShims& shims, int id) : shims_(shims), id_(id) {}
    ~Launcher_() override { StopWatching(); }

    Result<ShimProcess> Launch(const std::string& run_dir, ExitHandler on_exit) override {
      if (shims_.launch_error_) {
        Status st = std::move(*shims_.launch_error_);
        shims_.launch_error_.reset();
        return st;
      }
      Shim& shim = shims_.shims_[run_dir];
      if (shim.alive && shim.process.pid != 0) return Status::Conflict(run_dir + " is held");
      shim = Shim{{shims_.next_pid_++, 1}, true, {}, id_, std::move(on_exit)};
      return shim.process;
    }
    // Answers at once, as the real one does when the shim's record is written.
    void Adopt(const std::string& run_dir, AdoptHandler on_adopted, ExitHandler on_exit) override {
      auto it = shims_.shims_.find(run_dir);
      // As the real one: a shim is found through the lock file in its run dir.
      if (it == shims_.shims_.end() || !it->second.alive || !IsDirectory(run_dir)) {
        return on_adopted(Status::NotFound("no shim holds " + run_dir));
      }
      it->second.owner = id_;
      it->second.on_exit = std::move(on_exit);
      on_adopted(it->second.process);
    }
    Result<ShimProcess> WatchProcess(const std::string& run_dir, const ShimProcess& process,
                                     int64_t uid, ExitHandler on_exit) override {
      if (shims_.gone_pids.count(process.pid)) return Status::NotFound("the process is gone");
      shims_.watched_uids[process.pid] = uid;
      shims_.shims_[run_dir] = Shim{process, true, {}, id_, std::move(on_exit)};
      return process;
    }
    Status Signal(const ShimProcess& process, int sig) override {
      for (auto& [dir, shim] : shims_.shims_) {
        if (shim.process.pid != process.pid || !shim.alive) continue;
        shim.signals.push_back(sig);
        return Status::Ok();
      }
      for (const auto& [dir, procs] : shims_.leftovers) {
        for (const ProcStat& p : procs) {
          if (p.pid != process.pid || p.start_ticks != process.start_ticks) continue;
          shims_.leftover_signals[p.pid].push_back(sig);
          return Status::Ok();
        }
      }
      return Status::NotFound("the process is gone");
    }
    std::vector<ProcStat> Processes() override { return shims_.processes; }
    std::optional<std::string> RunDirOf(int64_t pid) override {
      auto it = shims_.run_dir_of.find(pid);
      if (it == shims_.run_dir_of.end()) return std::nullopt;
      return it->second;
    }
    std::vector<ProcStat> AttemptProcesses(const std::string& run_dir,
                                           const ShimProcess& process) override {
      std::vector<ProcStat> out;
      auto it = shims_.shims_.find(run_dir);
      if (it != shims_.shims_.end() && it->second.alive && it->second.process.pid == process.pid) {
        out.push_back({process.pid, 1, process.pid, 'S', process.start_ticks});
      }
      auto left = shims_.leftovers.find(run_dir);
      if (left != shims_.leftovers.end())
        out.insert(out.end(), left->second.begin(), left->second.end());
      return out;
    }
    void RemoveAttemptCgroup(const std::string& run_dir) override {
      shims_.cgroups_removed.push_back(run_dir);
    }
    void RunCleanup(const std::string& run_dir) override { shims_.cleanups_run.push_back(run_dir); }
    void StopWatching() override {
      for (auto& [dir, shim] : shims_.shims_) {
        if (shim.owner != id_) continue;
        shim.owner = 0;
        shim.on_exit = nullptr;
      }
    }

   private:
    FakeShims& shims_;
    int id_;
  };

  std::map<std::string, Shim> shims_;  // by run dir
  std::optional<Status> launch_error_;
  int64_t next_pid_ = 1000;
  int launchers_ = 0;
};

}  // namespace trainq
