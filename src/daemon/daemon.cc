#include "src/daemon/daemon.h"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "src/core/duration.h"
#include "src/core/endpoint.h"
#include "src/core/oom.h"
#include "src/daemon/cluster_mode.h"
#include "src/daemon/daemon_impl.h"
#include "src/daemon/liveness.h"
#include "src/daemon/local_mode.h"
#include "src/daemon/stager.h"
#include "src/os/permissions.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/users.h"

namespace trainq {

DaemonImpl::DaemonImpl(boost::asio::io_context& io, DaemonOptions options, Config config,
                       DaemonSeams seams)
    : io_(io),
      options_(std::move(options)),
      settings_(std::move(config), options_.paths.settings,
                [this] {
                  std::vector<int> indices;
                  if (sampler_.snapshot()) {
                    for (const GpuInfo& g : sampler_.snapshot()->gpus) indices.push_back(g.index);
                  }
                  return indices;
                }),
      config_(settings_.config()),
      store_(std::move(seams.store)),
      clock_(*seams.clock),
      sampler_(std::move(seams.probe), clock_) {
  deliver_ = std::move(seams.deliver);
  liveness_thread_ = seams.liveness_thread;
  cluster_key_ = std::move(seams.cluster_key);
  node_ = config_.node_name.empty() ? HostName() : config_.node_name;
  cpu_slots_ = config_.cpu_slots > 0 ? config_.cpu_slots : CpuCount();
  address_ = config_.node_address.empty() ? HostName() : config_.node_address;
  // The one place the mode is chosen: a cluster's store makes this node a cluster member,
  // whose writing the cluster key signs and checks (trust.h).
  ClusterStore* cluster = dynamic_cast<ClusterStore*>(store_.get());
  if (cluster != nullptr) cluster_trust_ = ClusterTrust(cluster_key_);
  trust_ = cluster != nullptr ? cluster_trust_.get() : &OneMachineTrust();
  auth_ = std::make_unique<Authenticator>(*store_, clock_, config_, *trust_);
  tokens_ = std::make_unique<TokenRoutes>(*store_, clock_, config_, *trust_);
  // Each object is made from those made before it; the hooks by which the roles tell each
  // other what happened come last (Wire), once everything they call exists.
  MakeRoles(seams, cluster != nullptr);
  mode_ = MakeMode(cluster);
  scheduler_->SetSite(&mode_->site());
  MakeWatch();
  steps_ = std::make_unique<StepRoutes>(*agent_, *mode_, clock_, *trust_, node_);
  api_ = MakeApi();
  Wire();
}

// The roles that do not depend on the mode, without their hooks (Wire).
void DaemonImpl::MakeRoles(DaemonSeams& seams, bool cluster) {
  deps_ = std::make_unique<Dependencies>(*store_, clock_);
  submits_ = std::make_unique<SubmitBatcher>(io_, *store_, clock_, config_);
  Agent::Parts parts;
  parts.store = store_.get();
  parts.clock = &clock_;
  parts.config = &config_;
  parts.options = &options_;
  parts.sampler = &sampler_;
  parts.launcher = std::move(seams.launcher);
  parts.cgroups = std::move(seams.cgroups);
  parts.node = node_;
  parts.slurm_bin_dir = seams.slurm_bin_dir;
  // In a cluster every node checks, before it runs a job, that a node signed it as it reads.
  parts.trust = trust_;
  if (cluster) {
    // Self-fencing (docs/cluster.md): a node's jobs stop themselves after half of
    // node_timeout without a renewed heartbeat, so they are gone before the leader judges
    // the node lost.
    parts.fence_file = ClusterMode::FenceFile(options_.paths);
    parts.fence_after_ms = config_.node_timeout_ms / 2;
    // What this node's container store holds, for placement and a job's first log line.
    if (Result<ContainerRuntime> r = FindContainerRuntime(config_.container_runtime); r.ok()) {
      images_ = std::make_unique<ImageCensus>(r->path);
      parts.images = images_.get();
    }
    Stager::Parts stage;
    stage.node = node_;
    stage.staged_dir = options_.paths.state_dir + "/staged";
    stage.cache_dir = options_.paths.state_dir + "/cache";
    stage.cache_cap_bytes = config_.stage_cache_bytes;
    stage.shared = config_.shared;
    stage.post = [this](std::function<void()> fn) { boost::asio::post(io_, std::move(fn)); };
    stager_ = std::make_unique<Stager>(std::move(stage));
  }
  agent_ = std::make_unique<Agent>(std::move(parts));
  scheduler_ =
      std::make_unique<Scheduler>(io_, *store_, clock_, config_, *agent_, options_.paths.state_dir,
                                  [this] { return sampler_.LargestGpuBytes(); });
}

// The roles' hooks: each calls objects the constructor made before this runs.
void DaemonImpl::Wire() {
  Dependencies::Hooks deps;
  deps.queued = [this](const Job& job, UnixMs now) { scheduler_->Queued(job, now); };
  deps.ended = [this](JobId id) { JobEnded(id); };
  deps.unqueued = [this](JobId id) {
    scheduler_->Left(id);
    scheduler_->MarkStale();
  };
  deps_->SetHooks(std::move(deps));
  SubmitBatcher::Hooks hooks;
  // Each job is signed by the node that stores it, and checked before any node runs it.
  hooks.before = [this](std::vector<JobSpec>& specs) {
    for (JobSpec& spec : specs) trust_->SignJob(spec, node_);
  };
  hooks.stored = [this](const std::vector<JobSpec>& specs, const std::vector<JobId>& ids,
                        UnixMs now) {
    scheduler_->Submitted(specs, ids, now);
    mode_->Stored(specs, ids);
    DaemonCounters& counters = watch_->counters();
    counters.submitted += ids.size();
    for (const JobSpec& spec : specs) ++counters.submitted_by_user[spec.user];
    watch_->Poke();
  };
  submits_->SetHooks(std::move(hooks));
  Agent::Hooks agent;
  // Dependents' reasons say what they wait for: now a running job.
  agent.started = [this](JobId id) {
    deps_->ResolveDependents(id);
    watch_->Poke();
  };
  agent.done = [this](JobId id, bool stored) {
    deps_->ResolveDependents(id);
    if (stored) JobEnded(id);
    watch_->Poke();
  };
  agent.requeued = [this](JobId, bool oom) {
    scheduler_->MarkStale();
    if (oom) ++watch_->counters().oom_retries;
    watch_->Poke();
  };
  agent.freed = [this] {
    // The attempt's memory is free now: sample at once so the next job need not wait a tick.
    SampleGpus();
    mode_->Report();  // a cluster's leader places from this node's report
    RequestSchedule();
  };
  agent_->SetHooks(std::move(agent));
}

std::unique_ptr<Mode> DaemonImpl::MakeMode(ClusterStore* cluster) {
  auto cpu_slots = [this] { return cpu_slots_; };
  if (cluster == nullptr) {
    return std::make_unique<LocalMode>(
        LocalMode::Parts{&clock_, agent_.get(), scheduler_.get(), &sampler_, node_, address_,
                         cpu_slots, NodeLabels{config_.node_features, config_.gpu_type}});
  }
  ClusterMode::Parts m;
  m.io = &io_;
  m.store = cluster;
  m.clock = &clock_;
  m.config = &config_;
  m.options = &options_;
  m.sampler = &sampler_;
  m.key = &cluster_key_;
  m.agent = agent_.get();
  m.scheduler = scheduler_.get();
  m.deps = deps_.get();
  m.node = node_;
  m.address = address_;
  m.cpu_slots = cpu_slots;
  m.job_ended = [this](JobId id) { JobEnded(id); };
  m.images = images_.get();
  m.stager = stager_.get();
  m.liveness_thread = liveness_thread_;
  return std::make_unique<ClusterMode>(std::move(m));
}

void DaemonImpl::MakeWatch() {
  Watch::Parts w;
  w.io = &io_;
  w.store = store_.get();
  w.clock = &clock_;
  w.config = &config_;
  w.sampler = &sampler_;
  w.node = node_;
  w.this_node = [this] {
    return ThisNode(node_, cpu_slots_, *agent_, sampler_,
                    NodeLabels{config_.node_features, config_.gpu_type});
  };
  w.policy = [this] { return scheduler_->Policy(); };
  w.node_states = [this] { return mode_->NodeStates(); };
  w.connections = [this] { return server_ ? server_->Connections() : 0; };
  watch_ = std::make_unique<Watch>(std::move(w));
  scheduler_->SetCounters(&watch_->counters());
}

std::unique_ptr<Api> DaemonImpl::MakeApi() {
  ApiParts api;
  api.io = &io_;
  api.store = store_.get();
  api.clock = &clock_;
  api.config = &config_;
  api.options = &options_;
  api.settings = &settings_;
  api.sampler = &sampler_;
  api.auth = auth_.get();
  api.agent = agent_.get();
  api.scheduler = scheduler_.get();
  api.mode = mode_.get();
  api.deps = deps_.get();
  api.submits = submits_.get();
  api.tokens = tokens_.get();
  api.steps = steps_.get();
  api.watch = watch_.get();
  api.node = node_;
  api.cpu_slots = [this] { return cpu_slots_; };
  api.job_ended = [this](JobId id) { JobEnded(id); };
  api.settings_changed = [this] { SettingsChanged(); };
  api.stop = [this] { RequestStop(); };
  return std::make_unique<Api>(std::move(api));
}

void DaemonImpl::SettingsChanged() {
  cpu_slots_ = config_.cpu_slots > 0 ? config_.cpu_slots : CpuCount();
}

Status DaemonImpl::Start() {
  TRAINQ_RETURN_IF_ERROR(Open());
  return Serve();
}

Status DaemonImpl::Open() {
  TRAINQ_RETURN_IF_ERROR(mode_->Check());
  TRAINQ_RETURN_IF_ERROR(StartNotifier());  // ends collected below may notify
  agent_->LogCgroups();
  // Re-adopt first: the first sample must match GPU processes to the attempts that hold
  // them, or their memory would count twice (used, and reserved as not yet allocated).
  // In a cluster, an attempt placed here that never started is SyncAssigned's to start.
  agent_->RecoverAttempts(mode_->AttemptsStartLater());
  // After the re-adoptions (ports held again, ended attempts collected): a crash between a
  // job's end and its dependents' resolution must not leave them blocked.
  deps_->ResolveAllBlocked();
  SampleGpus();
  TRAINQ_RETURN_IF_ERROR(settings_.Load());  // after the sample: it checks the devices
  SettingsChanged();
  watch_->Sampled();  // the history's first point (it reads the devices in force)
  RequestSchedule();
  return Status::Ok();
}

Status DaemonImpl::Serve() {
  HttpLimits limits;
  limits.max_body_bytes = config_.max_request_bytes;
  limits.request_timeout_ms = config_.request_timeout_ms;
  limits.header_timeout_ms = config_.header_timeout_ms;
  limits.idle_timeout_ms = config_.idle_timeout_ms;
  limits.max_connections = ConnectionCap(config_.max_connections, OpenFileLimit());
  limits.max_connections_per_peer = static_cast<size_t>(config_.max_connections_per_peer);
  limits.rank_uid = [this](int64_t uid) { return auth_->RankOfUid(uid); };
  limits.warn = [](const std::string& m) { spdlog::warn("{}", m); };
  if (limits.max_connections < static_cast<size_t>(config_.max_connections)) {
    spdlog::info("at most {} API connections: the fd limit is {} (max_connections {})",
                 limits.max_connections, OpenFileLimit(), config_.max_connections);
  }
  server_ = std::make_unique<HttpServer>(
      io_, [this](HttpRequest r, Responder respond) { Handle(std::move(r), std::move(respond)); },
      std::move(limits));
  // TCP first: a daemon that cannot bind its TCP addresses stops before its socket appears,
  // so a client starting it sees the error, not a daemon that vanishes.
  TRAINQ_RETURN_IF_ERROR(ListenTcp());
  TRAINQ_RETURN_IF_ERROR(server_->ListenUnix(options_.paths.socket));
  if (config_.shared) TRAINQ_RETURN_IF_ERROR(OpenSocketToUsers());
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping; running jobs keep running", sig);
    RequestStop();
  });
  if (std::string stall = GetEnv("TRAINQ_TEST_STALL_MS"); !stall.empty()) {
    ArmStallHook(std::strtoll(stall.c_str(), nullptr, 10));
  }
  ArmSampleTimer();
  spdlog::info("trainq daemon pid {} serving {} (node {}, {} CPU slots, {})", SelfPid(),
               options_.paths.socket, node_, cpu_slots_, sampler_.Describe());
  StartCluster();
  mode_->ArmTimer();
  return Status::Ok();
}

