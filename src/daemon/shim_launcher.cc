// The real ShimLauncher: shims are processes, watched through pidfds on the event loop.
#include "src/daemon/shim_launcher.h"

#include "src/api/asio.h"

#include <chrono>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "src/os/run_dir.h"
#include "src/os/users.h"

namespace trainq {

namespace {

using Descriptor = boost::asio::posix::stream_descriptor;

// A shim that holds its lock but has not written shim.json yet is asked again this often, this
// many times.
constexpr auto kAdoptRetry = std::chrono::milliseconds(10);
constexpr int kAdoptTries = 200;

class ProcessShimLauncher final : public ShimLauncher {
 public:
  ProcessShimLauncher(boost::asio::io_context& io, ShimCommand shim_binary, int daemon_log_fd,
                      CgroupHost cgroups)
      : io_(io),
        shim_binary_(std::move(shim_binary)),
        daemon_log_fd_(daemon_log_fd),
        cgroups_(std::move(cgroups)) {}

  Result<ShimProcess> Launch(const std::string& run_dir, ExitHandler on_exit) override {
    Result<SpawnedShim> shim = SpawnShim(shim_binary_, run_dir, daemon_log_fd_);
    if (!shim.ok()) return shim.status();
    ShimProcess p{shim->pid, shim->start_ticks};
    Watch(p, std::move(shim->pidfd), std::move(on_exit), -1);
    return p;
  }

  void Adopt(const std::string& run_dir, AdoptHandler on_adopted, ExitHandler on_exit) override {
    uint64_t key = next_adoption_++;
    adoptions_.emplace(key, Adoption{run_dir, std::move(on_adopted), std::move(on_exit),
                                     std::make_unique<boost::asio::steady_timer>(io_)});
    TryAdopt(key);
  }

  Result<ShimProcess> WatchProcess(const std::string& run_dir, const ShimProcess& p, int64_t uid,
                                   ExitHandler on_exit) override {
    Result<PinnedProcess> pinned = PinProcess(p.pid);
    if (!pinned.ok() || pinned->stat.start_ticks != p.start_ticks) {
      return Status::NotFound(fmt::format("process {} (of {}) is gone", p.pid, run_dir));
    }
    if (pinned->uid != uid) {
      return Status::Permission(fmt::format(
          "process {} (of {}) runs as uid {}, not the job's user (uid {}); it is not watched or "
          "signalled",
          p.pid, run_dir, pinned->uid, uid));
    }
    Watch(p, std::move(pinned->pidfd), std::move(on_exit), uid);
    return p;
  }
  Status Signal(const ShimProcess& shim, int sig) override {
    for (auto& [key, watch] : watches_) {
      if (watch.shim.pid != shim.pid || watch.shim.start_ticks != shim.start_ticks) continue;
      if (watch.uid >= 0) {  // a gate: its process may have changed user (setuid exec)
        Result<PinnedProcess> now = PinProcess(shim.pid);
        if (now.ok() && now->uid != watch.uid) {
          return Status::Permission(fmt::format("process {} now runs as uid {}, not uid {}",
                                                shim.pid, now->uid, watch.uid));
        }
      }
      return SignalPidfd(watch.fd->native_handle(), sig);
    }
    if (!ProcessAlive(shim.pid, shim.start_ticks)) return Status::NotFound("the shim is gone");
    return SendSignal(shim.pid, sig);
  }

  std::vector<ProcStat> Processes() override { return ScanProcesses(); }
  std::optional<std::string> RunDirOf(int64_t pid) override { return ProcessRunDir(pid); }

  std::vector<ProcStat> AttemptProcesses(const std::string& run_dir,
                                         const ShimProcess& shim) override {
    return trainq::AttemptProcesses(run_dir, shim.pid, shim.start_ticks, CgroupOf(run_dir));
  }

  void RunCleanup(const std::string& run_dir) override {
    Result<RunSpec> spec = ReadRunSpec(run_dir);
    if (!spec.ok() || spec->cleanup.empty()) return;
    // The environment and user the shim gives the command (src/os/shim.cc, CommandEnv).
    bool as_user = spec->uid >= 0 && !spec->user.empty();
    std::vector<std::string> env;
    for (const auto& [k, v] : spec->env) {
      if (!as_user || (k != "HOME" && k != "USER" && k != "LOGNAME")) env.push_back(k + "=" + v);
    }
    std::optional<RunAs> as;
    if (as_user) {
      env.insert(env.end(), {"HOME=" + spec->home, "USER=" + spec->user, "LOGNAME=" + spec->user});
      as = RunAs{static_cast<uid_t>(spec->uid), static_cast<gid_t>(spec->gid), {}};
      for (int64_t g : GroupList(spec->user, spec->gid))
        as->groups.push_back(static_cast<gid_t>(g));
    }
    Status st = SpawnDetached(spec->cleanup, env, as);
    if (!st.ok()) spdlog::warn("{}: cleanup: {}", run_dir, st.ToString());
  }

