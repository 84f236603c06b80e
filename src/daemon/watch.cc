#include "src/daemon/watch.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/json_codec.h"
#include "src/core/version.h"
#include "src/core/wait_kind.h"
#include "src/daemon/json_response.h"
#include "src/os/permissions.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// What one follower may have unsent before its messages are dropped (it is told how many).
constexpr size_t kFollowerBytes = 256 * 1024;
constexpr int64_t kLookEveryMs = 1000;
constexpr int64_t kPokeDelayMs = 50;
constexpr int64_t kKeepAliveMs = 15000;
constexpr int64_t kHourMs = 3600 * 1000;
const std::vector<JobState> kLive = {JobState::kBlocked, JobState::kQueued, JobState::kStarting,
                                     JobState::kRunning};

bool IsLive(JobState s) { return std::find(kLive.begin(), kLive.end(), s) != kLive.end(); }

json Utilization(int pct) { return pct < 0 ? json(nullptr) : json(pct / 100.0); }

}  // namespace

Watch::Watch(Parts parts) : p_(std::move(parts)), look_timer_(*p_.io), keepalive_timer_(*p_.io) {}

Watch::~Watch() { Stop(); }

void Watch::Sampled() {
  const std::optional<GpuSnapshot>& snap = p_.sampler->snapshot();
  if (!snap) return;
  NodeState node = p_.this_node();
  if (node.gpus.size() != snap->gpus.size()) return;
  PolicyConfig policy = p_.policy();
  UnixMs now = p_.clock->Now();
  std::vector<GpuPoint> points;
  for (size_t i = 0; i < snap->gpus.size(); ++i) {
    points.push_back(PointOf(snap->gpus[i], node.gpus[i], policy, now));
  }
  UnixMs t = p_.sampler->sampled_at();
  if (!history_.Add(t, snap->gpus, std::move(points))) return;
  WriteJobMapping();
  if (followers_.empty()) return;
  json gpus = json::array();
  for (size_t i = 0; i < history_.gpus().size(); ++i) {
    const GpuPoint& g = history_.samples().back().gpus[i];
    gpus.push_back({{"index", history_.gpus()[i].index},
                    {"used", g.used},
                    {"reserved", g.reserved},
                    {"usable", g.usable},
                    {"utilization", Utilization(g.utilization)},
                    {"jobs", g.jobs}});
  }
  Publish("gpus", DumpJson({{"node", p_.node}, {"t", t}, {"gpus", std::move(gpus)}}));
}

// One file per GPU index holding the ids of the jobs on it, a line each, as dcgm-exporter's
// --hpc-job-mapping-dir reads them (its series then carry an hpc_job label); no file for an
// idle GPU. Written only when a GPU's jobs change, each atomically, readable by any user (a
// job's id is no secret: `trainq ls` shows it).
void Watch::WriteJobMapping() {
  const std::string& dir = p_.config->hpc_job_mapping_dir;
  if (dir != mapping_dir_) {
    mapped_.clear();
    mapping_dir_ = dir;
    if (!dir.empty()) {
      if (Status st = MakeDirs(dir); !st.ok()) {
        spdlog::warn("hpc_job_mapping_dir: {}", st.message());
      }
      (void)ChangeMode(dir, 0755);
    }
  }
  if (dir.empty() || history_.samples().empty()) return;
  const GpuSample& last = history_.samples().back();
  for (size_t i = 0; i < last.gpus.size(); ++i) {
    int index = history_.gpus()[i].index;
    std::string text;
    for (JobId id : last.gpus[i].jobs) text += std::to_string(id) + "\n";
    auto it = mapped_.find(index);
    if (it != mapped_.end() && it->second == text) continue;
    std::string path = dir + "/" + std::to_string(index);
    Status st = text.empty() ? RemoveFile(path) : WriteFileAtomic(path, text, Durability::kNoSync);
    if (st.ok() && !text.empty()) st = ChangeMode(path, 0644);
    if (!st.ok()) {
      spdlog::warn("hpc_job_mapping_dir: {}", st.message());
      continue;
    }
    mapped_[index] = text;
  }
}