namespace {

Result<int64_t> SocketGroup(const Config& config) {
  Result<int64_t> gid = LookupGroupId(config.socket_group);
  if (!gid.ok()) return Status::Invalid(fmt::format("socket_group: {}", gid.status().message()));
  return *gid;
}

}  // namespace

// A shared daemon's socket is everyone's (0666), or its group's (0660 with socket_group):
// who calls is what SO_PEERCRED says, never what the request claims.
Status DaemonImpl::OpenSocketToUsers() {
  const std::string& socket = options_.paths.socket;
  mode_t mode = 0666;
  if (!config_.socket_group.empty()) {
    Result<int64_t> gid = SocketGroup(config_);
    if (!gid.ok()) return gid.status();
    TRAINQ_RETURN_IF_ERROR(ChangeGroup(socket, *gid));
    mode = 0660;
  }
  TRAINQ_RETURN_IF_ERROR(ChangeMode(socket, mode));
  spdlog::info("shared: socket {} mode {:04o}{}; admins: root{}", socket, mode,
               config_.socket_group.empty() ? "" : ", group " + config_.socket_group,
               config_.admin_group.empty() ? "" : " and group " + config_.admin_group);
  return Status::Ok();
}

Status DaemonImpl::ListenTcp() {
  TRAINQ_RETURN_IF_ERROR(CheckListen(config_));
  if (!config_.tls_ca.empty()) TRAINQ_RETURN_IF_ERROR(CheckCaFile(config_.tls_ca, "tls_ca"));
  TlsFiles tls{config_.tls_cert, config_.tls_key};
  for (const std::string& entry : config_.listen) {
    Result<ListenAddress> at = ParseListenAddress(entry, "listen");
    if (!at.ok()) return at.status();
    Result<int> port = server_->ListenTcp(at->host, at->port, tls);
    if (!port.ok()) return port.status();
    spdlog::info("listening on tcp {} ({})", ListenAddress{at->host, *port}.Describe(),
                 tls.enabled() ? "tls" : "plaintext");
    // How the cluster's other nodes reach this one (a job's log, docs/cluster.md): the
    // first address, with node_address where it listens on every interface.
    if (&entry == &config_.listen.front()) {
      bool any = at->host == "0.0.0.0" || at->host == "::";
      mode_->SetApiUrl(fmt::format("{}://{}", tls.enabled() ? "https" : "http",
                                   ListenAddress{any ? address_ : at->host, *port}.Describe()));
    }
  }
  return Status::Ok();
}

