// The agent (agent.h): starts the attempts placed on this node, watches their shims through
// pidfds, turns exits into ends, and re-adopts live shims after a restart (docs/architecture.md,
// "The shim and re-adoption").
#include <algorithm>
#include <csignal>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "src/core/container.h"
#include "src/core/duration.h"
#include "src/core/spec.h"
#include "src/core/transfers.h"
#include "src/daemon/agent.h"
#include "src/daemon/outcome.h"
#include "src/os/container_host.h"
#include "src/os/fence.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {

namespace {

LiveAttempt FromAttempt(const Job& job, const Attempt& a) {
  LiveAttempt live;
  live.session = job.spec.interactive;
  live.job = job.id;
  live.n = a.n;
  live.user = job.spec.user;
  live.shim = {a.pid, a.pid_start_ticks};
  live.gpu_indices = a.gpu_indices;
  live.gpu_uuids = a.gpu_uuids;
  live.reserved_bytes = a.reserved_bytes;
  live.exclusive = job.spec.exclusive();
  live.cpus = a.cpus;
  live.started_at = a.started_at;
  live.run_dir = a.run_dir;
  live.log_path = a.log_path;
  live.peak_bytes = a.peak_mem_bytes;
  live.master_port = a.master_port;
  return live;
}

// The attempt this node now runs: part `rank` of attempt `n`, placed as `p`, its shim started.
LiveAttempt Started(const Job& job, int n, const Placement& p, int rank, const ShimProcess& shim,
                    UnixMs now) {
  Job started = job;
  started.attempt = n;
  Attempt a;
  a.n = n;
  a.gpu_indices = p.gpu_indices;
  a.gpu_uuids = p.gpu_uuids;
  a.reserved_bytes = p.reserved_bytes;
  a.cpus = p.cpus;
  a.run_dir = p.run_dir;
  a.log_path = p.log_path;
  a.started_at = now;
  a.pid = shim.pid;
  a.pid_start_ticks = shim.start_ticks;
  a.master_port = p.master_port;
  LiveAttempt live = FromAttempt(started, a);
  if (!p.parts.empty()) {
    live.part = std::max(rank, 0);
    live.parts = static_cast<int>(p.parts.size());
    if (rank > 0) live.master_port = 0;  // node 0's port: not this node's to hold
  }
  return live;
}

// Frees a MASTER_PORT unless the attempt that holds it got under way.
class PortLease {
 public:
  PortLease(PortPool& pool, int port) : pool_(pool), port_(port) {}
  PortLease(const PortLease&) = delete;
  PortLease& operator=(const PortLease&) = delete;
  ~PortLease() {
    if (port_ > 0) pool_.Release(port_);
  }
  void Keep() { port_ = 0; }

 private:
  PortPool& pool_;
  int port_;
};

}  // namespace

std::string StorageProblem(const Status& st, const std::string& state_dir) {
  if (st.code() == Code::kNoSpace) {
    // SQLite's message names the database's dir already; the state dir's files do not.
    if (st.message().starts_with("disk full")) return st.message();
    return fmt::format("disk full in {}: {}", state_dir, st.message());
  }
  if (st.code() == Code::kIo) {
    return fmt::format("cannot write to {}: {}", state_dir, st.message());
  }
  return "";
}

Agent::Agent(Parts parts)
    : store_(*parts.store),
      clock_(*parts.clock),
      config_(*parts.config),
      options_(*parts.options),
      sampler_(*parts.sampler),
      launcher_(std::move(parts.launcher)),
      cgroups_(std::move(parts.cgroups)),
      node_(std::move(parts.node)),
      slurm_bin_dir_(std::move(parts.slurm_bin_dir)),
      trust_(*parts.trust),
      fence_file_(std::move(parts.fence_file)),
      images_(parts.images),
      fence_after_ms_(parts.fence_after_ms),
      port_free_(parts.port_free ? std::move(parts.port_free) : TcpPortFree),
      ports_(config_.master_port_first, config_.master_port_last) {
  // Each start checks container GPU isolation afresh (docs/containers.md, "GPU isolation"):
  // a setup fixed since a refusal is tried again.
  if (options_.paths.state_dir.empty()) return;
  if (Result<std::vector<std::string>> files = ListFiles(options_.paths.state_dir); files.ok()) {
    for (const std::string& name : *files) {
      if (name.starts_with(kGpuCheckPrefix))
        (void)RemoveFile(options_.paths.state_dir + "/" + name);
    }
  }
}

// The node's verdict; on a shared daemon one per user: the probe runs the user's image as
// the user, so what one user's image says must not refuse, or pass, another's jobs.
std::string Agent::GpuCheckFile(const std::string& user) const {
  return fmt::format("{}/{}{}.json", options_.paths.state_dir, kGpuCheckPrefix,
                     config_.shared ? "." + user : "");
}

void Agent::Stop() {
  stopping_ = true;
  launcher_->StopWatching();
  // The CDI spec of its simulated GPUs (SimulatedGpusAsCdi) goes with the daemon.
  const std::optional<GpuSnapshot>& gpus = sampler_.snapshot();
  if (gpus && gpus->source == "simulated" && !options_.paths.state_dir.empty()) {
    RemoveSimulatedGpuCdi(options_.paths.state_dir);
  }
}