void Watch::Ended(const Job& job) {
  std::string state(StateName(job.state));
  ++counters_.finished[state];
  ++counters_.finished_by_user[{job.spec.user, state}];
}

void Watch::Poke() {
  if (!followers_.empty()) ArmLook(kPokeDelayMs);
}

void Watch::Stop() {
  stopping_ = true;
  look_timer_.cancel();
  keepalive_timer_.cancel();
  for (Follower& f : followers_) f.body->End();
  followers_.clear();
}

void Watch::ArmLook(int64_t after_ms) {
  if (stopping_) return;
  int64_t at = MonotonicNs() / 1000000 + after_ms;
  if (look_armed_ && look_at_ms_ <= at) return;
  look_armed_ = true;
  look_at_ms_ = at;
  look_timer_.expires_after(std::chrono::milliseconds(after_ms));
  look_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // re-armed sooner, or stopped
    look_armed_ = false;
    Look();
  });
}

void Watch::ArmKeepAlive() {
  if (stopping_) return;
  keepalive_timer_.expires_after(std::chrono::milliseconds(kKeepAliveMs));
  keepalive_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    KeepAlive();
    if (!followers_.empty()) ArmKeepAlive();
  });
}

void Watch::KeepAlive() {
  std::erase_if(followers_, [](Follower& f) {
    (void)f.body->Write(": keepalive\n\n");  // a full one is behind anyway: no matter
    return f.body->closed();
  });
}

void Watch::Publish(const std::string& type, const std::string& data) {
  std::string message = fmt::format("event: {}\ndata: {}\n\n", type, data);
  std::erase_if(followers_, [&](Follower& f) {
    if (f.body->closed()) return true;
    // A reader that missed messages hears how many before the next one it gets, so it knows
    // to read the state afresh (the dashboard refetches).
    if (f.dropped > 0 &&
        f.body->Write(fmt::format("event: dropped\ndata: {{\"dropped\": {}}}\n\n", f.dropped))) {
      f.dropped = 0;
    }
    if (f.dropped > 0 || !f.body->Write(message)) {
      ++f.dropped;
      ++counters_.events_dropped;
    }
    return false;
  });
}

// A step the job has since gone past (its submit, a start, told after it ended) carries what
// was true then: no attempt before the first start, no exit code or reason of a later end.
void Watch::TellJob(const Job& job, const char* kind, JobState state) {
  bool submitted = std::string_view(kind) == "submitted";
  bool as_now = state == job.state;
  const Attempt* a = submitted ? nullptr : job.current();
  json event = {{"kind", kind},
                {"id", job.id},
                {"name", job.spec.name},
                {"user", job.spec.user},
                {"state", StateName(state)},
                {"attempt", submitted ? 0 : job.attempt},
                {"reason", as_now ? job.reason : ""},
                {"node", a ? json(a->node) : json(nullptr)},
                {"gpus", a ? json(a->gpu_indices) : json::array()},
                {"exit_code", a && a->exit_code && as_now ? json(*a->exit_code) : json(nullptr)},
                {"at", p_.clock->Now()}};
  Publish("job", DumpJson(event));
}

void Watch::TellChanges(const Job& job, const Seen* seen) {
  bool done = IsDone(job.state);
  if (seen == nullptr) {
    TellJob(job, "submitted",
            job.state == JobState::kBlocked ? JobState::kBlocked : JobState::kQueued);
  }
  int before = seen ? seen->attempt : 0;
  bool started = job.attempt > before;
  if (started) {
    // An attempt that began and ended between two looks is told as it was: it ran.
    TellJob(job, "started", IsWaiting(job.state) || done ? JobState::kRunning : job.state);
  }
  if (done) return TellJob(job, "ended", job.state);
  bool told_state =
      started && (job.state == JobState::kStarting || job.state == JobState::kRunning);
  if (seen != nullptr && seen->state != job.state && !told_state) TellJob(job, "state", job.state);
}