void DaemonImpl::ArmStallHook(int64_t ms) {
  if (ms <= 0) return;
  stall_signal_.add(SIGUSR2);
  stall_signal_.async_wait([this, ms](const boost::system::error_code& ec, int) {
    if (ec) return;
    spdlog::warn("SIGUSR2: holding the event loop for {} ms (TRAINQ_TEST_STALL_MS)", ms);
    SetLoopActivity("a test's stall (TRAINQ_TEST_STALL_MS)");
    SleepMs(ms);
    SetLoopActivity("idle");
    ArmStallHook(ms);
  });
}

void DaemonImpl::RequestStop() {
  if (stopping_) return;
  stopping_ = true;
  // Running shims are in their own sessions: they outlive the daemon, which re-adopts them.
  if (server_) {
    server_->Close();
    (void)RemoveFile(options_.paths.socket);
  }
  signals_.cancel();
  stall_signal_.cancel();
  sample_timer_.cancel();
  watch_->Stop();
  mode_->Stop();
  scheduler_->Stop();
  agent_->Stop();
  io_.stop();
}

void DaemonImpl::OnSampleTimer() {
  agent_->CheckStopping();
  // Only a sample that changed what the GPUs offer can change a placement decision.
  bool changed = SampleGpus();
  watch_->Sampled();
  // The leader places from what each node last reported: report a change at once.
  if (changed) mode_->Report();
  if (changed && scheduler_->waiting_jobs() > 0) RequestSchedule();
}