// A multi-GPU job whose port range is used up waits, queued, with a reason; the next exit
// frees a port and triggers a pass, and a pass comes every kPortRetryMs while one waits.
Result<int> Agent::TakeMasterPort(const Job& job) {
  if (!NeedsMasterPort(job.spec)) return 0;
  // A port another program listens on would fail the job's rendezvous (EADDRINUSE).
  std::optional<int> port = ports_.Allocate(port_free_);
  if (port) return *port;
  std::pair<JobId, std::string> reason{
      job.id,
      fmt::format("waiting for a free MASTER_PORT: all {} ports of master_port_range {}-{} are "
                  "taken, {} by running multi-GPU jobs and {} in use by other programs",
                  ports_.last() - ports_.first() + 1, ports_.first(), ports_.last(),
                  ports_.held_count(),
                  ports_.last() - ports_.first() + 1 - static_cast<int>(ports_.held_count()))};
  if (Status st = store_.SetReasons(std::span(&reason, 1)); !st.ok()) {
    spdlog::warn("job {}: {}", job.id, st.message());
  }
  // An exit frees a port and triggers a pass; a program outside trainq gives no such sign.
  port_retry_at_ = clock_.Now() + kPortRetryMs;
  return Status::Unavailable(reason.second);
}

Status Agent::StartLocal(const Job& job, const StartDecision& d) {
  int n = job.attempt + 1;
  Result<int> port = TakeMasterPort(job);
  if (!port.ok()) return port.status();
  PortLease lease(ports_, *port);
  Placement p;
  p.node = d.node;
  p.gpu_indices = d.gpu_indices;
  for (int index : d.gpu_indices) {
    for (const GpuInfo& g : sampler_.snapshot()->gpus) {
      if (g.index == index) p.gpu_uuids.push_back(g.uuid);
    }
  }
  p.reserved_bytes = d.reserved_bytes;
  p.cpus = d.cpus;
  p.run_dir = fmt::format("{}/{}/{}", options_.paths.runs, job.id, n);
  p.log_path = LogPath(p.run_dir);
  p.master_port = *port;
  TRAINQ_RETURN_IF_ERROR(RunPlaced(job, n, p, /*record_start=*/true, /*rank=*/-1));
  lease.Keep();  // from here the live attempt holds the port until its shim is gone
  return Status::Ok();
}

// An attempt recorded as starting whose shim could not start (or whose gate's process is
// gone): `runner` is how looking up its user went, `launch` how the start went.
Status Agent::EndUnstarted(const Job& job, int n, const Status& runner, const Status& launch) {
  AttemptEnd end;
  end.ended_at = clock_.Now();
  end.end_reason = end.job_reason =
      runner.ok()
          ? "could not start the shim: " + launch.message()
          : fmt::format("cannot run as {}, who submitted it: {}", job.spec.user, runner.message());
  if (job.spec.gate_pid > 0 && runner.ok()) {  // nothing to hold the GPUs for
    end.attempt_state = end.job_state = JobState::kCancelled;
    end.end_reason = end.job_reason =
        fmt::format("its process (pid {}) ended before it got its GPUs", job.spec.gate_pid);
  }
  // Nothing ran: a full disk is waited out in the queue, not a failure of the job.
  bool no_space = launch.code() == Code::kNoSpace;
  if (no_space) end.job_state = JobState::kQueued;
  Status st = store_.FinishAttempt(job.id, n, end);
  if (no_space) return st.ok() ? launch : st;
  hooks_.done(job.id, st.ok());
  return st;
}

void Agent::LogCgroups() const {
  if (!cgroups_.on()) {
    spdlog::warn(
        "cgroups off ({}): jobs run without host memory and task limits, submits "
        "with --mem-limit or --max-procs are refused, and an attempt's leftover "
        "processes are found by scanning /proc",
        cgroups_.why_off);
    return;
  }
  spdlog::info("cgroup {} at {}: each attempt runs in a group of its own (memory, pids)",
               CgroupVersionName(cgroups_.version), cgroups_.root);
}

void Agent::HostSpecLimits(SpecLimits& limits) const {
  limits.host_limits = cgroups_.on();
  limits.host_limits_off = cgroups_.why_off;
  limits.max_mem_limit = config_.max_mem_limit_bytes;
  limits.machine_mem_bytes = PhysicalMemoryBytes();
  limits.max_procs = config_.max_procs_per_job;
}

CgroupSpec Agent::AttemptCgroup(const Job& job, const std::string& run_dir) const {
  if (!cgroups_.on()) return {};
  if (job.spec.gate_pid > 0) return {};  // a gate runs no command of ours
  HostLimitConfig host{config_.max_mem_limit_bytes, config_.default_mem_limit_bytes,
                       config_.max_procs_per_job, config_.default_max_procs};
  HostLimits limits = AttemptHostLimits(job.spec, host);
  return {cgroups_.version,
          cgroups_.root,
          AttemptCgroupName(run_dir),
          {limits.mem_bytes, limits.max_procs}};
}

