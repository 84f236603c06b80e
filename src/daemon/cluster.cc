// A cluster (cluster_mode.h, docs/cluster.md): nodes that share one Redis store. Nothing
// here runs where the store is SQLite.
#include <algorithm>
#include <charconv>
#include <csignal>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/duration.h"
#include "src/core/endpoint.h"
#include "src/core/spec.h"
#include "src/core/version.h"
#include "src/daemon/cluster_mode.h"
#include "src/daemon/json_response.h"
#include "src/daemon/node_view.h"
#include "src/os/crypto/token_crypto.h"
#include "src/os/fence.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {

namespace {

// The API URL of `node` from the store's records (below).
Result<Endpoint> PeerEndpoint(ClusterStore& store, const std::string& node, std::string_view what);

using json = nlohmann::json;

// How often the cluster timer runs: often enough to renew the lease well before it lapses
// and to beat on time, never a busy loop.
int64_t ClusterTickMs(const Config& c) {
  return std::max<int64_t>(50, std::min(c.heartbeat_interval_ms, c.leader_lease_ms / 3));
}

// The CAs a node verifies its peers by: tls_ca, else TRAINQ_CA in the daemon's environment
// (as before tls_ca), else the system's.
struct PeerCa {
  std::string file, name;
  explicit PeerCa(const Config& c)
      : file(c.tls_ca.empty() ? GetEnv("TRAINQ_CA") : c.tls_ca),
        name(!c.tls_ca.empty() ? "tls_ca"
             : file.empty()    ? "tls_ca in the node's config.toml"
                               : "TRAINQ_CA") {}
  void Apply(CallOptions& options) const {
    options.ca_file = file;
    options.ca_name = name;
  }
};

}  // namespace

ClusterMode::ClusterMode(Parts parts)
    : p_(std::move(parts)),
      store_(*p_.store),
      config_(*p_.config),
      leader_({p_.store, p_.clock, p_.config, p_.scheduler, p_.deps, p_.node, p_.job_ended},
              MakeQuorumTimes(config_.node_timeout_ms, config_.heartbeat_interval_ms,
                              ClusterTickMs(config_))),
      fence_file_(FenceFile(p_.options->paths)),
      timer_(*p_.io) {
  liveness_ = std::make_unique<Liveness>(LivenessParts());
}

Liveness::Parts ClusterMode::LivenessParts() {
  Liveness::Parts l;
  l.times = MakeQuorumTimes(config_.node_timeout_ms, config_.heartbeat_interval_ms,
                            ClusterTickMs(config_));
  l.heartbeat_interval_ms = config_.heartbeat_interval_ms;
  l.fence_after_ms = config_.node_timeout_ms / 2;
  l.stall_ms = std::max<int64_t>(2000, 5 * ClusterTickMs(config_));
  // The thread's own connection, made at its first use and kept by the thread's function.
  l.renew = [own = std::shared_ptr<ClusterStore>(store_.Another())](const NodeRecord& record) {
    return own->Heartbeat(record);
  };
  l.ask = [key = p_.key, clock = p_.clock, node = p_.node, ca = PeerCa(config_)](
              const Peer& peer, int64_t timeout_ms) -> Result<PeerView> {
    Result<Endpoint> at = ParseServerUrl(peer.api_url, "api_url");
    if (!at.ok()) return at.status();
    const std::string target = "/v1/cluster/store";
    CallOptions options;
    options.timeout_ms = static_cast<int>(timeout_ms);
    options.authorization = key->PeerAuthorization(node, clock->Now(), "GET", target);
    ca.Apply(options);
    Result<HttpResponse> answer = HttpCall(*at, "GET", target, "", options);
    if (!answer.ok()) return answer.status();
    json doc = json::parse(answer->body, nullptr, false);
    if (answer->status != 200 || !doc.is_object() || !doc["no_store_ms"].is_number_integer() ||
        !doc["nodes"].is_number_integer()) {
      return Status::Unavailable(
          fmt::format("node {}: no answer about the store (HTTP {})", peer.name, answer->status));
    }
    return PeerView{doc["no_store_ms"].get<int64_t>(), doc["nodes"].get<int>()};
  };
  l.stamp = [file = fence_file_](int64_t at) { return WriteFenceStamp(file, at); };
  l.now = [] { return BootClockMs(); };
  return l;
}