void DaemonImpl::ArmSampleTimer() {
  sample_timer_.expires_after(std::chrono::milliseconds(config_.sample_interval_ms));
  sample_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    OnSampleTimer();
    ArmSampleTimer();
  });
}

bool DaemonImpl::SampleGpus() {
  GpuSampler::Outcome sampled = sampler_.Sample();
  if (sampled.fresh) agent_->AttributeUsage();
  return sampled.changed;
}

namespace {

Result<Config> LoadDaemonConfig(const StatePaths& paths) {
  Result<Config> config = LoadConfig(paths.config);
  if (!config.ok()) return config;
  std::string fake = GetEnv("TRAINQ_FAKE_GPUS");
  if (!fake.empty()) {
    config->fake_gpus = fake;
    config->from_outside["fake_gpus"] = "environment (TRAINQ_FAKE_GPUS)";
  }
  if (!config->fake_gpus.empty() && config->fake_gpus[0] != '/') {
    config->fake_gpus = CurrentDirectory() + "/" + config->fake_gpus;
  }
  for (const std::string& p : DefaultOomPatterns()) config->oom_patterns.push_back(p);
  return config;
}

// The highest job id among the run dirs (runs/<id>/...), 0 when there are none.
JobId HighestRunDir(const std::string& runs) {
  JobId highest = 0;
  Result<std::vector<std::string>> names = ListEntries(runs);
  if (!names.ok()) return 0;
  for (const std::string& name : *names) {
    JobId id = 0;
    auto [ptr, err] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (err == std::errc() && ptr == name.data() + name.size()) highest = std::max(highest, id);
  }
  return highest;
}

// A queue whose database is gone but whose jobs left run dirs: starting afresh would hand
// out ids from 1 again and mix new jobs' logs into old ones'.
Status CheckDatabaseNotLost(const StatePaths& paths) {
  if (FileExists(paths.db)) return Status::Ok();
  JobId highest = HighestRunDir(paths.runs);
  if (highest == 0) return Status::Ok();
  return Status::Io(fmt::format(
      "{} is missing, but {} holds the run dirs of jobs up to {}: the queue's database was "
      "lost or moved. Restore it from a backup ('trainq daemon backup PATH' makes one; copy it "
      "to {}), or, to start a new empty queue, move the old run dirs away first (mv {} {}.old)",
      paths.db, paths.runs, highest, paths.db, paths.runs, paths.runs));
}

int Fail(const Status& st) {
  spdlog::error("{}", st.message());
  return ExitCodeFor(st.code());
}

}  // namespace