Status Watch::Prime() {
  Result<JobId> last = p_.store->LastId();
  if (!last.ok()) return last.status();
  ListQuery q;
  q.states = kLive;
  q.with_env = false;
  q.placement_only = true;
  Result<std::vector<Job>> live = p_.store->List(q);
  if (!live.ok()) return live.status();
  active_.clear();
  for (const Job& j : *live) active_[j.id] = {j.state, j.attempt};
  last_id_ = *last;
  nodes_.clear();
  if (auto states = p_.node_states(); states.ok()) {
    for (auto& [name, state] : *states) nodes_[name] = state;
  }
  primed_ = true;
  return Status::Ok();
}

void Watch::Look() {
  if (followers_.empty() || stopping_) {
    primed_ = false;
    active_.clear();
    return;
  }
  ArmLook(kLookEveryMs);
  if (!primed_) {
    if (Status st = Prime(); !st.ok()) spdlog::warn("event stream: {}", st.message());
    return;
  }
  // The waiting and running jobs as placement reads them (a long queue costs little: no
  // command, environment or attempts); a job whose state or attempt moved is read whole.
  ListQuery live_q;
  live_q.states = kLive;
  live_q.with_env = false;
  live_q.placement_only = true;
  ListQuery fresh_q;
  fresh_q.after_id = last_id_;
  fresh_q.with_env = false;
  fresh_q.with_attempts = true;
  Result<std::vector<Job>> live = p_.store->List(live_q);
  Result<std::vector<Job>> fresh = live.ok() ? p_.store->List(fresh_q) : live.status();
  if (!fresh.ok()) {
    spdlog::warn("event stream: {}", fresh.status().message());
    return;
  }
  std::unordered_map<JobId, Seen> now;
  std::set<JobId> told;
  for (const Job& j : *fresh) {
    TellChanges(j, nullptr);
    told.insert(j.id);
    last_id_ = std::max(last_id_, j.id);
    if (IsLive(j.state)) now[j.id] = {j.state, j.attempt};
  }
  for (const Job& j : *live) {
    if (told.count(j.id)) continue;
    auto it = active_.find(j.id);
    if (it != active_.end() && it->second.state == j.state && it->second.attempt == j.attempt) {
      now[j.id] = it->second;
      continue;
    }
    Result<Job> whole = p_.store->Get(j.id);
    if (!whole.ok()) continue;  // forgotten meanwhile
    // As read now, which may be past what the listing said: told once.
    told.insert(j.id);
    if (IsLive(whole->state)) now[j.id] = {whole->state, whole->attempt};
    if (it != active_.end()) {
      TellChanges(*whole, &it->second);
      continue;
    }
    // Back from an end (a retry): a change of state, and a start if it started again.
    Seen ended{JobState::kFailed, IsWaiting(whole->state) ? whole->attempt : whole->attempt - 1};
    TellChanges(*whole, &ended);
  }
  for (const auto& [id, seen] : active_) {
    if (now.count(id) || told.count(id)) continue;
    Result<Job> job = p_.store->Get(id);
    if (job.ok() && IsDone(job->state)) TellChanges(*job, &seen);
  }
  active_ = std::move(now);
  LookNodes();
}

void Watch::LookNodes() {
  Result<std::vector<std::pair<std::string, std::string>>> states = p_.node_states();
  if (!states.ok()) return;
  for (auto& [name, state] : *states) {
    auto [it, added] = nodes_.try_emplace(name, state);
    if (!added && it->second == state) continue;
    it->second = state;
    Publish("node", DumpJson({{"name", name}, {"state", state}}));
  }
}

void Watch::Events(const HttpRequest& req, Responder& respond) {
  (void)req;
  auto body = std::make_shared<StreamBody>(kFollowerBytes);
  followers_.push_back({body, 0});
  if (followers_.size() == 1) {
    ArmKeepAlive();
    Look();  // the first follower: what is there now is the base the events change
  }
  respond({200,
           fmt::format("retry: 3000\n: trainq events from node {}\n\n", p_.node),
           "text/event-stream",
           {{"Cache-Control", "no-store"}, {"X-Accel-Buffering", "no"}},
           std::move(body)});
}