ClusterMode::~ClusterMode() = default;

Status ClusterMode::Check() const {
  if (p_.key->empty()) {
    return Status::Invalid("cluster_key_file: a cluster node needs the cluster key");
  }
  return Status::Ok();
}

void ClusterMode::Join() {
  ReadoptLost();
  std::weak_ptr<ClusterMode*> mode = self_;
  events_ = store_.Subscribe([io = p_.io, mode](const std::string& event) {
    // The subscription's thread: the loop owns all state. An event posted just before the
    // mode was destroyed (the daemon, not the loop, went away) finds it gone.
    boost::asio::post(*io, [mode, event] {
      std::shared_ptr<ClusterMode*> self = mode.lock();
      if (self && !(*self)->stopping_) (*self)->OnEvent(event);
    });
  });
  Beat();
  leader_.LeadOrFollow();
  OfferPeers();
  if (p_.liveness_thread) liveness_->Start();
  SyncAssigned();
}

void ClusterMode::ReadoptLost() {
  ListQuery query;
  query.states = {JobState::kQueued};
  query.with_attempts = true;
  query.with_env = false;
  Result<std::vector<Job>> queued = store_.List(query);
  if (!queued.ok()) {
    spdlog::error("recovery: {}", queued.status().message());
    return;
  }
  UnixMs now = p_.clock->Now();
  std::string lost = "node " + p_.node + " lost";
  for (const Job& job : *queued) {
    const Attempt* a = job.current();
    // Still waiting for this node's word (MarkNodeLost's not_before, lost_node_wait).
    if (a != nullptr && a->end_reason == lost && job.not_before > now) p_.agent->ReadoptLost(job);
  }
}

void ClusterMode::ArmTimer() {
  timer_.expires_after(std::chrono::milliseconds(ClusterTickMs(config_)));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    OnTimer();
    ArmTimer();
  });
}

void ClusterMode::Stop() {
  stopping_ = true;
  timer_.cancel();
  events_.reset();
  // Another node need not wait for the lease to lapse.
  leader_.Resign();
}

void ClusterMode::OnTimer() {
  SetLoopActivity("the cluster timer");
  liveness_->LoopAlive();
  if (p_.clock->Now() >= next_beat_) {
    Beat();
    // A missed event (a reconnect, a lost message) costs at most one heartbeat.
    SyncAssigned();
    AbandonLostHolders();
    CollectPending();
  }
  leader_.LeadOrFollow();
  OfferPeers();
  SetLoopActivity("idle");
}

void ClusterMode::OfferPeers() {
  // An empty read (the store away) keeps the last list: those are the nodes to ask.
  if (leader_.LastRecords().empty()) return;
  std::vector<Peer> peers;
  for (const NodeRecord& r : leader_.LastRecords()) {
    if (!r.lost && r.name != p_.node) peers.push_back({r.name, r.api_url});
  }
  liveness_->OfferPeers(std::move(peers));
}

Result<json> ClusterMode::Nodes() { return leader_.Nodes(); }

Result<json> ClusterMode::StoreSeen() {
  return json{
      {"node", p_.node}, {"no_store_ms", liveness_->NoStoreMs()}, {"nodes", liveness_->Nodes()}};
}

Result<std::vector<std::pair<std::string, std::string>>> ClusterMode::NodeStates() {
  Result<std::vector<NodeRecord>> nodes = store_.Nodes();
  if (!nodes.ok()) return nodes.status();
  std::vector<std::pair<std::string, std::string>> out;
  for (const NodeRecord& n : *nodes) out.emplace_back(n.name, NodeStateName(n));
  return out;
}