namespace {

// The mode (personal or shared) and the socket, from the flags and the config: kPermission
// for a shared daemon not run as root, kInvalid for a socket path that cannot be one.
Status ResolveMode(DaemonOptions& options, Config& config) {
  if (options.shared && !config.shared) config.from_outside["shared"] = "command line (--shared)";
  options.shared = options.shared || config.shared;
  config.shared = options.shared;
  if (!options.socket.empty()) {
    config.socket = options.socket;
    config.from_outside["socket"] = "command line (--socket)";
  }
  if (options.shared && EffectiveUid() != 0) {
    return Status::Permission(
        "shared: a shared daemon must run as root: it starts each job as the user who "
        "submitted it (install the systemd unit, docs/operations.md)");
  }
  std::string socket = !options.socket.empty() ? options.socket : config.socket;
  if (socket.empty() && options.shared) socket = kSharedSocket;
  if (socket.empty()) return Status::Ok();  // the state dir's
  if (socket[0] != '/' || socket.size() > MaxSocketPathLength() || socket.back() == '/') {
    return Status::Invalid(fmt::format(
        "socket: '{}' is not a socket path; expected an absolute path of at most {} bytes", socket,
        MaxSocketPathLength()));
  }
  options.paths = WithSocket(options.paths, socket);
  return Status::Ok();
}

}  // namespace