// What the shim runs (spec.json): the command, its environment with the attempt's GPUs and
// distributed variables, its log, limits, cgroup and fence, and (shared) its user.
RunSpec Agent::ShimSpec(const Job& job, int n, const Placement& p, int rank, const UserInfo& runner,
                        const StagedPaths* staged) const {
  RunSpec spec;
  spec.command = job.spec.command;
  spec.cwd = staged && !staged->cwd.empty() ? staged->cwd : job.spec.cwd;
  if (staged) {
    spec.links = staged->links;
    if (!staged->notice.empty()) spec.notices.push_back(staged->notice);
  } else {
    // Where the job was submitted, --stage's DST is a link to SRC itself.
    for (const Transfer& t : job.spec.transfers) {
      if (t.kind == TransferKind::kStage) {
        spec.links.emplace_back(TransferDestination(t, spec.cwd), t.src);
      }
    }
  }
  AttemptEnvInput env{job.id, n, p.gpu_indices, p.gpu_uuids, p.master_port, p.run_dir};
  if (!p.parts.empty()) {
    env.node_rank = std::max(rank, 0);
    env.num_nodes = static_cast<int>(p.parts.size());
    env.master_addr = p.master_addr;
    for (const AttemptPart& part : p.parts) env.node_names.push_back(part.node);
  } else {
    env.node_names = {p.node};
  }
  if (job.spec.slurm_env) {
    env.slurm_bin_dir = slurm_bin_dir_;
    env.local_api = "unix:" + options_.paths.socket;
  }
  spec.env = BuildAttemptEnv(job.spec, env);
  spec.log_path = p.log_path;
  spec.log_max_bytes = config_.log_max_bytes;
  spec.grace_ms = config_.grace_ms;
  spec.time_limit_ms = job.spec.time_limit_ms;
  spec.warn_signal = job.spec.stop.signal;
  spec.warn_lead_ms = job.spec.stop.lead_ms;
  spec.warn_batch_only = job.spec.stop.batch_only;
  spec.checkpoint = job.spec.stop.checkpoint;
  // The wrapper of `trainq sbatch` runs the script's copy by this name (SbatchWrapper).
  if (job.spec.slurm_env) spec.batch_script = "/slurm_script";
  spec.umask = options_.job_umask;
  // A cluster's jobs stop themselves when this node stops renewing its heartbeat
  // (docs/cluster.md, "Failure").
  spec.fence_file = fence_file_;
  spec.fence_after_ms = fence_after_ms_;
  spec.cgroup = AttemptCgroup(job, p.run_dir);
  if (config_.shared) {
    spec.uid = runner.uid;
    spec.gid = runner.gid;
    spec.user = runner.name;
    spec.home = runner.home;
  }
  if (job.spec.interactive) {
    spec.session_socket = SessionSocketPath(options_.paths, job.id, n);
    spec.session_no_log = job.spec.no_log;
    spec.session_idle_ms = config_.interactive_idle_ms;
    spec.session_activity_file = SessionActivityPath(p.run_dir);
  }
  if (job.spec.container.on()) InContainer(job, p, spec);
  return spec;
}

// What a container job's log says first when this node's store (`held`) lacks its image: the node
// loads the archive, or pulls the image, before the job's command starts (docs/containers.md, "In a
// cluster").
std::vector<std::string> Agent::LoadNotice(const ContainerSpec& c,
                                           const std::vector<std::string>& held,
                                           const ContainerHost& host) const {
  bool archive = IsImageArchive(c.image);
  std::vector<std::string> names = archive ? c.archive_names : std::vector{c.image};
  if (!archive && host.pull != "missing") return {};  // the runtime's error says it
  for (const std::string& want : names) {
    for (const std::string& h : held) {
      if (ImageNameMatches(want, h)) return {};
    }
  }
  return {fmt::format("trainq: node {} {} {} first: its container store holds {}", node_,
                      archive ? "loads" : "pulls", c.image,
                      names.empty() ? std::string("no image of it")
                                    : fmt::format("none of {}", fmt::join(names, ", ")))};
}

// Simulated GPUs (docs/simulated-gpus.md) go in as CDI devices of the daemon's own spec, in
// place of the NVIDIA toolkit's kind, which knows none of them (docs/containers.md, "Without
// a GPU"). A kind set to another is the operator's, used as it is. "" when they do (or the
// GPUs are real); else why they go as NVIDIA_VISIBLE_DEVICES only, with no isolation check.
std::string Agent::SimulatedGpusAsCdi(ContainerHost& host) const {
  const std::optional<GpuSnapshot>& snapshot = sampler_.snapshot();
  if (host.cdi_kind != kNvidiaCdiKind || !snapshot || snapshot->source != "simulated") return "";
  std::vector<SimulatedGpu> gpus;
  for (const GpuInfo& g : snapshot->gpus) gpus.push_back({g.index, g.uuid, g.name});
  Result<std::string> kind = WriteSimulatedGpuCdi(options_.paths.state_dir, gpus);
  host.cdi_kind = kind.ok() ? *kind : "";
  return kind.ok() ? "" : kind.status().message();
}