NodeRecord ClusterMode::OwnRecord() const {
  NodeRecord r;
  r.name = p_.node;
  r.address = p_.address;
  r.api_url = api_url_;
  r.runs_dir = p_.options->paths.runs;
  r.master_port_first = config_.master_port_first;
  r.master_port_last = config_.master_port_last;
  r.info = NodeInfo(p_.cpu_slots(), *p_.agent, *p_.sampler,
                    NodeLabels{p_.config->node_features, p_.config->gpu_type,
                               p_.images ? p_.images->Names() : std::vector<std::string>{}});
  r.version = kVersion;
  if (std::vector<std::string> held =
          p_.stager ? p_.stager->HeldManifests() : std::vector<std::string>{};
      !held.empty()) {
    json info = json::parse(r.info, nullptr, false);
    if (info.is_object()) {
      info["staged"] = held;  // what placement prefers this node for
      r.info = info.dump();
    }
  }
  if (std::map<JobId, std::string> staging =
          p_.stager ? p_.stager->AllProgress() : std::map<JobId, std::string>{};
      !staging.empty()) {
    // Each starting job's copy in progress, for `show` on any node.
    json info = json::parse(r.info, nullptr, false);
    if (info.is_object()) {
      for (const auto& [id, text] : staging) info["staging"][std::to_string(id)] = text;
      r.info = info.dump();
    }
  }
  return r;
}

void ClusterMode::Beat() {
  next_beat_ = p_.clock->Now() + config_.heartbeat_interval_ms;
  NodeRecord record = OwnRecord();
  liveness_->OfferRecord(record);
  // Read before the call: the stamp is never fresher than the heartbeat the store holds.
  int64_t sent_at = BootClockMs();
  Result<UnixMs> at = store_.Heartbeat(record);
  if (!at.ok()) {
    // Running jobs go on: the liveness thread tells an outage of the store (they run on)
    // from this node's partition (they stop themselves past half of node_timeout).
    if (!store_unreachable_) {
      spdlog::error("heartbeat: {}; retrying every {} ms", at.status().message(),
                    ClusterTickMs(config_));
    }
    store_unreachable_ = true;
    next_beat_ = p_.clock->Now() + ClusterTickMs(config_);
    return;
  }
  if (store_unreachable_) spdlog::info("heartbeat: the store is reachable again");
  store_unreachable_ = false;
  liveness_->LoopBeat(sent_at);
}

void ClusterMode::OnEvent(const std::string& event) {
  std::string kind = event.substr(0, event.find(' '));
  std::string rest = kind.size() < event.size() ? event.substr(kind.size() + 1) : "";
  std::string target = rest.substr(0, rest.find(' '));
  if (kind == "placed" || kind == "cancel") {
    if (target == p_.node) SyncAssigned();
    return;
  }
  if (kind == "reconnected") SyncAssigned();
  // An attempt that ended elsewhere (a gang's other part failed, its node was lost): stop
  // this node's part of it now, not at the next heartbeat.
  if (kind == "end" && p_.stager != nullptr) {
    JobId id = 0;
    std::from_chars(target.data(), target.data() + target.size(), id);
    CollectOutputs(id);
  }
  if (kind == "end" && !p_.agent->live().empty()) {
    JobId id = 0;
    std::from_chars(target.data(), target.data() + target.size(), id);
    if (p_.agent->live().count(id)) SyncAssigned();
  }
  if (leader_.Places()) {
    // A submit, an end or a node's change anywhere: the queue or the GPUs changed. The
    // waiting index follows job by job where the event names the jobs: a reload of the
    // whole queue per submit would make each submit cost as much as the queue is long.
    if (kind == "submit" || kind == "requeue") {
      if (rest.empty()) p_.scheduler->MarkStale();
      // Once the index is stale, the next pass reads the whole queue anyway.
      for (size_t at = 0; !p_.scheduler->stale() && at < rest.size();) {
        size_t space = rest.find(' ', at);
        std::string_view word(rest.data() + at,
                              (space == std::string::npos ? rest.size() : space) - at);
        at = space == std::string::npos ? rest.size() : space + 1;
        JobId id = 0;
        auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
        if (ec != std::errc() || ptr != word.data() + word.size()) {
          p_.scheduler->MarkStale();
          break;
        }
        p_.scheduler->NoteWaiting(id);
      }
    } else if (kind == "end") {
      // A waiting job cancelled, or an attempt ended: the job may be queued again (an OOM
      // retry, a lost node) or done.
      JobId id = 0;
      std::from_chars(target.data(), target.data() + target.size(), id);
      p_.scheduler->ForgetReason(id);
      p_.scheduler->NoteWaiting(id);
    } else if (kind != "node" && kind != "placed") {
      p_.scheduler->MarkStale();  // "leader", "reconnected": events may have been missed
    }
    p_.scheduler->RequestSchedule();
  }
}