namespace {

// A password file's text without its line end; kInvalid naming `option` when it cannot be
// read or holds nothing.
Result<std::string> ReadPasswordFile(const std::string& path, std::string_view option) {
  Result<std::string> password = ReadFileTail(path, 4096);
  if (!password.ok()) {
    return Status::Invalid(fmt::format("{}: {}", option, password.status().message()));
  }
  std::string pw = std::move(*password);
  while (!pw.empty() && (pw.back() == '\n' || pw.back() == '\r')) pw.pop_back();
  if (pw.empty()) return Status::Invalid(fmt::format("{}: {} holds no password", option, path));
  return pw;
}

// The cluster's Redis as `store`, `redis_prefix`, the password files and
// store_min_replicas_acked name it; the files are read here, so --check-config finds a
// missing or empty one too.
Result<RedisTarget> StoreTarget(const Config& config) {
  Result<RedisTarget> target = ParseRedisUrl(config.store);
  if (!target.ok()) return target.status();
  target->prefix = config.redis_prefix;
  target->min_replicas_acked = MinReplicasAcked(config);
  if (!config.store_sentinel_password_file.empty()) {
    Result<std::string> pw =
        ReadPasswordFile(config.store_sentinel_password_file, "store_sentinel_password_file");
    if (!pw.ok()) return pw.status();
    target->sentinel_password = std::move(*pw);
  }
  if (config.store_password_file.empty()) return target;
  Result<std::string> pw = ReadPasswordFile(config.store_password_file, "store_password_file");
  if (!pw.ok()) return pw.status();
  target->password = std::move(*pw);
  return target;
}

// The cluster key (docs/cluster.md, "The cluster key"): cluster_key_file, else the state
// dir's cluster.key.
Result<ClusterKey> LoadClusterKey(const Config& config, const StatePaths& paths) {
  std::string path =
      config.cluster_key_file.empty() ? paths.state_dir + "/cluster.key" : config.cluster_key_file;
  return ClusterKey::Load(path, "cluster_key_file");
}

}  // namespace