// A container job (docs/containers.md): the shim runs the runtime, which runs the command. A
// node without a runtime or the archive runs what says so: the runtime's name, which the shim
// cannot start ("cannot run 'podman': No such file or directory"), or a `false` after the
// message in the log.
void Agent::InContainer(const Job& job, const Placement& p, RunSpec& spec) const {
  ContainerHost host;
  host.runtime_args = config_.container_runtime_args;
  host.pull = config_.container_pull;
  host.shm_bytes = config_.container_shm_bytes;
  host.cdi_kind = config_.container_gpu_kind;
  host.name = "trainq-" + AttemptCgroupName(p.run_dir);  // JOB-ATTEMPT-HASH: one per run dir
  Result<ContainerRuntime> runtime = FindContainerRuntime(config_.container_runtime);
  if (runtime.ok()) {
    host.runtime = runtime->path;
    host.podman = runtime->podman;
  } else {
    host.runtime = config_.container_runtime.empty() ? "podman" : config_.container_runtime;
  }
  std::string unchecked = p.gpu_uuids.empty() ? "" : SimulatedGpusAsCdi(host);
  const std::string& image = job.spec.container.image;
  auto refuse = [&spec](const std::string& problem) {
    spec.command = {"/bin/sh", "-c", "echo \"trainq: $1\" >&2; exit 125", "sh", problem};
  };
  if (config_.shared) {
    // Rootless podman as the submitter: the container's root is that user on the host, and
    // the runtime mounts only what the user may read. `unshare true` starts the user's
    // namespace holder (podman's pause process) outside the job, where it outlives it.
    if (!host.podman) return refuse(kSharedNeedsPodman);
    // Once the holder lives, `unshare` has nothing to start: skipped, it saves a podman run.
    if (!RootlessPauseAlive(static_cast<uid_t>(spec.uid))) {
      spec.prepare = {host.runtime, "unshare", "true"};
    }
  }
  if (IsImageArchive(image)) {
    Result<std::string> transport = ImageArchiveTransport(image);
    std::string problem = !transport.ok() ? transport.status().message()
                          : !host.podman  ? ArchiveNeedsPodman(image)
                                          : "";
    if (!problem.empty()) return refuse(problem);
    host.image_ref = *transport + ":" + image;
  }
  if (std::optional<std::vector<std::string>> held = images_ ? images_->Listing() : std::nullopt) {
    spec.notices = LoadNotice(job.spec.container, *held, host);
  }
  if (!unchecked.empty()) {
    spec.notices.push_back(
        "trainq: GPU isolation check skipped: the GPUs are simulated and go in as "
        "NVIDIA_VISIBLE_DEVICES only: " +
        unchecked);
  } else if (config_.container_gpu_check && !p.gpu_uuids.empty()) {
    // The node's setup is probed once (docs/containers.md, "GPU isolation"): the first GPU
    // container start after the daemon's, or after the setup changed, runs the probe first.
    std::string key = fmt::format("{} {} kind={}", host.runtime, fmt::join(host.runtime_args, " "),
                                  host.cdi_kind);
    Result<GpuCheck> known = ReadGpuCheck(GpuCheckFile(job.spec.user));
    bool judged = known.ok() && known->key == key;
    if (judged && !known->ok) return refuse(known->problem);
    if (!judged) {
      // In the host's order: CUDA's inside (CUDA_DEVICE_ORDER=PCI_BUS_ID) and nvidia-smi's.
      std::vector<std::pair<int, std::string>> gpus;
      for (size_t i = 0; i < p.gpu_uuids.size() && i < p.gpu_indices.size(); ++i) {
        gpus.emplace_back(p.gpu_indices[i], p.gpu_uuids[i]);
      }
      std::sort(gpus.begin(), gpus.end());
      for (const auto& g : gpus) spec.gpu_probe_expect.push_back(g.second);
      spec.gpu_probe = BuildGpuProbe(host.image_ref.empty() ? image : host.image_ref,
                                     spec.gpu_probe_expect, host);
      spec.gpu_check_file = GpuCheckFile(job.spec.user);
      spec.gpu_check_key = key;
    }
  }
  // In the copy of its tree where it was shipped, with what was staged for it readable inside.
  JobSpec in = job.spec;
  in.cwd = spec.cwd;
  for (const auto& [path, target] : spec.links)
    in.container.mounts.push_back(target + ":" + target + ":ro");
  ContainerRun run = BuildContainerRun(in, p.gpu_uuids, spec.env, host);
  spec.cleanup = std::move(run.cleanup);
  if (run.tty_flag_at >= 0) {
    spec.session_tty_flag = "--tty";
    spec.session_tty_flag_at = run.tty_flag_at;
  }
  // A session (salloc's too) runs its command in the container itself.
  if (job.spec.slurm_env && !job.spec.interactive) {
    // A batch script's wrapper runs on the host (its output files, srun's step folder) and
    // runs the script in the container: the run line up to the image, one word a line, in
    // the file TRAINQ_CONTAINER_RUN names (docs/containers.md, "sbatch").
    run.command.resize(run.command.size() - job.spec.command.size());
    std::string lines;
    for (const std::string& word : run.command) lines += word + "\n";
    std::string path = p.run_dir + "/container_run";
    if (WriteFileAtomic(path, lines).ok()) spec.env.emplace_back("TRAINQ_CONTAINER_RUN", path);
    return;
  }
  spec.command = std::move(run.command);
  spec.env = std::move(run.env);
}

Status Agent::RunPlaced(const Job& job, int n, const Placement& p, bool record_start, int rank,
                        const StagedPaths* staged) {
  // A cluster's record came through Redis: it runs only as a node signed it.
  TRAINQ_RETURN_IF_ERROR(trust_.VerifyJob(job.id, job.spec));
  // A shared daemon runs each job as its submitter, looked up now: the user may be gone.
  Result<UserInfo> runner = UserInfo{};
  if (config_.shared) runner = LookupUserByName(job.spec.user);
  // A run dir that already has a log belongs to another job of the same id: the store and
  // runs/ disagree. Never write into it (the daemon refuses to start on a lost database).
  if (FileExists(p.log_path)) {
    return Status::Internal(
        fmt::format("run dir {} already holds a log; the store and {} "
                    "disagree about job {}",
                    p.run_dir, options_.paths.runs, job.id));
  }
  TRAINQ_RETURN_IF_ERROR(MakeDirs(p.run_dir));
  // Without its user the spec is not written: nothing may ever run it as another.
  if (runner.ok()) {
    TRAINQ_RETURN_IF_ERROR(WriteRunSpec(p.run_dir, ShimSpec(job, n, p, rank, *runner, staged)));
  }
  UnixMs now = clock_.Now();
  // Recorded as starting before the shim exists: a crash from here on is seen on restart.
  if (record_start) TRAINQ_RETURN_IF_ERROR(store_.StartAttempt(job.id, job.attempt, p, now));

  bool gate = job.spec.gate_pid > 0;
  Result<ShimProcess> shim =
      !runner.ok() ? Result<ShimProcess>(runner.status())
      : gate       ? launcher_->WatchProcess(p.run_dir, {job.spec.gate_pid, job.spec.gate_ticks},
                                       config_.shared ? runner->uid : EffectiveUid(),
                                             ExitHandlerFor(job.id, n))
                   : launcher_->Launch(p.run_dir, ExitHandlerFor(job.id, n));
  if (!shim.ok()) return EndUnstarted(job, n, runner.status(), shim.status());
  // The shim runs whatever the store says: a failed MarkRunning must not lose it (its GPUs,
  // port and process would no longer be counted). It stays live and watched; its exit is
  // recorded from `starting` as well, and a restart re-adopts it as any starting attempt.
  // A gang's attempt is `running` once its master part runs; the other parts' shims are
  // found by their run dirs on their own nodes.
  Status marked =
      rank > 0 ? Status::Ok() : store_.MarkRunning(job.id, n, shim->pid, shim->start_ticks, now);
  if (!marked.ok()) {
    spdlog::error("job {} attempt {}: recording it as running failed ({}); it runs on as starting",
                  job.id, n, marked.message());
  }
  LiveAttempt live = Started(job, n, p, rank, *shim, now);
  live.gate = gate;
  live_.insert_or_assign(job.id, std::move(live));
  spdlog::info("job {} attempt {} started (shim pid {}, GPUs [{}]{})", job.id, n, shim->pid,
               fmt::join(p.gpu_indices, ","),
               p.master_port ? fmt::format(", MASTER_PORT {}", p.master_port) : "");
  // Dependents' reasons say what they wait for: now a running job.
  hooks_.started(job.id);
  return Status::Ok();
}