AttemptEnd ClusterMode::CwdMissing(const Job& job, const Attempt& a, int rank) {
  return NotHere(job, a, rank,
                 fmt::format("cwd {} does not exist on node {}", job.spec.cwd, p_.node));
}

AttemptEnd ClusterMode::NotHere(const Job& job, const Attempt& a, int rank,
                                const std::string& reason) {
  AttemptEnd end;
  end.ended_at = p_.clock->Now();
  end.part = a.parts.empty() ? -1 : rank;
  end.parts = static_cast<int>(a.parts.size());
  end.exclude_node = p_.node;
  end.end_reason = reason;
  // Elsewhere if some node it may use is left; else it can run nowhere.
  std::vector<std::string> left;
  Result<std::vector<NodeRecord>> nodes = store_.Nodes();
  for (const NodeRecord& r : nodes.ok() ? *nodes : std::vector<NodeRecord>{}) {
    const JobSpec& s = job.spec;
    bool allowed =
        s.nodes_allowed.empty() ||
        std::find(s.nodes_allowed.begin(), s.nodes_allowed.end(), r.name) != s.nodes_allowed.end();
    bool excluded = std::find(s.nodes_excluded.begin(), s.nodes_excluded.end(), r.name) !=
                    s.nodes_excluded.end();
    if (!r.lost && allowed && !excluded && r.name != p_.node) left.push_back(r.name);
  }
  if (static_cast<int>(left.size()) >= job.spec.num_nodes) {
    end.job_state = JobState::kQueued;
    end.job_reason = end.end_reason + "; placed again without that node";
  } else {
    end.job_reason = end.end_reason + "; no other node it may use is left";
  }
  spdlog::warn("job {} attempt {}: {}", job.id, a.n, end.job_reason);
  return end;
}

// Starts this node's part `rank` of attempt `a`, placed here by the leader: only in this
// node's own run dir, and only where its cwd is; a part that cannot start ends the attempt.
void ClusterMode::StartPlaced(const Job& job, const Attempt& a, const AttemptPart& part, int rank) {
  Placement p;
  p.node = part.node;
  p.gpu_indices = part.gpu_indices;
  p.gpu_uuids = part.gpu_uuids;
  p.reserved_bytes = a.reserved_bytes;
  p.cpus = a.cpus;
  p.run_dir = part.run_dir;
  p.log_path = part.log_path;
  p.master_port = a.master_port;
  p.parts = a.parts;
  p.master_addr = a.master_addr;
  // The run dir is this node's to name: one the store names elsewhere (written there
  // by another hand) would have root create and write files wherever it says.
  std::string own = fmt::format("{}/{}/{}", p_.options->paths.runs, job.id, a.n);
  if (p.run_dir != own || p.log_path != LogPath(own)) {
    AttemptEnd end;
    end.ended_at = p_.clock->Now();
    end.end_reason = end.job_reason =
        fmt::format("node {} refused to run it: the store names its run dir {}, not {}", p_.node,
                    p.run_dir, own);
    end.part = a.parts.empty() ? -1 : rank;
    end.parts = static_cast<int>(a.parts.size());
    spdlog::error("job {} attempt {}: {}", job.id, a.n, end.end_reason);
    p_.agent->StoreEnd(job.id, a.n, end);
    return;
  }
  StagedPaths staged;
  bool shipped = p_.stager != nullptr && p_.stager->NeedsStaging(job);
  if (shipped && !Staged(job, a, rank, &staged)) return;
  // A job that ships no tree runs in its own cwd, here too.
  if (!IsDirectory(shipped && !staged.cwd.empty() ? staged.cwd : job.spec.cwd)) {
    // Code and data are on a shared filesystem (docs/cluster.md); this node lacks it.
    p_.agent->StoreEnd(job.id, a.n, CwdMissing(job, a, rank));
    return;
  }
  if (Status st = p_.agent->StartPart(job, a.n, p, rank, shipped ? &staged : nullptr); !st.ok()) {
    spdlog::error("job {} attempt {}: {}", job.id, a.n, st.message());
    AttemptEnd end;
    end.ended_at = p_.clock->Now();
    end.end_reason = fmt::format("node {} could not start it: {}", p_.node, st.message());
    end.job_reason = end.end_reason;
    end.part = a.parts.empty() ? -1 : rank;
    end.parts = static_cast<int>(a.parts.size());
    p_.agent->StoreEnd(job.id, a.n, end);
  }
}