void Watch::History(const HttpRequest& req, Responder& respond) {
  UnixMs now = p_.clock->Now();
  UnixMs since = now - kHourMs;
  if (auto it = req.query.find("since"); it != req.query.end()) {
    const std::string& text = it->second;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), since);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      return respond(ErrorResponse(Status::Invalid(fmt::format(
          "since: '{}' is not a time; use Unix milliseconds, e.g. since={}", text, now - 60000))));
    }
  }
  json gpus = json::array();
  for (const GpuHistory::Gpu& g : history_.gpus()) {
    gpus.push_back(
        {{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}, {"memory_total", g.total}});
  }
  std::vector<const GpuSample*> samples = history_.Since(since);
  json t = json::array();
  for (const GpuSample* s : samples) t.push_back(s->t);
  json series = json::array();
  for (size_t i = 0; i < history_.gpus().size(); ++i) {
    json used = json::array(), reserved = json::array(), usable = json::array(),
         util = json::array(), jobs = json::array();
    for (const GpuSample* s : samples) {
      const GpuPoint& g = s->gpus[i];
      used.push_back(g.used);
      reserved.push_back(g.reserved);
      usable.push_back(g.usable);
      util.push_back(Utilization(g.utilization));
      jobs.push_back(g.jobs);
    }
    series.push_back({{"used", std::move(used)},
                      {"reserved", std::move(reserved)},
                      {"usable", std::move(usable)},
                      {"utilization", std::move(util)},
                      {"jobs", std::move(jobs)}});
  }
  respond(Json(200, {{"node", p_.node},
                     {"now", now},
                     {"interval_ms", std::max<int64_t>(p_.config->sample_interval_ms, 1000)},
                     {"gpus", std::move(gpus)},
                     {"t", std::move(t)},
                     {"series", std::move(series)}}));
}

void Watch::Metrics(const HttpRequest& req, Responder& respond) {
  (void)req;
  MetricsFacts f;
  f.version = kVersion;
  f.node = p_.node;
  f.hostname = HostName();
  const std::optional<GpuSnapshot>& snap = p_.sampler->snapshot();
  UnixMs now = p_.clock->Now();
  if (snap) {
    f.gpus_known = true;
    f.gpu_sample_age = static_cast<double>(now - p_.sampler->sampled_at()) / 1000.0;
    NodeState node = p_.this_node();
    PolicyConfig policy = p_.policy();
    for (size_t i = 0; i < snap->gpus.size() && i < node.gpus.size(); ++i) {
      const GpuInfo& info = snap->gpus[i];
      GpuPoint point = PointOf(info, node.gpus[i], policy, now);
      f.gpus.push_back({info.index, info.uuid, info.name, info.total_bytes, point.used,
                        point.reserved, point.usable, point.utilization,
                        std::vector<int64_t>(point.jobs.begin(), point.jobs.end())});
    }
  }
  for (JobState s : kLive) f.jobs[std::string(StateName(s))] = 0;
  ListQuery q;
  q.states = kLive;
  q.with_env = false;
  q.placement_only = true;
  Result<std::vector<Job>> live = p_.store->List(q);
  if (!live.ok()) return respond(ErrorResponse(live.status()));
  for (const Job& j : *live) {
    std::string state(StateName(j.state));
    ++f.jobs[state];
    if (IsWaiting(j.state)) ++f.waiting[std::string(WaitKind(j.state, j.reason))];
    if (p_.config->metrics_per_user) ++f.jobs_by_user[{j.spec.user, state}];
  }
  f.event_streams = static_cast<int64_t>(followers_.size());
  f.history_bytes = history_.Bytes();
  f.connections = p_.connections ? static_cast<int64_t>(p_.connections()) : 0;
  f.process = SelfProcessStats();
  respond({200, RenderMetrics(f, counters_, p_.config->metrics_per_user),
           "text/plain; version=0.0.4; charset=utf-8"});
}

}  // namespace trainq