// --- gates (docs/python.md, "The GPU gate") ---

ExitRecord Agent::GateEndRecord(const LiveAttempt& live) const {
  ExitRecord rec;
  rec.started_at = live.started_at;
  rec.ended_at = clock_.Now();
  rec.cancelled = live.cancel_requested;
  rec.error =
      fmt::format("its process (pid {}) ended without leaving its trainq.gpu block", live.shim.pid);
  return rec;
}

// A gate held across a restart: its process is watched again, or its end collected.
void Agent::RecoverGate(const Job& job, const Attempt& a, LiveAttempt live) {
  live.gate = true;
  Result<UserInfo> owner = config_.shared ? LookupUserByName(job.spec.user) : UserInfo{};
  int64_t uid = !config_.shared ? EffectiveUid() : owner.ok() ? owner->uid : -2;  // -2: nobody's
  Result<ShimProcess> held = launcher_->WatchProcess(
      a.run_dir, {job.spec.gate_pid, job.spec.gate_ticks}, uid, ExitHandlerFor(job.id, a.n));
  live_.insert_or_assign(job.id, std::move(live));
  if (held.ok()) {
    spdlog::info("job {} attempt {}: gate of pid {} held again", job.id, a.n, held->pid);
    return;
  }
  OnShimExit(job.id);  // released (exit.json) or gone while the daemon was away
}

Status Agent::ReleaseGate(const Job& job, const GateRelease& r, std::string* message) {
  auto it = live_.find(job.id);
  if (job.spec.gate_pid <= 0) {
    return Status::Invalid(fmt::format("job {} is not a gate; release is for trainq.gpu", job.id));
  }
  if (it == live_.end() || !IsActive(job.state)) {
    return Status::Conflict(fmt::format("job {} holds no GPUs ({})", job.id, StateName(job.state)));
  }
  const LiveAttempt& live = it->second;
  // What the block raised, as its log: the out-of-memory patterns read it as any job's.
  if (!r.error.empty()) {
    TRAINQ_RETURN_IF_ERROR(WriteFileAtomic(live.log_path, r.error + "\n", Durability::kNoSync));
  }
  ExitRecord rec;
  rec.exit_code = r.exit_code;
  rec.started_at = live.started_at;
  rec.ended_at = clock_.Now();
  TRAINQ_RETURN_IF_ERROR(WriteExitRecord(live.run_dir, rec));
  int n = live.n;
  OnShimExit(job.id);
  Result<Job> now = store_.Get(job.id);
  *message = fmt::format("job {} attempt {} released: {}", job.id, n,
                         now.ok() ? std::string(StateName(now->state)) : "recorded");
  return Status::Ok();
}

ShimLauncher::ExitHandler Agent::ExitHandlerFor(JobId job, int n) {
  return [this, job, n] {
    auto it = live_.find(job);
    if (!stopping_ && it != live_.end() && it->second.n == n) OnShimExit(job);
  };
}

void Agent::OnShimExit(JobId id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  LiveAttempt& live = it->second;
  Result<ExitRecord> rec = ReadExitRecord(live.run_dir);
  // A gate's process ended without releasing its GPUs (it exited, was killed, or cancelled):
  // the process was the whole job, and nothing of it is left to stop.
  if (!rec.ok() && live.gate) rec = GateEndRecord(live);
  // A shim that wrote no record did not stop the job's tree either: it died (kill -9).
  if (!rec.ok()) return EndUnrecorded(id, Unrecorded::kShimDied);
  Result<Job> job = store_.Get(id);
  OutcomeInput in;
  in.record = *rec;
  Result<std::string> tail = ReadFileTail(live.log_path, config_.log_tail_bytes);
  if (tail.ok()) in.log_tail = std::move(*tail);
  in.oom_patterns = config_.oom_patterns;
  if (job.ok()) {
    for (const Attempt& a : job->attempts) {
      if (a.n == live.n) continue;
      in.oom_retries_used += a.oom ? 1 : 0;
      in.port_retries_used += a.end_reason.starts_with(kPortTakenReason) ? 1 : 0;
    }
    in.retries_allowed = job->spec.retries;
    in.time_limit_ms = job->spec.time_limit_ms;
    in.stop = job->spec.stop;
    in.container = job->spec.container.on();
  }
  in.backoff_ms = config_.oom_backoff_ms;
  in.backoff_max_ms = config_.oom_backoff_max_ms;
  in.master_port = live.master_port;
  in.cancelled_by = live.cancelled_by;
  in.now = clock_.Now();
  RecordEnd(id, DecideOutcome(in));
}

void Agent::RecordEnd(JobId id, const AttemptEnd& given) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  LiveAttempt& live = it->second;
  if (live.master_port > 0) ports_.Release(live.master_port);  // the attempt's processes are gone
  int n = live.n;
  AttemptEnd end = given;
  end.part = live.part;
  end.parts = live.parts;
  // What the attempt leaves here (its log, spec and records) counts against its user's cap.
  end.log_bytes = DirBytes(live.run_dir);
  WriteUsage(id, live, clock_.Now());
  live_.erase(it);
  StoreEnd(id, n, end);
  // The attempt's memory is free now: sample at once so the next job need not wait a tick.
  hooks_.freed();
}