// Jobs being staged from a node the leader judged lost wait no longer: nothing else holds
// what they ship.
void ClusterMode::AbandonLostHolders() {
  std::map<JobId, std::string> holders =
      p_.stager ? p_.stager->Holders() : std::map<JobId, std::string>{};
  if (holders.empty()) return;
  std::set<std::string> lost = LostNodes();
  for (const auto& [id, holder] : holders) {
    if (lost.count(holder)) p_.stager->Abandon(id, HolderLost(holder));
  }
}

std::set<std::string> ClusterMode::LostNodes() {
  std::set<std::string> lost;
  Result<std::vector<NodeRecord>> nodes = store_.Nodes();
  for (const NodeRecord& r : nodes.ok() ? *nodes : std::vector<NodeRecord>{}) {
    if (r.lost) lost.insert(r.name);
  }
  return lost;
}

std::string ClusterMode::HolderLost(const std::string& holder) {
  return fmt::format("node {}, where it was submitted and which alone holds what it ships, is lost",
                     holder);
}

// --collect: the node that stored a job copies back what each of its attempts that ran on
// another node left there (part 0's node, for a gang), once.
void ClusterMode::CollectOutputs(JobId id) {
  Result<Job> job = store_.Get(id);
  if (!job.ok() || job->spec.collect.empty() || job->spec.signed_by != p_.node) return;
  for (const Attempt& a : job->attempts) {
    if (!IsDone(a.state)) continue;
    const std::string& ran = a.parts.empty() ? a.node : a.parts[0].node;
    if (ran.empty() || ran == p_.node) continue;  // its files are here
    p_.stager->Collect(*job, a.n, PeerGetter(ran, fmt::format("what job {} left", id)));
  }
}

void ClusterMode::Stored(const std::vector<JobSpec>& specs, const std::vector<JobId>& ids) {
  if (p_.stager == nullptr) return;
  std::string dir = p_.options->paths.state_dir + "/collect-pending";
  for (size_t i = 0; i < specs.size() && i < ids.size(); ++i) {
    if (specs[i].collect.empty()) continue;
    if (Status st = MakeDirs(dir); st.ok()) {
      st = WriteFileAtomic(fmt::format("{}/{}", dir, ids[i]), "", Durability::kNoSync);
    }
  }
}

void ClusterMode::CollectPending() {
  if (p_.stager == nullptr) return;
  std::string dir = p_.options->paths.state_dir + "/collect-pending";
  Result<std::vector<std::string>> names = ListFiles(dir);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    JobId id = 0;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (ec != std::errc() || end != name.data() + name.size()) continue;
    Result<Job> job = store_.Get(id);
    if (!job.ok() && job.status().code() != Code::kNotFound) return;  // the store is away
    bool over = !job.ok() || IsDone(job->state);
    if (job.ok()) {
      CollectOutputs(id);
      for (const Attempt& a : job->attempts) {
        const std::string& ran = a.parts.empty() ? a.node : a.parts[0].node;
        bool back = ran.empty() || ran == p_.node || p_.stager->Collected(id, a.n);
        over = over && IsDone(a.state) && back;
      }
    }
    if (over) static_cast<void>(RemoveFile(dir + "/" + name));
  }
}