int CheckDaemonConfig(const DaemonOptions& given) {
  DaemonOptions options = given;
  const StatePaths& paths = options.paths;
  Result<Config> config = LoadDaemonConfig(paths);
  Status st = config.status();
  if (st.ok()) st = ResolveMode(options, *config);
  if (st.ok() && config->shared && !config->socket_group.empty()) {
    st = SocketGroup(*config).status();
  }
  // The state dir, settings.json and a lost or damaged database too: each stops the daemon,
  // and the client that asks before it starts one should say so at once. The state dir
  // first: nothing is read through a link planted there.
  if (st.ok()) st = CheckListen(*config);
  if (st.ok() && !config->tls_cert.empty()) {
    st = CheckTlsFiles({config->tls_cert, config->tls_key});
  }
  if (st.ok() && !config->tls_ca.empty()) st = CheckCaFile(config->tls_ca, "tls_ca");
  if (st.ok() && IsDirectory(paths.state_dir)) st = CheckStateDir(paths);
  if (st.ok()) st = ReadRuntimeSettings(paths.settings).status();
  if (st.ok()) st = CheckCluster(*config);
  if (st.ok() && !config->store.empty()) st = StoreTarget(*config).status();
  if (st.ok() && !config->store.empty()) st = LoadClusterKey(*config, paths).status();
  if (st.ok()) st = CheckWorkflow(*config);
  if (st.ok() && config->store.empty()) st = CheckDatabaseNotLost(paths);
  if (st.ok() && config->store.empty()) st = CheckSqliteFile(paths.db);
  if (!st.ok()) {
    std::fprintf(stderr, "trainqd: %s\n", st.message().c_str());
    return ExitCodeFor(st.code());
  }
  std::printf("%s: valid%s\n", paths.config.c_str(), config->shared ? " (shared)" : "");
  return 0;
}

namespace {

// Before anything is opened or created there: the state dir is ours and safe to write in,
// and so is the socket's directory.
Status SecureStateDir(const StatePaths& paths) {
  TRAINQ_RETURN_IF_ERROR(MakeDirs(paths.state_dir));
  TRAINQ_RETURN_IF_ERROR(CheckStateDir(paths));
  TRAINQ_RETURN_IF_ERROR(TightenStateFiles(StateFiles(paths)));
  TRAINQ_RETURN_IF_ERROR(MakeDirs(paths.runs));
  TRAINQ_RETURN_IF_ERROR(MakeDirs(paths.sessions));
  return Status::Ok();
}

// The socket's directory: the user's alone for a personal daemon; for a shared one, root's
// and open to all (0755). A shared state dir is 0711: users pass through it to the trees staged
// for their jobs (staged/, collected/, each job's own 0700 and the user's), and every other
// entry, jobs' environments among them, is root's alone.
Status SecureSocketDir(const DaemonOptions& options) {
  const StatePaths& paths = options.paths;
  if (!options.shared) {
    if (paths.socket_dir.empty()) return Status::Ok();
    return MakePrivateDir(paths.socket_dir);
  }
  TRAINQ_RETURN_IF_ERROR(
      CloseEntriesToOthers(paths.state_dir, {"staged", "collected", "sessions"}));
  TRAINQ_RETURN_IF_ERROR(ChangeMode(paths.state_dir, 0711));
  TRAINQ_RETURN_IF_ERROR(ChangeMode(paths.sessions, 0711));
  if (paths.socket_dir.empty()) {
    return Status::Invalid(
        "socket: a shared daemon's socket must be outside its state dir, which only root may "
        "enter; the default is " +
        std::string(kSharedSocket));
  }
  if (!IsDirectory(paths.socket_dir)) {
    TRAINQ_RETURN_IF_ERROR(MakeDirs(paths.socket_dir));
    TRAINQ_RETURN_IF_ERROR(ChangeMode(paths.socket_dir, 0755));
  }
  return JudgeStateDir(paths.socket_dir, StatFacts(paths.socket_dir), EffectiveUid());
}

// The store: a cluster's Redis when `store` names one, else the state dir's SQLite
// database.
Result<std::unique_ptr<Store>> OpenStore(const Config& config, const StatePaths& paths) {
  if (config.store.empty()) {
    TRAINQ_RETURN_IF_ERROR(CheckDatabaseNotLost(paths));
    return OpenSqliteStore(paths.db);
  }
  Result<RedisTarget> target = StoreTarget(config);
  if (!target.ok()) return target.status();
  Result<std::unique_ptr<ClusterStore>> redis = OpenRedisStore(*target);
  if (!redis.ok()) return redis.status();
  spdlog::info("store: redis {}:{} db {}, keys under '{}'", target->host, target->port, target->db,
               target->prefix);
  return std::unique_ptr<Store>(std::move(*redis));
}

}  // namespace