void Agent::StoreEnd(JobId id, int n, const AttemptEnd& end) {
  Status st = store_.FinishAttempt(id, n, end);
  std::string problem = StorageProblem(st, options_.paths.state_dir);
  // The cluster's store away: the end waits here as a disk problem's does. FinishAttempt is a
  // compare-and-set on the attempt, so a write that landed before its answer was lost is
  // refused the second time, never applied twice.
  if (problem.empty() && st.code() == Code::kUnavailable) problem = st.message();
  if (!problem.empty()) {
    auto [it, first] = unrecorded_ends_.try_emplace(id);
    if (first) {
      spdlog::error("job {} attempt {}: recording its end ({}) failed: {}; trying again every {}s",
                    id, n, end.end_reason, problem, kStorageRetryMs / 1000);
      it->second.order = ++unrecorded_count_;
    }
    it->second.n = n;
    it->second.end = end;
    it->second.problem = std::move(problem);
    return;
  }
  if (unrecorded_ends_.erase(id) > 0 && st.code() == Code::kConflict) {
    // A try whose answer was lost had landed: the store holds this very end already.
    Result<Job> now = store_.Get(id);
    const Attempt* a =
        now.ok() && static_cast<int>(now->attempts.size()) >= n ? &now->attempts[n - 1] : nullptr;
    if (a != nullptr && a->n == n && !IsActive(a->state) && a->end_reason == end.end_reason) {
      st = Status::Ok();
    }
  }
  if (!st.ok()) {
    spdlog::error("job {} attempt {}: recording its end failed: {}", id, n, st.message());
  } else {
    spdlog::info("job {} attempt {} ended: {} -> {}", id, n, end.end_reason,
                 StateName(end.job_state));
  }
  if (end.job_state == JobState::kQueued) hooks_.requeued(id, end.oom);
  if (IsDone(end.job_state)) hooks_.done(id, st.ok());
}