Stager::PeerGet ClusterMode::PeerGetter(const std::string& to, const std::string& what) {
  Result<Endpoint> peer = PeerEndpoint(store_, to, what);
  return [peer, key = p_.key, node = p_.node, clock = p_.clock,
          ca = PeerCa(config_)](const std::string& target) -> Result<std::string> {
    if (!peer.ok()) return peer.status();
    CallOptions options;
    options.timeout_ms = 15000;
    options.connect_timeout_ms = 5000;
    options.authorization = key->PeerAuthorization(node, clock->Now(), "GET", target);
    ca.Apply(options);
    Result<HttpResponse> answer = HttpCall(*peer, "GET", target, "", options);
    if (!answer.ok()) {
      // A certificate that does not verify, or a CA file that cannot be read, is the same at
      // every try: the staging ends at once, saying which.
      Code code = answer.status().code();
      if (code == Code::kPermission || code == Code::kInvalid) return answer.status();
      // A GET may be sent again: a broken exchange is as good as no answer.
      return Status::Unavailable(answer.status().message());
    }
    if (answer->status == 200) return std::move(answer->body);
    json doc = json::parse(answer->body, nullptr, false);
    std::string why = doc.is_object() && doc.contains("error") && doc["error"].is_string()
                          ? doc["error"].get<std::string>()
                          : fmt::format("HTTP {}", answer->status);
    return Status::Conflict(why);
  };
}

bool ClusterMode::Staged(const Job& job, const Attempt& a, int rank, StagedPaths* staged) {
  const std::string& holder = job.spec.signed_by;
  Stager::PeerGet get = PeerGetter(holder, fmt::format("what job {} ships", job.id));
  auto wake = [self = std::weak_ptr<ClusterMode*>(self_)] {
    if (auto mode = self.lock()) (*mode)->SyncAssigned();
  };
  std::string failure;
  switch (p_.stager->Stage(job, std::move(get), std::move(wake), staged, &failure)) {
    case Stager::State::kReady:
      return true;
    case Stager::State::kStaging:
      return false;
    case Stager::State::kFailed: {
      AttemptEnd end = NotHere(job, a, rank,
                               fmt::format("node {} could not fetch what it ships from node {}: {}",
                                           p_.node, holder, failure));
      if (LostNodes().count(holder)) {
        // No node can fetch it now: the job fails rather than run on a partial tree.
        end.end_reason = end.job_reason = HolderLost(holder);
        end.job_state = JobState::kFailed;
      }
      p_.agent->StoreEnd(job.id, a.n, end);
      return false;
    }
  }
  return false;
}

std::string ClusterMode::StartingReason(const Job& job) const {
  const Attempt* a = job.current();
  if (a == nullptr || p_.stager == nullptr || job.spec.transfers.empty()) return "";
  if (a->node == p_.node) return p_.stager->Progress(job.id);
  Result<std::vector<NodeRecord>> nodes = store_.Nodes();
  for (const NodeRecord& r : nodes.ok() ? *nodes : std::vector<NodeRecord>{}) {
    if (r.name != a->node) continue;
    json info = json::parse(r.info, nullptr, false);
    std::string id = std::to_string(job.id);
    if (info.is_object() && info.contains("staging") && info["staging"].is_object() &&
        info["staging"].contains(id) && info["staging"][id].is_string()) {
      return info["staging"][id].get<std::string>();
    }
  }
  return "";
}