int RunDaemon(const DaemonOptions& given) {
  // _mt: the notifier's threads log too.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("trainq"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  std::signal(SIGPIPE, SIG_IGN);
  DaemonOptions options = given;
  options.job_umask = static_cast<int>(RestrictUmask());
  const StatePaths& paths = options.paths;
  if (Status st = SecureStateDir(paths); !st.ok()) return Fail(st);
  Result<UniqueFd> lock = LockFile(paths.lock);
  if (!lock.ok() && lock.status().code() != Code::kConflict) return Fail(lock.status());
  if (!lock.ok()) {
    return Fail(Status::Conflict("a trainq daemon already runs for " + paths.state_dir));
  }
  Result<Config> config = LoadDaemonConfig(paths);
  if (!config.ok()) return Fail(config.status());
  if (Status st = ResolveMode(options, *config); !st.ok()) return Fail(st);
  if (Status st = SecureSocketDir(options); !st.ok()) return Fail(st);
  if (Status st = CheckListen(*config); !st.ok()) return Fail(st);
  if (Status st = CheckCluster(*config); !st.ok()) return Fail(st);
  if (Status st = CheckWorkflow(*config); !st.ok()) return Fail(st);
  ClusterKey key;
  if (!config->store.empty()) {
    Result<ClusterKey> loaded = LoadClusterKey(*config, paths);
    if (!loaded.ok()) return Fail(loaded.status());
    key = std::move(*loaded);
  }
  Result<std::unique_ptr<Store>> store = OpenStore(*config, paths);
  if (!store.ok()) return Fail(store.status());
  Result<ProbeChoice> probe = ChooseGpuProbe(config->fake_gpus, config->nvml_library);
  if (!probe.ok()) return Fail(probe.status());
  if (!probe->note.empty()) spdlog::warn("{}", probe->note);
  // Each attempt's supervisor: trainq-shim, which starts in a fraction of what a trainqd
  // (SQLite, hiredis, OpenSSL, spdlog) takes (docs/benchmarks.md); a trainqd copied without
  // it still runs jobs, through its own `shim` command.
  Result<std::string> shim_program = CompanionProgram("trainq-shim");
  Result<std::string> self = SelfExecutable();
  if (!self.ok()) return Fail(self.status());
  ShimCommand shim = shim_program.ok() ? ShimCommand(*shim_program) : ShimCommand(*self, {"shim"});
  if (!shim_program.ok()) {
    spdlog::warn("{}: jobs start through `trainqd shim` instead, a few ms slower each",
                 shim_program.status().message());
  }
  // Shims write here until they open their job's log; without it, to /dev/null.
  Result<UniqueFd> log = OpenAppend(paths.log);
  int log_fd = log.ok() ? log->get() : -1;

  boost::asio::io_context io;
  SystemClock clock;
  CgroupHost cgroups = SetUpCgroups(kCgroupRoot);
  DaemonSeams seams{std::move(*store), std::move(*probe),
                    MakeShimLauncher(io, std::move(shim), log_fd, cgroups), &clock};
  seams.cgroups = std::move(cgroups);
  seams.cluster_key = std::move(key);
  seams.liveness_thread = true;
  // srun and scontrol for `trainq sbatch` jobs: links to trainq in slurm/ beside it (or in
  // lib/trainq/slurm/ installed). Without them such a job runs, and says srun is missing.
  Result<std::string> srun = CompanionProgram("slurm/srun");
  if (srun.ok()) {
    seams.slurm_bin_dir = srun->substr(0, srun->rfind('/'));
  } else {
    spdlog::warn("{}: `trainq sbatch` jobs have no srun or scontrol", srun.status().message());
  }
  DaemonImpl daemon(io, options, std::move(*config), std::move(seams));
  if (Status st = daemon.Start(); !st.ok()) return Fail(st);
  io.run();
  spdlog::info("daemon stopped");
  return 0;
}

}  // namespace trainq