bool Agent::RetryUnrecordedEnds() {
  // In the order they came (StoreEnd changes the map).
  std::vector<std::pair<JobId, UnrecordedEnd>> pending(unrecorded_ends_.begin(),
                                                       unrecorded_ends_.end());
  std::sort(pending.begin(), pending.end(),
            [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
  for (const auto& [id, u] : pending) StoreEnd(id, u.n, u.end);
  return !unrecorded_ends_.empty();
}

const UnrecordedEnd* Agent::UnrecordedEndOf(JobId id) const {
  auto it = unrecorded_ends_.find(id);
  return it == unrecorded_ends_.end() ? nullptr : &it->second;
}

void Agent::RecoverAttempts(bool unstarted_wait) {
  ListQuery query;
  query.states = {JobState::kStarting, JobState::kRunning};
  query.with_attempts = true;
  Result<std::vector<Job>> active = store_.List(query);
  if (!active.ok()) {
    spdlog::error("recovery: {}", active.status().message());
    return;
  }
  for (const Job& job : *active) {
    const Attempt* current = job.current();
    int rank = 0;
    std::optional<AttemptPart> part =
        current ? current->PartOn(node_, &rank) : std::optional<AttemptPart>();
    if (!part) continue;
    // Placed here by the leader while this daemon was away: SyncAssigned starts it.
    if (unstarted_wait && !IsDirectory(part->run_dir)) continue;
    // This node's part, as if the attempt were its alone.
    Attempt a = *current;
    a.node = part->node;
    a.gpu_indices = part->gpu_indices;
    a.gpu_uuids = part->gpu_uuids;
    a.run_dir = part->run_dir;
    a.log_path = part->log_path;
    if (!current->parts.empty() && rank > 0) a.master_port = 0;
    RecoverOne(job, a);
    if (!current->parts.empty() && live_.count(job.id)) {
      live_[job.id].part = rank;
      live_[job.id].parts = static_cast<int>(current->parts.size());
    }
  }
}

void Agent::ReadoptLost(const Job& job) {
  const Attempt* a = job.current();
  if (a == nullptr || a->node != node_ || !a->parts.empty() || job.spec.gate_pid > 0 ||
      live_.count(job.id) || !IsDirectory(a->run_dir)) {
    return;
  }
  // A node killed whole left no record and no process: its end is unknown, not a failure.
  if (!FileExists(ExitPath(a->run_dir)) &&
      launcher_->AttemptProcesses(a->run_dir, {a->pid, a->pid_start_ticks}).empty()) {
    return;
  }
  spdlog::info("job {} attempt {}: judged lost with this node; reading how it ended", job.id, a->n);
  RecoverOne(job, *a);
}

void Agent::RecoverOne(const Job& job, const Attempt& a) {
  LiveAttempt live = FromAttempt(job, a);
  if (job.spec.gate_pid > 0) return RecoverGate(job, a, std::move(live));
  // Held again whatever follows: until its processes are gone, no other attempt gets it.
  if (a.master_port > 0 && !ports_.Take(a.master_port)) {
    spdlog::warn("job {}: MASTER_PORT {} is outside master_port_range or held twice", job.id,
                 a.master_port);
  }
  // Live from now on, with the shim the store recorded until Adopted hears from the launcher:
  // at once, or a moment later for a shim that was just starting.
  live_.insert_or_assign(job.id, std::move(live));
  launcher_->Adopt(
      a.run_dir, [this, job, a](Result<ShimProcess> shim) { Adopted(job, a, std::move(shim)); },
      ExitHandlerFor(job.id, a.n));
}

void Agent::Adopted(const Job& job, const Attempt& a, Result<ShimProcess> shim) {
  auto it = live_.find(job.id);
  if (it == live_.end() || it->second.n != a.n) return;  // ended meanwhile
  if (shim.ok()) {
    it->second.shim = *shim;
    if (job.state == JobState::kStarting) {
      Status st = store_.MarkRunning(job.id, a.n, shim->pid, shim->start_ticks, clock_.Now());
      if (!st.ok()) spdlog::warn("job {}: {}", job.id, st.message());
    }
    spdlog::info("job {} attempt {}: re-adopted shim pid {}", job.id, a.n, shim->pid);
    return;
  }
  if (shim.status().code() != Code::kNotFound) {
    spdlog::warn("job {} attempt {}: {}", job.id, a.n, shim.status().message());
  }
  // No live shim: a shim writes exit.json before it lets go of its lock, so one found gone
  // has written all it ever will. Without its run dir (removed while the daemon was down) an
  // attempt's shim cannot be adopted, though it and its job may run on: they are stopped before the
  // job runs again.
  if (!IsDirectory(a.run_dir)) return EndUnrecorded(job.id, Unrecorded::kRunDirMissing);
  // The daemon died between recording the attempt and starting its shim: nothing should run,
  // and whatever does is stopped before the job is queued again.
  if (!FileExists(ExitPath(a.run_dir)) && !FileExists(ShimPath(a.run_dir))) {
    return EndUnrecorded(job.id, Unrecorded::kNeverStarted);
  }
  // The shim ended while the daemon was away: collect its record like a live exit.
  OnShimExit(job.id);
}

Status Agent::Cancel(JobId id, const std::string& by, std::string* message) {
  auto it = live_.find(id);
  if (it == live_.end()) return Status::NotFound(fmt::format("job {} is not running here", id));
  LiveAttempt& live = it->second;
  if (live.stopping) {
    // Noted all the same: an attempt that would be queued again ends cancelled instead.
    live.cancel_requested = true;
    live.cancelled_by = by;
    *message =
        fmt::format("job {}: its supervisor is gone and its processes are being stopped", id);
    return Status::Ok();
  }
  // Noted before the signal: a shim it ends before the shim could record anything (or that
  // dies for another reason meanwhile) ends the attempt cancelled, not failed.
  live.cancel_requested = true;
  live.cancelled_by = by;
  TRAINQ_RETURN_IF_ERROR(launcher_->Signal(live.shim, SIGTERM));
  *message = fmt::format("job {}: stopping its processes (SIGTERM, then SIGKILL after {})", id,
                         FormatDuration(config_.grace_ms));
  return Status::Ok();
}

Status Agent::Control(JobId id, ShimControl control, std::string* message) {
  auto it = live_.find(id);
  if (it == live_.end()) return Status::NotFound(fmt::format("job {} is not running here", id));
  LiveAttempt& live = it->second;
  if (live.stopping || live.cancel_requested || live.gate) {
    return Status::Conflict(fmt::format("job {} is being stopped already{}", id,
                                        live.gate ? " (a gate has no processes to signal)" : ""));
  }
  // A job warned of its preemption may still ask to be requeued at once (Lightning saves, then
  // runs scontrol requeue); a second requeue has nothing to add.
  if (!control.stop.empty() && live.stop_requested == "requeued") {
    return Status::Conflict(fmt::format("job {} is being requeued already", id));
  }
  // Each request's number is above the last the shim saw, across daemon restarts too.
  Result<ShimControl> last = ReadShimControl(live.run_dir);
  control.seq = std::max<int64_t>(last.ok() ? last->seq : 0, live.control_seq) + 1;
  live.control_seq = control.seq;
  TRAINQ_RETURN_IF_ERROR(WriteShimControl(live.run_dir, control));
  TRAINQ_RETURN_IF_ERROR(launcher_->Signal(live.shim, SIGUSR1));
  if (!control.stop.empty()) live.stop_requested = control.stop;
  if (message == nullptr) return Status::Ok();
  if (control.stop == "requeued") {
    *message = fmt::format(
        "job {}: stopping attempt {} (SIGTERM, then SIGKILL after {}); it is "
        "queued again as attempt {}",
        id, live.n, FormatDuration(config_.grace_ms), live.n + 1);
  } else if (!control.stop.empty()) {
    *message = fmt::format("job {}: {}; stopping it in {}", id, control.reason,
                           FormatDuration(control.stop_in_ms));
  } else {
    *message = fmt::format("job {}: sent SIG{} to {}", id, sigabbrev_np(control.signal),
                           control.batch_only ? "its batch shell" : "its processes");
  }
  return Status::Ok();
}

void Agent::StopAllBut(const std::set<JobId>& keep) {
  for (auto& [id, live] : live_) {
    if (keep.count(id) || live.cancel_requested || live.stopping) continue;
    spdlog::warn(
        "job {} attempt {}: the store no longer places it on node {} (judged lost?); stopping it",
        id, live.n, node_);
    live.cancel_requested = true;
    if (Status st = launcher_->Signal(live.shim, SIGTERM); !st.ok()) {
      spdlog::warn("job {}: {}", id, st.message());
    }
  }
}

Status Agent::StartPart(const Job& job, int n, const Placement& p, int rank,
                        const StagedPaths* staged) {
  // Part 0's node holds the attempt's MASTER_PORT while it runs (the leader chose it free).
  bool holds_port = p.master_port > 0 && rank <= 0;
  if (holds_port) ports_.Take(p.master_port);
  Status st = RunPlaced(job, n, p, /*record_start=*/false, rank, staged);
  if (!st.ok() && holds_port) ports_.Release(p.master_port);
  return st;
}

void Agent::AttributeUsage() {
  pid_owner_.clear();
  for (auto& [id, live] : live_) {
    live.used_by_gpu.clear();
    live.usage_known = false;
  }
  if (!sampler_.snapshot() || live_.empty()) return;
  bool any_process = false;
  for (const GpuInfo& g : sampler_.snapshot()->gpus)
    any_process = any_process || !g.processes.empty();
  std::map<int64_t, int64_t> parent;
  if (any_process) {
    for (const ProcStat& p : launcher_->Processes()) parent[p.pid] = p.ppid;
  }
  std::map<int64_t, JobId> shim_of;
  for (const auto& [id, live] : live_) {
    if (live.shim.pid > 0) shim_of[live.shim.pid] = id;
    // Processes left by a dead shim hang below no shim: named one by one while stopped.
    if (live.stopping) {
      for (const ProcStat& p : live.stopping->procs) shim_of[p.pid] = id;
    }
  }
  for (const GpuInfo& g : sampler_.snapshot()->gpus) {
    for (const GpuProcess& proc : g.processes) {
      // Walk up to a shim: shims are subreapers, so every job process stays below one.
      int64_t pid = proc.pid;
      for (int depth = 0; depth < 64 && pid > 1 && !shim_of.count(pid); ++depth) {
        auto p = parent.find(pid);
        pid = p == parent.end() ? 0 : p->second;
      }
      auto owner = shim_of.find(pid);
      JobId id = owner != shim_of.end() ? owner->second : 0;
      // Below no shim: a container run by docker's daemon is its child; the attempt's marker
      // in its environment says whose it is. Not on a shared daemon, where docker is refused
      // and any user could plant another's marker to have their process counted as that job's.
      if (id == 0 && !config_.shared) {
        std::optional<std::string> run_dir = launcher_->RunDirOf(proc.pid);
        for (const auto& [job, live] : live_) {
          if (run_dir && live.run_dir == *run_dir) id = job;
        }
      }
      if (id == 0) continue;
      pid_owner_[proc.pid] = id;
      live_[id].used_by_gpu[g.index] += proc.used_bytes;
    }
  }
  std::map<int, int> utilization;
  for (const GpuInfo& g : sampler_.snapshot()->gpus) utilization[g.index] = g.utilization_pct;
  UnixMs t = sampler_.sampled_at();
  for (auto& [id, live] : live_) {
    CountUsage(live, t, utilization);
    if (live.session) StampActivity(live, t, utilization);
    if (t - live.usage_written_at >= kUsageWriteMs) WriteUsage(id, live, t);
    // Per GPU, as --mem and the reservation are: a 4-GPU job's sum would read as 4x its ask.
    uint64_t most = 0;
    for (auto& [gpu, bytes] : live.used_by_gpu) most = std::max(most, bytes);
    if (most > live.peak_bytes) {
      live.peak_bytes = most;
      Status st = store_.RecordPeak(id, live.n, most);
      if (!st.ok()) spdlog::warn("job {}: recording peak memory: {}", id, st.message());
    }
  }
}

// From one sample to the next, each GPU the attempt holds here adds the time between them to
// held, to busy that time its utilisation (the GPU's: jobs sharing one each count all of it),
// and the memory its processes use. The first sample of an attempt, or one after a gap longer
// than two sample intervals (a stalled loop, samples that failed), counts no more than that.
void Agent::CountUsage(LiveAttempt& live, UnixMs t, const std::map<int, int>& utilization) {
  int64_t gap = std::max<int64_t>(2 * config_.sample_interval_ms, 2000);
  UnixMs from = live.usage_at > 0 ? live.usage_at : std::max(live.started_at, t - gap);
  live.usage_at = std::max(live.usage_at, t);
  if (live.usage_written_at == 0) live.usage_written_at = t;
  int64_t dt = std::min(t - from, gap);
  if (dt <= 0) return;
  for (int gpu : live.gpu_indices) {
    AttemptUsage& u = live.unwritten;
    u.held_gpu_ms += static_cast<uint64_t>(dt);
    auto util = utilization.find(gpu);
    if (util != utilization.end() && util->second >= 0) {
      u.util_known_ms += static_cast<uint64_t>(dt);
      u.busy_gpu_ms += static_cast<uint64_t>(dt * util->second / 100);
    }
    auto used = live.used_by_gpu.find(gpu);
    if (used != live.used_by_gpu.end()) {
      u.mem_byte_s += used->second * static_cast<uint64_t>(dt) / 1000;
    }
  }
}

// A session's GPUs in use keep it open (RunSpec::session_idle_ms): its shim reads the stamp.
// Written at most every 5 s (a quarter of a shorter timeout).
void Agent::StampActivity(LiveAttempt& live, UnixMs t, const std::map<int, int>& utilization) {
  // Often enough that a session in use is never judged idle between two stamps.
  int64_t every = std::min<int64_t>(5000, config_.interactive_idle_ms / 4);
  if (t - live.activity_stamped_at < every) return;
  bool busy = std::any_of(live.gpu_indices.begin(), live.gpu_indices.end(), [&](int gpu) {
    auto util = utilization.find(gpu);
    return util != utilization.end() && util->second > 0;
  });
  if (!busy) return;
  Status st = WriteFenceStamp(SessionActivityPath(live.run_dir), BootClockMs());
  if (!st.ok()) spdlog::warn("job {}: stamping its session's GPU use: {}", live.job, st.message());
  live.activity_stamped_at = t;
}

void Agent::WriteUsage(JobId id, LiveAttempt& live, UnixMs now) {
  if (live.unwritten.empty()) return;
  Status st = store_.AddUsage(id, live.n, live.unwritten);
  if (!st.ok()) {
    spdlog::warn("job {}: recording its GPU usage: {}", id, st.message());
    return;
  }
  live.unwritten = {};
  live.usage_written_at = now;
}

}  // namespace trainq