void ClusterMode::SyncAssigned() {
  Result<std::vector<Job>> mine = store_.ActiveOn(p_.node);
  if (!mine.ok()) return;  // Beat() says the store is away
  std::set<JobId> assigned;
  for (const Job& job : *mine) {
    const Attempt* a = job.current();
    int rank = 0;
    std::optional<AttemptPart> part = a ? a->PartOn(p_.node, &rank) : std::nullopt;
    if (!part) continue;
    assigned.insert(job.id);
    auto it = p_.agent->live().find(job.id);
    // An end this node holds but could not record yet (the store was away): the attempt ran
    // and is over here, whatever the store still says of it.
    if (const UnrecordedEnd* u = p_.agent->UnrecordedEndOf(job.id); u != nullptr && u->n == a->n) {
      continue;
    }
    if (it == p_.agent->live().end() || it->second.n != a->n) {
      // Not started here yet: part 0 is `starting` with no pid until it runs; a gang's
      // other parts start while the attempt is starting or running, once each.
      bool started = a->parts.empty() ? (a->state != JobState::kStarting || a->pid != 0)
                                      : IsDirectory(part->run_dir);
      if (started) continue;
      StartPlaced(job, *a, *part, rank);
      continue;
    }
    const LiveAttempt& live = it->second;
    if (live.cancel_requested || live.stopping) continue;
    Result<std::optional<std::string>> asked = store_.CancelRequested(job.id, a->n);
    if (asked.ok() && asked->has_value()) {
      std::string message;
      if (Status st = p_.agent->Cancel(job.id, **asked, &message); !st.ok()) {
        spdlog::warn("job {}: {}", job.id, st.message());
      } else {
        spdlog::info("{} (cancel asked on another node)", message);
      }
      continue;
    }
    // A preemption the leader decided: this node's part stops after the job's warning.
    if (!live.stop_requested.empty()) continue;
    Result<std::string> stop = store_.StopRequested(job.id, a->n);
    if (!stop.ok() || stop->empty()) continue;
    json doc = json::parse(*stop, nullptr, false);
    ShimControl control;
    // "preempted", or "resized" for an elastic job; a record without a kind is a preemption.
    control.stop = doc.is_object() ? doc.value("kind", "preempted") : "preempted";
    if (control.stop != "resized") control.stop = "preempted";
    control.reason = doc.is_object() ? doc.value("reason", "preempted") : "preempted";
    control.stop_in_ms = doc.is_object() ? doc.value("stop_in_ms", int64_t{0}) : 0;
    std::string message;
    if (Status st = p_.agent->Control(job.id, control, &message); !st.ok()) {
      spdlog::warn("job {}: {}", job.id, st.message());
    } else {
      spdlog::info("{} (the leader's preemption)", message);
    }
  }
  // Attempts the store no longer places here: the leader judged this node lost while it
  // was away, and the job may already run elsewhere.
  p_.agent->StopAllBut(assigned);
  if (p_.stager != nullptr) {
    std::erase_if(*mine, [&](const Job& job) { return assigned.count(job.id) == 0; });
    p_.stager->Retain(*mine);
  }
}

Status ClusterMode::CancelElsewhere(const Job& job, const std::string& by, std::string* message) {
  const Attempt* current = job.current();
  if (current == nullptr) {
    return Status::Conflict(fmt::format("job {} is not running on this node", job.id));
  }
  // Its node stops it: it watches for the flag (an event, or its next heartbeat). That may
  // be this node, when the leader placed it here and it has not started yet.
  TRAINQ_RETURN_IF_ERROR(store_.RequestCancel(job.id, job.attempt, by));
  *message = fmt::format("job {}: asked node {} to stop it (SIGTERM, then SIGKILL after {})",
                         job.id, current->node, FormatDuration(config_.grace_ms));
  return Status::Ok();
}

}  // namespace trainq