  void RemoveAttemptCgroup(const std::string& run_dir) override {
    Status st = RemoveCgroup(CgroupOf(run_dir));
    if (!st.ok()) spdlog::warn("{}: {}", run_dir, st.ToString());
  }

  CgroupSpec CgroupOf(const std::string& run_dir) const {
    if (!cgroups_.on()) return {};
    return {cgroups_.version, cgroups_.root, AttemptCgroupName(run_dir), {}};
  }

  void StopWatching() override {
    for (auto& [key, watch] : watches_) watch.fd->cancel();
    watches_.clear();
    for (auto& [key, adoption] : adoptions_) adoption.timer->cancel();
    adoptions_.clear();
  }

 private:
  struct Adoption {
    std::string run_dir;
    AdoptHandler on_adopted;
    ExitHandler on_exit;
    std::unique_ptr<boost::asio::steady_timer> timer;
    int tries = 0;
  };

  // Lock first, record second: a shim writes shim.json while it holds its lock. nullopt: it
  // holds the lock and has not written the record yet.
  std::optional<Result<ShimProcess>> LookForShim(Adoption& a) {
    if (!RunDirLocked(a.run_dir)) return Status::NotFound("no shim holds " + a.run_dir);
    Result<ShimRecord> rec = ReadShimRecord(a.run_dir);
    if (!rec.ok() && rec.status().code() == Code::kNotFound) return std::nullopt;
    if (!rec.ok()) return rec.status();
    Result<UniqueFd> fd = OpenPidfd(rec->pid);
    if (!fd.ok() || !ProcessAlive(rec->pid, rec->start_ticks)) {
      return Status::NotFound("the shim of " + a.run_dir + " is gone");
    }
    ShimProcess p{rec->pid, rec->start_ticks};
    Watch(p, std::move(*fd), std::move(a.on_exit), -1);
    return p;
  }

  // One look; the answer goes to the adoption's handler, or a timer looks again.
  void TryAdopt(uint64_t key) {
    auto it = adoptions_.find(key);
    if (it == adoptions_.end()) return;
    Adoption& a = it->second;
    std::optional<Result<ShimProcess>> found = LookForShim(a);
    if (!found && ++a.tries >= kAdoptTries) {
      found = Status::Unavailable("shim holds its lock but wrote no shim.json in " + a.run_dir);
    }
    if (!found) {
      a.timer->expires_after(kAdoptRetry);
      a.timer->async_wait([this, key](const boost::system::error_code& ec) {
        if (!ec) TryAdopt(key);
      });
      return;
    }
    AdoptHandler on_adopted = std::move(a.on_adopted);
    adoptions_.erase(it);
    on_adopted(std::move(*found));
  }

  struct Watched {
    ShimProcess shim;
    std::unique_ptr<Descriptor> fd;
    ExitHandler on_exit;
    int64_t uid = -1;  // a gate's user; -1: a shim of ours
  };

  // Keyed by a serial, not the pid: a pid can come back as another process's, and a second
  // watch of it must never replace the first.
  void Watch(const ShimProcess& p, UniqueFd pidfd, ExitHandler on_exit, int64_t uid) {
    auto fd = std::make_unique<Descriptor>(io_, pidfd.Release());
    uint64_t key = next_watch_++;
    watches_[key] = Watched{p, std::move(fd), std::move(on_exit), uid};
    Arm(key);
  }

  void Arm(uint64_t key) {
    watches_.at(key).fd->async_wait(Descriptor::wait_read,
                                    [this, key](const boost::system::error_code& ec) {
                                      if (!ec) OnReady(key);
                                    });
  }

  void OnReady(uint64_t key) {
    auto it = watches_.find(key);
    if (it == watches_.end()) return;
    int64_t pid = it->second.shim.pid;
    // Under load a wait on the pidfd has completed while the shim still ran (asio's
    // reactor, not the kernel). Ending the attempt then would lose its real end, so believe
    // the exit only once the shim is gone.
    if (!PidfdExited(it->second.fd->native_handle())) {
      spdlog::debug("spurious wake-up for live shim pid {}", pid);
      return Arm(key);
    }
    ReapIfChild(pid);
    ExitHandler on_exit = std::move(it->second.on_exit);
    watches_.erase(it);
    on_exit();
  }

  boost::asio::io_context& io_;
  ShimCommand shim_binary_;
  int daemon_log_fd_;
  CgroupHost cgroups_;
  std::map<uint64_t, Watched> watches_;
  uint64_t next_watch_ = 0;
  std::map<uint64_t, Adoption> adoptions_;  // waiting for their shim's record
  uint64_t next_adoption_ = 0;
};

}  // namespace

std::unique_ptr<ShimLauncher> MakeShimLauncher(boost::asio::io_context& io, ShimCommand shim_binary,
                                               int daemon_log_fd, CgroupHost cgroups) {
  return std::make_unique<ProcessShimLauncher>(io, std::move(shim_binary), daemon_log_fd,
                                               std::move(cgroups));
}

}  // namespace trainq