namespace trainq {

namespace {}  // namespace

void ClusterMode::Limits(SpecLimits& limits) {
  Result<std::vector<NodeRecord>> nodes = store_.Nodes();
  if (!nodes.ok()) return;  // judged by this node's own GPUs, as set by the caller
  limits.max_nodes = 0;
  limits.offers.clear();
  for (const NodeRecord& r : *nodes) {
    if (r.lost) continue;
    ++limits.max_nodes;
    json info = json::parse(r.info, nullptr, false);
    if (!info.is_object()) continue;
    limits.max_cpu_slots = std::max(limits.max_cpu_slots, info.value("cpu_slots", 0));
    if (!info.contains("gpus") || !info["gpus"].is_array()) continue;
    limits.max_gpus_per_node =
        std::max(limits.max_gpus_per_node, static_cast<int>(info["gpus"].size()));
    NodeOffer& offer = limits.offers.emplace_back();
    offer.name = r.name;
    offer.features = StringsOf(info, "features");
    for (const json& g : info["gpus"]) {
      limits.largest_gpu_bytes = std::max(limits.largest_gpu_bytes, g.value("total", uint64_t{0}));
      offer.gpus.emplace_back(TextOf(g, "name"), TextOf(g, "label"));
    }
  }
}

// Nothing new is placed on a drained node; what runs there runs on.
Status ClusterMode::Drain(const std::string& name, bool drain) {
  TRAINQ_RETURN_IF_ERROR(store_.SetDrained(name, drain));
  spdlog::info("node {} {}", name, drain ? "drained" : "resumed");
  (void)store_.Publish("node " + name);
  return Status::Ok();
}

// A node gone for good leaves the listing: only once it is lost (a node whose daemon still
// beats would come back at its next heartbeat) and none of its attempts is active.
Status ClusterMode::RemoveNode(const std::string& name) {
  TRAINQ_RETURN_IF_ERROR(store_.RemoveNode(name));
  spdlog::info("node {} removed", name);
  return Status::Ok();
}

}  // namespace trainq

namespace trainq {

// What another node holds (an attempt's log, its GPU history, a batch job's step) is asked of
// it with the path and query the route parsed, signed with the cluster key: the holder serves
// it as a node's request for that target and nothing else.
namespace {

// The API URL of `node` from the store's records; kUnavailable naming what to set when it
// serves none.
Result<Endpoint> PeerEndpoint(ClusterStore& store, const std::string& node, std::string_view what) {
  Result<std::vector<NodeRecord>> nodes = store.Nodes();
  if (!nodes.ok()) return nodes.status();
  auto found = std::find_if(nodes->begin(), nodes->end(),
                            [&](const NodeRecord& r) { return r.name == node; });
  if (found == nodes->end()) {
    return Status::NotFound(fmt::format("node: no node '{}' in the cluster (trainq nodes)", node));
  }
  if (!found->api_url.empty()) return ParseServerUrl(found->api_url, "api_url");
  return Status::Unavailable(
      fmt::format("{} is on node {}, which serves no API to the other nodes: set `listen` in its "
                  "config.toml (docs/cluster.md)",
                  what, node));
}

}  // namespace

Result<TunnelTarget> ClusterMode::PeerRequest(const std::string& node, const std::string& method,
                                              const std::string& path,
                                              const std::map<std::string, std::string>& query,
                                              std::string_view what) {
  Result<Endpoint> peer = PeerEndpoint(store_, node, what);
  if (!peer.ok()) return peer.status();
  TunnelTarget out;
  out.what = std::string(what);
  out.endpoint = *peer;
  out.target = CanonicalTarget(path, query);
  out.options.timeout_ms = 5000;
  out.options.authorization =
      p_.key->PeerAuthorization(p_.node, p_.clock->Now(), method, out.target);
  PeerCa(config_).Apply(out.options);
  return out;
}

Result<TunnelTarget> ClusterMode::NodeTunnel(const std::string& node, const std::string& path,
                                             const std::map<std::string, std::string>& query,
                                             const std::string& protocol, std::string_view what) {
  Result<TunnelTarget> out = PeerRequest(node, "GET", path, query, what);
  if (out.ok()) out->protocol = protocol;
  return out;
}

Result<HttpResponse> ClusterMode::AskNode(const std::string& node, const std::string& method,
                                          const std::string& path,
                                          const std::map<std::string, std::string>& query,
                                          const std::string& body, std::string_view what) {
  Result<TunnelTarget> peer = PeerRequest(node, method, path, query, what);
  if (!peer.ok()) return peer.status();
  Result<HttpResponse> answer = HttpCall(peer->endpoint, method, peer->target, body, peer->options);
  if (!answer.ok()) {
    return Status::Unavailable(fmt::format("{} is on node {}, which does not answer: {}", what,
                                           node, answer.status().message()));
  }
  return answer;
}

}  // namespace trainq
