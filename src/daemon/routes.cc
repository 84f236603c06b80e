// The HTTP API (docs/api.md), one table of routes. Bodies are JSON; errors are
// {"error": {"code", "message"}} with 400 for bad input, 404 for unknown jobs.
#include <malloc.h>
#include <map>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/core/acct.h"
#include "src/core/container.h"
#include "src/core/job_update.h"
#include "src/core/json_codec.h"
#include "src/core/placement.h"
#include "src/core/session_frames.h"
#include "src/core/spec.h"
#include "src/core/stop_spec.h"
#include "src/core/transfers.h"
#include "src/core/version.h"
#include "src/daemon/api.h"
#include "src/daemon/gpu_history.h"
#include "src/daemon/json_response.h"
#include "src/daemon/liveness.h"
#include "src/daemon/mode.h"
#include "src/daemon/node_view.h"
#include "src/daemon/routes.h"
#include "src/daemon/stager.h"
#include "src/daemon/step_routes.h"
#include "src/daemon/watch.h"
#include "src/daemon/web_assets.h"
#include "src/os/container_host.h"
#include "src/os/fd.h"
#include "src/os/run_dir.h"
#include "src/os/state_paths.h"
#include "src/os/system.h"
#include "src/os/user_file.h"
#include "src/os/users.h"

namespace trainq {

using json = nlohmann::json;

namespace {

CwdKind CwdKindOf(const std::string& path) {
  if (IsDirectory(path)) return CwdKind::kDirectory;
  return FileExists(path) ? CwdKind::kNotADirectory : CwdKind::kMissing;
}

size_t ArgMax() { return ArgumentSpaceBytes(); }

// An Idempotency-Key is an opaque token the client made (the CLI: 32 hex digits).
Status CheckSubmitKey(const std::string& key) {
  bool printable =
      std::all_of(key.begin(), key.end(), [](char ch) { return ch > ' ' && ch < 127; });
  if (key.size() <= 200 && printable) return Status::Ok();
  return Status::Invalid(
      "Idempotency-Key: expected 1 to 200 printable ASCII characters without spaces, e.g. a "
      "random UUID");
}

std::optional<JobId> ParseId(std::string_view text) {
  JobId id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || ptr != text.data() + text.size() || id <= 0) return std::nullopt;
  return id;
}

constexpr std::string_view kJobsPrefix = "/v1/jobs/";

// "/v1/jobs/12/cancel" -> (12, "cancel"); "/v1/jobs/12" -> (12, "").
std::optional<std::pair<std::string, std::string>> SplitJobPath(const std::string& path) {
  if (!path.starts_with(kJobsPrefix)) return std::nullopt;
  std::string rest = path.substr(kJobsPrefix.size());
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return std::make_pair(rest, std::string());
  return std::make_pair(rest.substr(0, slash), rest.substr(slash + 1));
}

// {"defaults": {...}, "jobs": [{...}, ...]}: each job is the defaults with its own keys on
// top, so a large batch carries the shared environment once.
Result<std::vector<JobSpec>> ParseBatch(const json& doc) {
  const json& defaults = doc["defaults"];
  const json& jobs = doc.contains("jobs") ? doc["jobs"] : json();
  if (!defaults.is_object() || !jobs.is_array() || jobs.empty() || doc.size() != 2) {
    return Status::Invalid(
        "a batch is {\"defaults\": {...}, \"jobs\": [{...}, ...]} and nothing else");
  }
  // The defaults' environment is read once and shared by every job that keeps it (EnvVars):
  // a million copies of it were most of what a million-job batch took.
  json base = defaults;
  base.erase("env");
  std::optional<EnvVars> shared_env;
  if (defaults.contains("env")) {
    Result<EnvVars> env = EnvFromJson(defaults["env"]);
    if (!env.ok()) return Status::Invalid(fmt::format("defaults: {}", env.status().message()));
    shared_env = std::move(*env);
  }
  std::vector<JobSpec> specs;
  specs.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].is_object())
      return Status::Invalid(fmt::format("jobs[{}]: expected an object", i));
    json merged = base;
    for (const auto& [key, value] : jobs[i].items()) merged[key] = value;
    Result<JobSpec> spec = SpecFromJson(merged);
    if (!spec.ok()) return Status::Invalid(fmt::format("jobs[{}]: {}", i, spec.status().message()));
    if (shared_env && !jobs[i].contains("env")) spec->env = *shared_env;
    specs.push_back(std::move(*spec));
  }
  return specs;
}

Result<std::vector<JobSpec>> ParseSubmitBody(const std::string& body) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded()) return Status::Invalid("request body is not valid JSON");
  if (!doc.is_object()) return Status::Invalid("request body must be a JSON object");
  std::vector<JobSpec> specs;
  if (doc.contains("defaults")) return ParseBatch(doc);
  if (!doc.contains("jobs")) {
    Result<JobSpec> spec = SpecFromJson(doc);
    if (!spec.ok()) return spec.status();
    specs.push_back(std::move(*spec));
    return specs;
  }
  const json& jobs = doc["jobs"];
  if (!jobs.is_array() || jobs.empty() || doc.size() != 1) {
    return Status::Invalid("jobs: expected a non-empty array of job objects and nothing else");
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    Result<JobSpec> spec = SpecFromJson(jobs[i]);
    if (!spec.ok()) return Status::Invalid(fmt::format("jobs[{}]: {}", i, spec.status().message()));
    specs.push_back(std::move(*spec));
  }
  return specs;
}

}  // namespace

// The run record a client made, with the GPU models of this node added (what the job's GPUs
// will be, on one machine).
std::string WithGpuModels(const GpuSampler& sampler, const std::string& record) {
  json doc = json::parse(record, nullptr, false);
  if (!doc.is_object() || !sampler.snapshot()) return record;
  std::set<std::string> models;
  for (const GpuInfo& g : sampler.snapshot()->gpus) models.insert(g.name);
  doc["gpu_models"] = models;
  return DumpJson(doc);
}

namespace {

// {"exit_code": int, "error": str}: how a gate's block ended (both optional).
Result<GateRelease> ParseRelease(const std::string& body) {
  json doc = body.empty() ? json::object() : json::parse(body, nullptr, false);
  GateRelease r;
  if (!doc.is_object())
    return Status::Invalid("release: expected {\"exit_code\": N, \"error\": TEXT}");
  for (const auto& [key, v] : doc.items()) {
    if (key == "exit_code" && v.is_number_integer() && v.get<int64_t>() >= 0 &&
        v.get<int64_t>() < 256) {
      r.exit_code = v.get<int>();
    } else if (key == "error" && v.is_string() && v.get_ref<const std::string&>().size() <= 65536) {
      r.error = v.get<std::string>();
    } else {
      return Status::Invalid(fmt::format(
          "release: {}: expected exit_code (0 to 255) and error (a string of at most 64 KiB)",
          key));
    }
  }
  return r;
}

// A gate (`trainq.gpu()`) is held by the process that asks: the caller on this machine's
// Unix socket, whose pid the kernel gave (SO_PEERCRED), never one the body names.
Status FillGate(const HttpRequest& req, JobSpec& spec) {
  if (spec.gate_pid != kGateCaller) return Status::Ok();
  if (req.tcp || req.peer_pid <= 0) {
    return Status::Invalid(
        "gate: only a process on the daemon's machine can hold GPUs for itself; call over the "
        "Unix socket");
  }
  // The pid was fixed when the connection was made; its process may have ended since and
  // the pid gone to another, root's shim say. Pinned by a pidfd, it must still be the
  // caller's own: a gate names only a process its user may signal.
  Result<PinnedProcess> pinned = PinProcess(req.peer_pid);
  if (!pinned.ok()) return Status::Invalid(fmt::format("gate: process {} is gone", req.peer_pid));
  if (pinned->uid != req.peer_uid) {
    return Status::Invalid(fmt::format(
        "gate: process {} is not the caller's (it runs as uid {}, the connection is uid {}): "
        "the process that connected has ended",
        req.peer_pid, pinned->uid, req.peer_uid));
  }
  spec.gate_pid = req.peer_pid;
  spec.gate_ticks = pinned->stat.start_ticks;
  return Status::Ok();
}

// The answer to a submit sent again: the ids stored the first time, and their group.
HttpResponse RepeatedSubmit(Store& store, const std::vector<JobId>& ids) {
  json reply = {{"ids", ids}, {"repeated", true}};
  Result<Job> first = store.Get(ids.front());
  if (first.ok() && first->spec.group > 0) reply["group"] = first->spec.group;
  return Json(200, reply);
}

// Dependencies must name jobs that exist; checked here rather than only in the store's
// transaction, so that one bad request cannot fail the others of its group commit.
Status CheckDepsExist(Store& store, const JobSpec& spec, std::set<JobId>& known) {
  auto check = [&](const std::vector<JobId>& ids, const char* option) -> Status {
    for (JobId id : ids) {
      if (known.count(id)) continue;
      Result<Job> dep = store.Get(id);
      if (dep.status().code() == Code::kNotFound) {
        return Status::Invalid(
            fmt::format("{}: no job {}; a job can only wait for jobs submitted "
                        "before it (see 'trainq ls --all')",
                        option, id));
      }
      if (!dep.ok()) return dep.status();
      known.insert(id);
    }
    return Status::Ok();
  };
  TRAINQ_RETURN_IF_ERROR(check(spec.after, "--after"));
  return check(spec.after_any, "--after-any");
}

std::vector<JobState> StatesFor(const HttpRequest& req, Status* error) {
  auto it = req.query.find("state");
  if (it != req.query.end() && !it->second.empty()) {
    std::vector<JobState> states;
    std::string_view rest = it->second;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view name = rest.substr(0, comma);
      std::optional<JobState> s = ParseState(name);
      if (!s) {
        *error = Status::Invalid(fmt::format(
            "state: '{}' is not a state; use queued, blocked, starting, running, succeeded, "
            "failed or cancelled",
            name));
        return {};
      }
      states.push_back(*s);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    return states;
  }
  if (req.query.count("all")) return {};
  return {JobState::kQueued, JobState::kBlocked, JobState::kStarting, JobState::kRunning};
}

json HoldJson(const Hold& h) {
  return {{"job", h.job}, {"node", h.node}, {"gpus", h.gpu_indices}, {"preempting", h.preempting}};
}

// An elastic job's resizes (docs/workflow.md, "Elastic jobs"), oldest first: each part an
// elastic gang grew by, and each attempt a resize ended.
json ResizesJson(const Job& job) {
  json out = json::array();
  for (const Attempt& a : job.attempts) {
    for (size_t r = 0; r < a.parts.size(); ++r) {
      if (a.parts[r].added_at == 0) continue;
      out.push_back({{"attempt", a.n},
                     {"at", FormatTime(a.parts[r].added_at)},
                     {"what", fmt::format("grew by part {} on {}, which joined its rendezvous", r,
                                          a.parts[r].node)}});
    }
    constexpr std::string_view kResized = "resized: ";
    if (!a.end_reason.starts_with(kResized)) continue;
    out.push_back({{"attempt", a.n},
                   {"at", a.ended_at ? json(FormatTime(*a.ended_at)) : json(nullptr)},
                   {"what", a.end_reason.substr(kResized.size())}});
  }
  return out;
}

// GET /v1/jobs/ID/explain: the numbers behind a waiting job's reason.
json ExplainJson(const Job& job, const Explanation& e, int64_t half_life_ms) {
  json doc = {{"job", job.id}, {"state", StateName(job.state)}, {"waiting", e.waiting}};
  if (IsElastic(job.spec)) doc["resizes"] = ResizesJson(job);
  if (!e.waiting) {
    doc["reason"] = job.reason;
    return doc;
  }
  json gpus = json::array();
  for (const GpuExplanation& g : e.gpus) {
    gpus.push_back({{"node", g.node},
                    {"index", g.index},
                    {"memory_usable", g.usable_bytes},
                    {"memory_total", g.total_bytes},
                    {"jobs", g.jobs},
                    {"other_processes", g.foreign_processes},
                    {"fits", g.fits},
                    {"closed", g.closed},
                    {"held_for", g.held_for == 0 ? json(nullptr) : json(g.held_for)}});
  }
  json holds = json::array();
  for (const Hold& h : e.holds) holds.push_back(HoldJson(h));
  doc.update(
      {{"would_start", e.would_start},
       {"reason", e.would_start ? std::string("fits now; starts on the next pass") : e.reason},
       {"position", e.position},
       {"ahead", e.ahead},
       {"fair_share",
        {{"user", e.user},
         {"gpu_hours", e.user_gpu_hours},
         {"rank", e.user_rank},
         {"users_waiting", e.users_waiting},
         {"half_life_ms", half_life_ms}}},
       {"gpus", std::move(gpus)},
       {"holds", std::move(holds)}});
  return doc;
}

}  // namespace

namespace {

// What follows a waiting job's cancel once the store has it (CancelWaiting or, for a
// request that cancels many, CancelWaitingMany): the queue, reasons, dependents, notice.
void CancelledWaiting(ApiParts& d, const Job& job, std::string* message) {
  d.scheduler->Left(job.id);
  *message = fmt::format("job {} cancelled (it was {})", job.id, StateName(job.state));
  d.deps->ResolveDependents(job.id);
  d.job_ended(job.id);
  d.scheduler->RequestSchedule();
}

// Cancels a job for the user `by`: one waiting here, or its attempt, here or on its node.
Status CancelOne(ApiParts& d, const Job& job, const std::string& by, std::string* message) {
  if (IsWaiting(job.state)) {
    TRAINQ_RETURN_IF_ERROR(d.store->CancelWaiting(job.id, "cancelled by " + by));
    CancelledWaiting(d, job, message);
    return Status::Ok();
  }
  if (IsDone(job.state)) {
    return Status::Conflict(
        fmt::format("job {} already ended ({}); nothing to cancel", job.id, StateName(job.state)));
  }
  bool live = d.agent->live().count(job.id) > 0;
  if (const UnrecordedEnd* u = d.agent->UnrecordedEndOf(job.id); !live && u != nullptr) {
    return Status::Conflict(fmt::format("job {} already ended ({}); recording its end waits: {}",
                                        job.id, u->end.end_reason, u->problem));
  }
  if (!live) return d.mode->CancelElsewhere(job, by, message);
  return d.agent->Cancel(job.id, by, message);
}

}  // namespace

struct RouteContext {
  ApiParts& d;
  HttpRequest& req;
  Responder& respond;
  const Caller& caller;      // who sent it (Authenticator::Authenticate)
  std::string_view segment;  // what the route's {id} or {name} matched
  const Job* job = nullptr;  // the job of a route with {id}, found before its handler runs
};

// The handlers, one per route: each calls the roles of ApiParts through their public
// methods.
// No handler judges its caller: Dispatch has judged the row's rule before it runs.
class Routes {
 public:
  // Judges the caller by `route`'s rule (a job's route against the job's owner), then runs it.
  static void Dispatch(RouteContext& c, const Route& route);
  static void NoRoute(RouteContext& c);

  static void Submit(RouteContext& c);
  static void ListJobs(RouteContext& c);
  static void Clean(RouteContext& c);
  static void Gpus(RouteContext& c);
  static void DaemonStatus(RouteContext& c);
  static void Stop(RouteContext& c);
  static void Backup(RouteContext& c);
  // POST /v1/jobs/cancel and /v1/jobs/retry: many jobs in one request, decided in one loop
  // turn, so no scheduling pass runs between them (a pass starts jobs that the rest of the
  // request would only cancel).
  static void CancelMany(RouteContext& c) { ActOnMany(c, "cancel"); }
  static void RetryMany(RouteContext& c) { ActOnMany(c, "retry"); }
  // /v1/jobs/{id}/...: c.job is the job.
  static void ShowJob(RouteContext& c) { c.respond(Json(200, Shown(c.d, *c.job, c.caller))); }
  static void Explain(RouteContext& c);
  static void Log(RouteContext& c);
  static void Session(RouteContext& c);
  static void Transfer(RouteContext& c);
  static void Outputs(RouteContext& c);
  static void CancelJob(RouteContext& c);
  static void RetryJob(RouteContext& c);
  static void RequeueJob(RouteContext& c);
  static void SignalJob(RouteContext& c);
  static void ReleaseJob(RouteContext& c);
  static void GetConfig(RouteContext& c) {
    c.respond({200, c.d.settings->Json(), "application/json"});
  }
  static void SetConfig(RouteContext& c);
  // ?node=NAME: another node's hour, asked of it (each node keeps its own).
  static void GpuHistory(RouteContext& c) {
    auto node = c.req.query.find("node");
    if (node == c.req.query.end() || node->second == c.d.node) {
      return c.d.watch->History(c.req, c.respond);
    }
    std::map<std::string, std::string> query = c.req.query;
    query.erase("node");
    Result<HttpResponse> answer =
        c.d.mode->AskNode(node->second, "GET", "/v1/gpus/history", query, "", "the GPU history");
    c.respond(answer.ok() ? std::move(*answer) : ErrorResponse(answer.status()));
  }
  static void Events(RouteContext& c) { c.d.watch->Events(c.req, c.respond); }
  static void Metrics(RouteContext& c) { c.d.watch->Metrics(c.req, c.respond); }
  static void CreateToken(RouteContext& c) { c.d.tokens->Create(c.req, c.caller, c.respond); }
  static void DashboardToken(RouteContext& c) {
    c.d.tokens->CreateForDashboard(c.caller, c.respond);
  }
  static void ListTokens(RouteContext& c) { c.d.tokens->List(c.respond); }
  static void RevokeToken(RouteContext& c) {
    c.d.tokens->Revoke(std::string(c.segment), c.caller, c.respond);
  }
  static void UpdateJob(RouteContext& c);
  static void Acct(RouteContext& c);
  static void AddStep(RouteContext& c) { c.d.steps->Add(c.req, c.caller, *c.job, c.respond); }
  static void ReadSteps(RouteContext& c) { c.d.steps->Read(c.req, c.caller, *c.job, c.respond); }
  static void FinishStep(RouteContext& c) { c.d.steps->Finish(c.req, c.caller, *c.job, c.respond); }
  static void CancelStep(RouteContext& c) { c.d.steps->Cancel(c.req, c.caller, *c.job, c.respond); }
  static void StepsDone(RouteContext& c) { c.d.steps->Done(c.req, c.caller, *c.job, c.respond); }
  static void Nodes(RouteContext& c) {
    Result<json> nodes = c.d.mode->Nodes();
    c.respond(nodes.ok() ? NodesJson(200, *nodes) : ErrorResponse(nodes.status()));
  }
  static void DrainNode(RouteContext& c) { Drain(c, true); }
  static void ResumeNode(RouteContext& c) { Drain(c, false); }
  static void RemoveNode(RouteContext& c);
  static void StoreSeen(RouteContext& c) {
    Result<json> seen = c.d.mode->StoreSeen();
    c.respond(seen.ok() ? Json(200, *seen) : ErrorResponse(seen.status()));
  }

 private:
  // A job as the API shows it: one whose end the state dir refused still reads `running`
  // from the store, so its reason says what ended and what the daemon waits for.
  static json Shown(const ApiParts& d, const Job& job, const Caller& caller) {
    json j = JobToJson(job);
    if (const std::string* live = LiveReason(d, job)) j["reason"] = *live;
    if (job.state == JobState::kStarting) {
      if (std::string staging = d.mode->StartingReason(job); !staging.empty()) {
        j["reason"] = staging;
      }
    }
    if (!OwnerOrAdmin(caller, job)) HideFromOthers(j);  // kJobFields says what
    const UnrecordedEnd* u = d.agent->UnrecordedEndOf(job.id);
    if (u != nullptr && u->n == job.attempt) {
      j["reason"] = fmt::format("attempt {} ended ({}); recording its end waits: {}", u->n,
                                u->end.end_reason, u->problem);
    }
    return j;
  }
  // A waiting job's reason as the last pass gave it: the store's may lag a long queue's.
  static const std::string* LiveReason(const ApiParts& d, const Job& job) {
    if (job.state != JobState::kQueued || d.scheduler == nullptr) return nullptr;
    return d.scheduler->LiveReason(job.id);
  }
  static Result<Job> FindJob(RouteContext& c, std::string_view id);
  static void Drain(RouteContext& c, bool drain);
  static void AnswerChange(RouteContext& c, const Status& st, const std::string& message);
  static Status Retry(RouteContext& c, const Job& job, std::string* message);
  static void ActOnMany(RouteContext& c, std::string_view verb);
  static void CancelWaitingTogether(RouteContext& c, std::vector<std::optional<Job>>& jobs,
                                    std::vector<json>& results);
  static json GpuJson(const ApiParts& d, const GpuInfo& info, const GpuState& state, UnixMs now);
};

namespace {

// What a submit or an update is judged against: this node, then what the mode adds (a
// cluster: every node), then the host limits.
SpecLimits SubmitLimits(const ApiParts& d) {
  SpecLimits limits{d.sampler->GpuCount(), d.cpu_slots(), d.sampler->LargestGpuBytes(), ArgMax(),
                    d.config->policy.headroom_bytes};
  limits.offers = {
      ThisOffer(d.node, *d.sampler, NodeLabels{d.config->node_features, d.config->gpu_type})};
  d.mode->Limits(limits);
  d.agent->HostSpecLimits(limits);
  return limits;
}

}  // namespace

namespace {

// Runs work off the loop and its answer on the loop, for as long as the loop's io_context
// lives: Asio shuts its services down (this one's `shutdown`, on the loop's thread) when it is
// destroyed, and after that no thread posts to it and no waiting answer runs.
class LoopGate : public boost::asio::execution_context::service {
 public:
  static inline boost::asio::execution_context::id id;
  explicit LoopGate(boost::asio::io_context& io)
      : service(io), shared_(std::make_shared<Shared>(io, this)) {}

  // `work` on a thread of its own, then `then` with its result on the loop. Loop only.
  template <class T>
  static void Run(boost::asio::io_context& io, std::function<T()> work,
                  std::function<void(T)> then) {
    LoopGate& gate = boost::asio::use_service<LoopGate>(io);
    auto slot = std::make_shared<std::optional<T>>();
    uint64_t n = ++gate.last_;
    gate.waiting_[n] = [slot, then = std::move(then)] { then(std::move(**slot)); };
    // The thread holds plain data only: what must die on the loop (a Responder) waits here.
    std::thread([shared = gate.shared_, n, slot, work = std::move(work)] {
      *slot = work();
      std::lock_guard lock(shared->mu);
      if (shared->closed) return;
      boost::asio::post(shared->io, [gate = shared->gate, n] { gate->Resume(n); });
    }).detach();
  }

 private:
  struct Shared {
    Shared(boost::asio::io_context& i, LoopGate* g) : io(i), gate(g) {}
    std::mutex mu;
    bool closed = false;  // under mu
    boost::asio::io_context& io;
    LoopGate* gate;
  };
  void Resume(uint64_t n) {
    auto it = waiting_.find(n);
    if (it == waiting_.end()) return;
    std::function<void()> next = std::move(it->second);
    waiting_.erase(it);
    next();
  }
  void shutdown() override {
    {
      std::lock_guard lock(shared_->mu);
      shared_->closed = true;
    }
    waiting_.clear();
  }
  std::shared_ptr<Shared> shared_;
  uint64_t last_ = 0;                                  // loop only
  std::map<uint64_t, std::function<void()>> waiting_;  // loop only
};

// What the checks of a submit's files need of the daemon, copied on the loop: they run on a
// thread of their own.
struct FileCheckSite {
  std::string user;
  bool shared = false;
  bool cluster = false;
  std::string container_runtime;  // the setting
};

// What one request's checks found: an array of 100,000 jobs names the same files in each.
struct FileMemo {
  std::map<std::string, Result<ImageArchive>> archives;
  std::map<std::string, Status> checked;  // by what was checked
};

// A --mount source: a directory or a regular file (a FIFO or device is never opened), which
// the caller may read (on a shared daemon, as the caller).
Status CheckMountSource(const std::string& src, const UserInfo* as) {
  if (as != nullptr) TRAINQ_RETURN_IF_ERROR(CheckMayRead(src, *as, "--mount"));
  Result<UniqueFd> fd = OpenUserFile(src, FileWant::kRegularOrDirectory, as);
  if (fd.ok()) return Status::Ok();
  if (fd.status().code() == Code::kNotFound) {
    return Status::Invalid(fmt::format("--mount: {} does not exist on this node", src));
  }
  return Status::Invalid(fmt::format(
      "--mount: {}; a mount's source is a directory or a regular file", fd.status().message()));
}

// An --image archive's names, read as OpenUserFile reads it (on a shared daemon, as the
// caller, after CheckMayRead names what is in the way).
Result<ImageArchive> ArchiveOf(const std::string& image, const UserInfo* as) {
  if (as != nullptr) TRAINQ_RETURN_IF_ERROR(CheckMayRead(image, *as, "--image"));
  return ReadImageArchive(image, as);
}

// What a container job needs of this node at submit (docs/containers.md): an archive the
// caller may read, mount sources that are directories or files, and a runtime (on one machine;
// a cluster's other nodes may have one). The files come first: refusing them needs no runtime.
// Fills what placement reads of an archive (its image names). A shared daemon runs a container
// job with rootless podman as its submitter (docs/containers.md, "On a shared server"): what
// the job mounts or loads, that user must be able to read (`as`), and docker (whose daemon
// runs containers as root) is refused.
Status CheckContainerHere(const FileCheckSite& site, const UserInfo* as, JobSpec& spec,
                          FileMemo& memo) {
  const std::string& image = spec.container.image;
  if (IsImageArchive(image)) {
    auto known = memo.archives.find(image);
    if (known == memo.archives.end())
      known = memo.archives.emplace(image, ArchiveOf(image, as)).first;
    if (!known->second.ok()) return known->second.status();
    spec.container.archive_names = known->second->names;  // placement's, not the user's
  }
  for (const std::string& text : spec.container.mounts) {
    Result<Mount> m = ParseMount(text, "--mount");
    if (!m.ok()) continue;  // ValidateSpec refused it
    auto known = memo.checked.find("--mount " + m->src);
    if (known == memo.checked.end()) {
      known = memo.checked.emplace("--mount " + m->src, CheckMountSource(m->src, as)).first;
    }
    TRAINQ_RETURN_IF_ERROR(known->second);
  }
  if (site.cluster) return Status::Ok();
  Result<ContainerRuntime> r = FindContainerRuntime(site.container_runtime);
  if (!r.ok()) return Status::Invalid("--image: " + r.status().message());
  if (site.shared && !r->podman) return Status::Invalid(kSharedNeedsPodman);
  if (!r->podman && IsImageArchive(image)) return Status::Invalid(ArchiveNeedsPodman(image));
  return Status::Ok();
}

// What a job ships (docs/cluster.md, "Code and data"): its sources and manifests are here, as
// the client made them; on a shared daemon, the submitter may read each (`as`; the daemon reads
// them for the other nodes).
Status CheckTransfersHere(const UserInfo* as, const JobSpec& spec, FileMemo& memo) {
  std::string key = "transfers " + TransfersToText(spec.transfers);
  if (auto known = memo.checked.find(key); known != memo.checked.end()) return known->second;
  Status st = Status::Ok();
  for (const Transfer& t : spec.transfers) {
    if (as == nullptr || !st.ok()) break;
    st = CheckMayRead(t.src, *as, t.kind == TransferKind::kStage ? "--stage" : "--snapshot");
  }
  if (st.ok()) st = Stager::CheckAtSubmit(spec, as);
  memo.checked.emplace(key, st);
  return st;
}

// Only a node of a cluster ships files; a node's request reaches only a cluster's daemon.
bool NamesFiles(const JobSpec& spec) { return spec.container.on() || !spec.transfers.empty(); }

// The checks of every file the jobs name (docs/architecture.md, "Paths users control"):
// archives, mount sources, what they ship. Opened as the caller on a shared daemon, never
// blocking; manifests of up to 256 MiB are read and hashed, so this runs off the loop.
Result<std::vector<JobSpec>> CheckFiles(const FileCheckSite& site, std::vector<JobSpec> specs) {
  Result<UserInfo> caller = site.shared ? LookupUserByName(site.user) : UserInfo{};
  if (!caller.ok()) return Status::Invalid(caller.status().message());
  const UserInfo* as = site.shared ? &*caller : nullptr;
  FileMemo memo;
  for (size_t i = 0; i < specs.size(); ++i) {
    JobSpec& spec = specs[i];
    Status st = Status::Ok();
    if (spec.container.on()) st = CheckContainerHere(site, as, spec, memo);
    if (st.ok() && !spec.transfers.empty()) st = CheckTransfersHere(as, spec, memo);
    if (st.ok()) continue;
    std::string where = specs.size() > 1 ? fmt::format("jobs[{}]: ", i) : "";
    // As a refused batch's: what its jobs took goes back to the system.
    bool large = specs.size() > 1000;
    specs = {};
    if (large) ::malloc_trim(0);
    return Status::Invalid(where + st.message());
  }
  return specs;
}

// CheckFiles, then `then` on the loop: at once when no job names a file, else from a thread.
void CheckFilesThen(ApiParts& d, const std::string& user, std::vector<JobSpec> specs,
                    std::function<void(Result<std::vector<JobSpec>>)> then) {
  FileCheckSite site{user, d.config->shared, d.mode->Cluster(), d.config->container_runtime};
  if (std::none_of(specs.begin(), specs.end(), NamesFiles)) return then(std::move(specs));
  if (d.io == nullptr) return then(CheckFiles(site, std::move(specs)));
  using Checked = Result<std::vector<JobSpec>>;
  LoopGate::Run<Checked>(
      *d.io,
      [site, specs = std::move(specs)]() mutable { return CheckFiles(site, std::move(specs)); },
      std::move(then));
}

}  // namespace

// POST /v1/nodes/NAME/drain and /resume (admins): nothing new is placed on a drained node;
// what runs there runs on.
void Routes::Drain(RouteContext& c, bool drain) {
  std::string name(c.segment);
  if (Status st = c.d.mode->Drain(name, drain); !st.ok()) return c.respond(ErrorResponse(st));
  c.respond(NodesJson(
      200, {{"message", drain ? fmt::format("node {} drained: no new job starts there; running "
                                            "ones run on",
                                            name)
                              : fmt::format("node {} resumed: jobs may start there again", name)},
            {"node", name},
            {"drained", drain}}));
}

// POST /v1/nodes/NAME/remove (admins): a node gone for good leaves the listing.
void Routes::RemoveNode(RouteContext& c) {
  std::string name(c.segment);
  if (Status st = c.d.mode->RemoveNode(name); !st.ok()) return c.respond(ErrorResponse(st));
  c.respond(NodesJson(
      200, {{"message", fmt::format("node {} removed; a daemon started there joins again", name)},
            {"node", name},
            {"removed", true}}));
}

// GET /v1/jobs/ID/transfer?i=N&manifest=1, or ?c=HASH,...&i=N: what job ID ships, for the node
// that runs it (a peer's signed request only).
void Routes::Transfer(RouteContext& c) {
  std::optional<size_t> index;
  bool manifest = false;
  std::string_view chunks;
  for (const auto& [key, value] : c.req.query) {
    size_t n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (key == "i" && ec == std::errc() && ptr == value.data() + value.size()) {
      index = n;
    } else if (key == "manifest" && value == "1") {
      manifest = true;
    } else if (key == "c" && !value.empty()) {
      chunks = value;
    } else {
      return c.respond(ErrorResponse(Status::Invalid(fmt::format(
          "{}: not accepted; expected i (a transfer's index) and manifest=1 or c=HASH,...", key))));
    }
  }
  if (!index || manifest == !chunks.empty()) {
    return c.respond(ErrorResponse(
        Status::Invalid("expected i (a transfer's index) and one of manifest=1 or c=HASH,...")));
  }
  auto answer = [respond = c.respond](Result<std::string> body) {
    if (!body.ok()) return respond(ErrorResponse(body.status()));
    respond({200, std::move(*body), "application/octet-stream"});
  };
  Shipping& shipping = c.d.mode->shipping();
  if (manifest) return answer(shipping.ServeManifest(*c.job, *index));
  shipping.ServeChunks(*c.job, *index, std::string(chunks), answer);
}

// GET /v1/jobs/ID/outputs?attempt=N&manifest=1, or ?attempt=N&c=HASH,...: what attempt N left
// on this node matching the job's --collect patterns, for the node that stored the job (a
// peer's signed request only).
void Routes::Outputs(RouteContext& c) {
  const Job& job = *c.job;
  int attempt = 0;
  bool manifest = false;
  std::string_view chunks;
  for (const auto& [key, value] : c.req.query) {
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (key == "attempt" && ec == std::errc() && ptr == value.data() + value.size() && n >= 1 &&
        n <= job.attempt) {
      attempt = static_cast<int>(n);
    } else if (key == "manifest" && value == "1") {
      manifest = true;
    } else if (key == "c" && !value.empty()) {
      chunks = value;
    } else {
      return c.respond(ErrorResponse(Status::Invalid(
          fmt::format("{}: not accepted; expected attempt (1 to {}) and manifest=1 or c=HASH,...",
                      key, job.attempt))));
    }
  }
  if (attempt == 0 || manifest == !chunks.empty()) {
    return c.respond(ErrorResponse(
        Status::Invalid("expected attempt (a number) and one of manifest=1 or c=HASH,...")));
  }
  auto answer = [respond = c.respond](Result<std::string> body) {
    if (!body.ok()) return respond(ErrorResponse(body.status()));
    respond({200, std::move(*body), "application/octet-stream"});
  };
  Shipping& shipping = c.d.mode->shipping();
  if (!manifest) return shipping.ServeOutputChunks(job.id, attempt, std::string(chunks), answer);
  std::optional<AttemptPart> part = job.attempts[attempt - 1].PartOn(c.d.node);
  if (!part) {
    return c.respond(ErrorResponse(Status::NotFound(
        fmt::format("job {} attempt {} did not run on node {}", job.id, attempt, c.d.node))));
  }
  Result<RunSpec> ran = ReadRunSpec(part->run_dir);
  if (!ran.ok()) return c.respond(ErrorResponse(ran.status()));
  shipping.ServeOutputs(job, attempt, ran->cwd, answer);
}

namespace {

// A submit's jobs, checked: stored (or joined to the same submit sent before).
void StoreSubmitted(ApiParts& d, const std::string& key, const std::string& user,
                    Result<std::vector<JobSpec>> specs, Responder respond) {
  if (!specs.ok()) return respond(ErrorResponse(specs.status()));
  if (!key.empty()) {
    if (Status st = CheckSubmitKey(key); !st.ok()) return respond(ErrorResponse(st));
    // Sent again after a lost answer: the ids already stored, or those about to be.
    Result<std::vector<JobId>> stored = d.store->IdsForSubmitKey(user, key);
    if (!stored.ok()) return respond(ErrorResponse(stored.status()));
    if (!stored->empty()) return respond(RepeatedSubmit(*d.store, *stored));
    if (d.submits->JoinPending(user, key, respond)) return;
    for (JobSpec& spec : *specs) spec.submit_key = key;
  }
  d.submits->Add(std::move(*specs), std::move(respond));
}

}  // namespace

void Routes::Submit(RouteContext& c) {
  Result<std::vector<JobSpec>> specs = ParseSubmitBody(c.req.body);
  if (!specs.ok()) return c.respond(ErrorResponse(specs.status()));
  // A request past the waiting-jobs cap on its own is refused before each job is checked
  // (the batch judges the rest with what the user keeps).
  if (Status st = c.d.submits->CheckAlone(*specs, c.caller.user); !st.ok()) {
    // The parsed jobs (hundreds of MiB for a 100,000-job array) go back to the system.
    *specs = {};
    ::malloc_trim(0);
    return c.respond(ErrorResponse(st));
  }
  SpecLimits limits = SubmitLimits(c.d);
  // Jobs belong to (and, on a shared server, run as) the caller: the socket's peer, or the
  // user a token was made for. Nothing in the body can say otherwise.
  const std::string& user = c.caller.user;
  std::set<JobId> known;  // dependencies already found to exist
  for (size_t i = 0; i < specs->size(); ++i) {
    JobSpec& spec = (*specs)[i];
    spec.user = user;
    if (spec.name.empty()) spec.name = DefaultJobName(spec.command);
    if (!spec.record.empty()) spec.record = WithGpuModels(*c.d.sampler, spec.record);
    if (spec.cwd.empty()) {  // as a login shell starts
      Result<UserInfo> who = LookupUserByName(user);
      spec.cwd = who.ok() && !who->home.empty() && who->home[0] == '/' ? who->home : "/";
    }
    Status st = FillGate(c.req, spec);
    // A gate's GPUs must be where its process is.
    if (st.ok() && spec.gate_pid > 0) c.d.mode->PinHere(spec);
    if (st.ok()) st = ToStatus(ValidateSpec(spec, limits, CwdKindOf(spec.cwd)));
    if (st.ok()) st = CheckDepsExist(*c.d.store, spec, known);
    // Admins too: the mail goes out through the daemon's sendmail with the job's output.
    if (st.ok() && !spec.mail.empty()) {
      st = CheckMailOwner(spec.mail, user, c.d.config->mail_domains);
    }
    if (st.ok() && !spec.mail.empty() && !IsExecutable(c.d.config->sendmail)) {
      st = Status::Invalid(fmt::format(
          "--mail: this machine has no {} to send mail with; install a mail transfer agent "
          "(postfix, msmtp-mta) or set the sendmail option, or use --notify URL",
          c.d.config->sendmail));
    }
    if (st.ok() && c.d.config->shared) {  // the job will run as the caller: may they enter cwd?
      Result<UserInfo> caller = LookupUserByName(user);  // the token's user too
      st = caller.ok() ? CheckMayEnter(spec.cwd, *caller, "cwd") : caller.status();
    }
    if (!st.ok()) {
      std::string where = specs->size() > 1 ? fmt::format("jobs[{}]: ", i) : "";
      // As a refused batch's: what its jobs took goes back to the system.
      bool large = specs->size() > 1000;
      *specs = {};
      if (large) ::malloc_trim(0);
      return c.respond(ErrorResponse(Status::Invalid(where + st.message())));
    }
  }
  // The files the jobs name are checked last, off the loop; a submit sent again meanwhile
  // finds this one stored or pending below, as both answers come back to the loop in turn.
  CheckFilesThen(c.d, user, std::move(*specs),
                 [&d = c.d, key = c.req.idempotency_key, user,
                  respond = std::move(c.respond)](Result<std::vector<JobSpec>> checked) mutable {
                   StoreSubmitted(d, key, user, std::move(checked), std::move(respond));
                 });
}

// `trainq update`, `hold`, `release`: checked as a submit is, stored, judged again.
void Routes::UpdateJob(RouteContext& c) {
  const Job& job = *c.job;
  Result<JobUpdate> u = ReadJobUpdate(job, c.req.body);
  if (!u.ok()) return c.respond(ErrorResponse(u.status()));
  if (!u->running) {
    SpecLimits limits = SubmitLimits(c.d);
    Status st = ToStatus(ValidateSpec(u->spec, limits, CwdKindOf(u->spec.cwd)));
    std::set<JobId> known;
    if (st.ok() && u->deps_changed) st = CheckDepsExist(*c.d.store, u->spec, known);
    if (!st.ok()) return c.respond(ErrorResponse(Status::Invalid(st.message())));
  }
  bool held = job.not_before >= kHeldNotBefore;
  bool hold = u->hold.value_or(held);
  UnixMs not_before = hold ? kHeldNotBefore : (held ? 0 : job.not_before);
  // Who held it is kept in its reason, which the passes write again (HeldBy).
  std::string reason = hold ? (held ? job.reason : HeldReason(job.id, c.caller.user))
                            : (held ? std::string() : job.reason);
  Status st = c.d.store->UpdateJob(job.id, u->spec, not_before, reason, u->running);
  if (!st.ok()) return c.respond(ErrorResponse(st));
  if (!u->running) {
    if (u->deps_changed) c.d.deps->Rejudge(job.id);
    c.d.scheduler->Requeued(job.id);  // its place and reason are read again
    c.d.scheduler->RequestSchedule();
  }
  std::string what = u->hold == std::optional<bool>(true)    ? "held"
                     : u->hold == std::optional<bool>(false) ? "released"
                                                             : "updated";
  spdlog::info("job {} {} by {}", job.id, what, c.caller.user);
  AnswerChange(c, Status::Ok(), fmt::format("job {} {}", job.id, what));
}

namespace {

constexpr std::string_view kCleanForm =
    "a JSON object like {\"older_than_ms\": 604800000, \"states\": [\"succeeded\"], "
    "\"keep_logs\": false, \"all_users\": false}";

struct CleanRequest {
  int64_t older_than_ms = 0;  // 0: however recent
  std::vector<JobState> states = {JobState::kSucceeded, JobState::kFailed, JobState::kCancelled};
  bool keep_logs = false;
  bool all_users = false;
};

Result<CleanRequest> ParseClean(const std::string& text) {
  json body = json::parse(text.empty() ? "{}" : text, nullptr, false);
  if (!body.is_object()) return Status::Invalid(fmt::format("expected {}", kCleanForm));
  CleanRequest r;
  for (const auto& [key, v] : body.items()) {
    if (key == "older_than_ms" && v.is_number_integer() && v.get<int64_t>() >= 0) {
      r.older_than_ms = v.get<int64_t>();
    } else if ((key == "keep_logs" || key == "all_users") && v.is_boolean()) {
      (key == "keep_logs" ? r.keep_logs : r.all_users) = v.get<bool>();
    } else if (key == "states" && v.is_array() && !v.empty()) {
      r.states.clear();
      for (const json& s : v) {
        std::optional<JobState> state =
            s.is_string() ? ParseState(s.get<std::string>()) : std::nullopt;
        if (!state || !IsDone(*state)) {
          return Status::Invalid(fmt::format(
              "states: {} is not a state a job ends in; use succeeded, failed or cancelled",
              s.dump()));
        }
        r.states.push_back(*state);
      }
    } else {
      return Status::Invalid(
          fmt::format("{}: {} is not accepted; expected {}", key, v.dump(), kCleanForm));
    }
  }
  return r;
}

// When the job ended: its last attempt's end, or when it last changed state (cancelled
// while it waited).
UnixMs EndedAt(const Job& job) {
  for (auto it = job.attempts.rbegin(); it != job.attempts.rend(); ++it) {
    if (it->ended_at) return *it->ended_at;
  }
  return std::max(job.queued_at, job.submitted_at);
}

}  // namespace

// `trainq acct`: each job's row (running and ended ones from the store, forgotten ones from
// what `clean` kept) and each user's totals.
void Routes::Acct(RouteContext& c) {
  std::string user = c.caller.user;
  UnixMs since = 0;
  for (const auto& [key, value] : c.req.query) {
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    bool number = ec == std::errc() && ptr == value.data() + value.size() && !value.empty();
    if (key == "user" && !value.empty() && value.find_first_of("&=/ ") == std::string::npos) {
      user = value;
    } else if (key == "all" && value == "1") {
      user = "";
    } else if (key == "since" && number && n >= 0) {
      since = n;
    } else {
      return c.respond(ErrorResponse(Status::Invalid(fmt::format(
          "{}: '{}' is not accepted; expected user (a user name), all (1) and since (Unix ms)", key,
          value.substr(0, 64)))));
    }
  }
  ListQuery q;
  q.states = {JobState::kStarting, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
              JobState::kCancelled};
  q.user = user;
  q.with_attempts = true;
  q.with_env = false;
  Result<std::vector<Job>> jobs = c.d.store->List(q);
  if (!jobs.ok()) return c.respond(ErrorResponse(jobs.status()));
  Result<std::vector<AcctRow>> rows = c.d.store->AcctRecords(user, since);
  if (!rows.ok()) return c.respond(ErrorResponse(rows.status()));
  UnixMs now = c.d.clock->Now();
  for (const Job& job : *jobs) {
    AcctRow row = AcctOf(job, now);
    if (IsDone(job.state) && row.ended_at < since) continue;
    rows->push_back(std::move(row));
  }
  std::sort(rows->begin(), rows->end(),
            [](const AcctRow& a, const AcctRow& b) { return a.id < b.id; });
  json out_jobs = json::array(), users = json::array();
  for (const AcctRow& row : *rows) out_jobs.push_back(AcctToJson(row));
  for (const auto& [name, t] : AcctTotals(*rows)) {
    users.push_back({{"user", name},
                     {"jobs", t.jobs},
                     {"succeeded", t.succeeded},
                     {"failed", t.failed},
                     {"cancelled", t.cancelled},
                     {"running", t.active},
                     {"gpu_hours", t.gpu_hours},
                     {"gpu_hours_used", t.gpu_hours_used},
                     {"elapsed_ms", t.elapsed_ms}});
  }
  c.respond(Json(200, {{"jobs", std::move(out_jobs)}, {"users", std::move(users)}}));
}

// `trainq clean`: forgets ended jobs, the caller's (every user's for an admin who asks),
// with their run dirs and logs unless keep_logs.
void Routes::Clean(RouteContext& c) {
  Result<CleanRequest> r = ParseClean(c.req.body);
  if (!r.ok()) return c.respond(ErrorResponse(r.status()));
  if (r->all_users) {
    Status st = MayActOn(c.caller, nullptr, "clean every user's jobs");
    if (!st.ok()) return c.respond(ErrorResponse(st));
  }
  ListQuery q;
  q.states = r->states;
  q.user = r->all_users ? "" : c.caller.user;
  q.with_attempts = true;
  q.with_env = false;
  Result<std::vector<Job>> jobs = c.d.store->List(q);
  if (!jobs.ok()) return c.respond(ErrorResponse(jobs.status()));
  UnixMs now = c.d.clock->Now();
  std::vector<JobId> ids;
  std::vector<AcctRow> rows;  // what `trainq acct` keeps of each
  for (const Job& job : *jobs) {
    if (r->older_than_ms == 0 || EndedAt(job) + r->older_than_ms <= now) {
      ids.push_back(job.id);
      rows.push_back(AcctOf(job, now));
    }
  }
  Result<std::vector<JobId>> gone = c.d.store->Forget(ids, rows);
  if (!gone.ok()) return c.respond(ErrorResponse(gone.status()));
  size_t logs = 0;
  if (!r->keep_logs) {
    for (JobId id : *gone) {
      Result<bool> removed = RemoveTreeSaying(c.d.options->paths.runs + "/" + std::to_string(id));
      if (removed.ok() && *removed) ++logs;
      if (!removed.ok()) spdlog::warn("clean: job {}: {}", id, removed.status().message());
    }
    // Its copies of what was shipped here, and of what came back from it before the copy into
    // its collect_to (shared --stage copies stay).
    std::set<JobId> forgotten(gone->begin(), gone->end());
    for (const Job& job : *jobs) {
      if (forgotten.count(job.id) != 0) c.d.mode->shipping().Forget(job);
    }
  }
  spdlog::info("{} cleaned {} job(s)", c.caller.user, gone->size());
  std::string message =
      fmt::format("forgot {} job{}{}", gone->size(), gone->size() == 1 ? "" : "s",
                  r->keep_logs ? " (their logs kept)" : fmt::format(" and the logs of {}", logs));
  c.respond(Json(200, {{"forgotten", gone->size()}, {"ids", *gone}, {"message", message}}));
}

// Checks the whole request, then persists, then applies: a refused or failed request
// changes nothing.
void Routes::SetConfig(RouteContext& c) {
  Result<std::string> changes = c.d.settings->Set(c.req.body, c.caller.user);
  if (!changes.ok()) return c.respond(ErrorResponse(changes.status()));
  c.d.settings_changed();
  c.d.scheduler->RequestSchedule();
  json out = json::parse(c.d.settings->Json());
  out["message"] = *changes;
  c.respond(Json(200, out));
}

void Routes::ListJobs(RouteContext& c) {
  for (const auto& [key, value] : c.req.query) {
    static const std::set<std::string> kKeys = {"state", "all",   "user", "mine",
                                                "limit", "after", "group"};
    bool flag = key == "all" || key == "mine";
    if (!kKeys.count(key) || (flag && !value.empty() && value != "1")) {
      return c.respond(ErrorResponse(Status::Invalid(fmt::format(
          "{}: not accepted; GET /v1/jobs takes state, all, user, mine, limit, after and group "
          "(all and mine with no value or 1)",
          key.substr(0, 64)))));
    }
  }
  Status error;
  ListQuery q;
  q.states = StatesFor(c.req, &error);
  if (!error.ok()) return c.respond(ErrorResponse(error));
  q.with_attempts = true;
  q.with_env = false;  // JobToJson leaves the environment out anyway
  if (auto it = c.req.query.find("user"); it != c.req.query.end()) {
    if (it->second.empty() || it->second.size() > 256) {
      return c.respond(ErrorResponse(Status::Invalid("user: expected a user name")));
    }
    q.user = it->second;
  }
  if (c.req.query.count("mine")) {
    if (!q.user.empty())
      return c.respond(ErrorResponse(Status::Invalid("user and mine: give one")));
    q.user = c.caller.user;
  }
  if (auto it = c.req.query.find("limit"); it != c.req.query.end()) {
    std::optional<JobId> n = ParseId(it->second);
    if (!n) return c.respond(ErrorResponse(Status::Invalid("limit: expected a positive integer")));
    q.limit = static_cast<int>(std::min<JobId>(*n, 1 << 30));
  }
  if (auto it = c.req.query.find("after"); it != c.req.query.end()) {
    std::optional<JobId> n = ParseId(it->second);
    if (!n) return c.respond(ErrorResponse(Status::Invalid("after: expected a job id")));
    q.after_id = *n;
  }
  if (auto it = c.req.query.find("group"); it != c.req.query.end()) {
    std::optional<JobId> n = ParseId(it->second);
    if (!n) {
      return c.respond(ErrorResponse(
          Status::Invalid("group: expected a group's id, the number 'submit' printed as group")));
    }
    q.group = *n;
  }
  Result<std::vector<Job>> jobs = c.d.store->List(q);
  if (!jobs.ok()) return c.respond(ErrorResponse(jobs.status()));
  json out = json::array();
  for (const Job& job : *jobs) out.push_back(Shown(c.d, job, c.caller));
  c.respond(Json(200, {{"jobs", std::move(out)}, {"cluster", c.d.mode->Cluster()}}));
}

json Routes::GpuJson(const ApiParts& d, const GpuInfo& info, const GpuState& state, UnixMs now) {
  PolicyConfig policy = d.scheduler->Policy();
  uint64_t reserved = ReservedUnused(state);
  json attempts = json::array();
  for (const Holding& h : state.holdings) {
    const LiveAttempt& live = d.agent->live().at(h.job);
    attempts.push_back({{"job", h.job},
                        {"attempt", live.n},
                        {"reserved_bytes", h.reserved_bytes},
                        {"used_bytes", h.used_now ? json(*h.used_now) : json(nullptr)},
                        {"exclusive", h.exclusive}});
  }
  json others = json::array();
  for (const GpuProcess& p : info.processes) {
    if (!d.agent->OwnsGpuProcess(p.pid))
      others.push_back({{"pid", p.pid}, {"used_bytes", p.used_bytes}});
  }
  auto listed = [&info](const std::vector<int>& list) {
    return std::find(list.begin(), list.end(), info.index) != list.end();
  };
  // Why no new job starts here, as `trainq gpus` marks it; null when they may.
  json closed = nullptr;
  bool stale = policy.stale_after_ms > 0 && state.sampled_at > 0 &&
               now - state.sampled_at > policy.stale_after_ms;
  if (stale) {
    closed = "stale";
  } else if (listed(policy.paused_gpus)) {
    closed = "paused";
  } else if (!policy.devices.empty() && !listed(policy.devices)) {
    closed = "not in devices";
  }
  return {{"index", info.index},
          {"uuid", info.uuid},
          {"closed", std::move(closed)},
          {"name", info.name},
          {"memory_total", info.total_bytes},
          {"memory_used", info.used_bytes},
          {"memory_free", info.free_bytes},
          {"memory_reserved", reserved},
          {"memory_usable", UsableBytes(state, policy, now)},
          {"utilization", info.utilization_pct < 0 ? json(nullptr) : json(info.utilization_pct)},
          {"processes_known", info.processes_known},
          {"attempts", std::move(attempts)},
          {"other_processes", std::move(others)}};
}

void Routes::Gpus(RouteContext& c) {
  json gpus = json::array();
  NodeState node = ThisNode(c.d.node, c.d.cpu_slots(), *c.d.agent, *c.d.sampler,
                            NodeLabels{c.d.config->node_features, c.d.config->gpu_type});
  UnixMs now = c.d.clock->Now();
  if (c.d.sampler->snapshot()) {
    for (size_t i = 0; i < c.d.sampler->snapshot()->gpus.size() && i < node.gpus.size(); ++i) {
      gpus.push_back(GpuJson(c.d, c.d.sampler->snapshot()->gpus[i], node.gpus[i], now));
    }
  }
  c.respond(Json(
      200,
      {{"node", c.d.node},
       {"source", c.d.sampler->snapshot() ? c.d.sampler->snapshot()->source : "none"},
       {"probe", c.d.sampler->Describe()},
       {"cpu_slots", node.cpu_slots},
       {"cpu_slots_used", node.cpu_slots_used},
       {"paused", c.d.config->policy.paused},
       // Set once a sample failed: how old the facts shown are, and why.
       {"sample_error", c.d.sampler->error().empty() ? json(nullptr) : json(c.d.sampler->error())},
       {"sample_age_ms",
        c.d.sampler->snapshot() ? json(now - c.d.sampler->sampled_at()) : json(nullptr)},
       {"stale_after_ms", c.d.scheduler->Policy().stale_after_ms},
       {"gpus", std::move(gpus)},
       {"topology", c.d.sampler->snapshot() ? c.d.sampler->snapshot()->topology
                                            : std::vector<std::vector<int>>{}}}));
}

void Routes::DaemonStatus(RouteContext& c) {
  c.respond(Json(200, {{"pid", SelfPid()},
                       {"version", kVersion},
                       {"node", c.d.node},
                       {"state_dir", c.d.options->paths.state_dir},
                       {"probe", c.d.sampler->Describe()},
                       {"running_attempts", c.d.agent->live().size()},
                       {"cluster", c.d.mode->Cluster()},
                       {"caller", {{"user", c.caller.user}, {"role", RoleName(c.caller.role)}}}}));
}

// {"path": "/abs/file"}: the store copied there while the daemon runs (it waits meanwhile;
// a queue of 100,000 jobs copies in well under a second).
void Routes::Backup(RouteContext& c) {
  json doc = json::parse(c.req.body, nullptr, false);
  const json* path = doc.is_object() && doc.contains("path") ? &doc["path"] : nullptr;
  if (path == nullptr || !path->is_string() || path->get<std::string>().empty() ||
      path->get<std::string>()[0] != '/' || doc.size() != 1) {
    return c.respond(ErrorResponse(
        Status::Invalid("path: expected {\"path\": \"/absolute/file\"}, the file to write")));
  }
  const std::string dest = path->get<std::string>();
  if (dest == c.d.options->paths.db || dest.rfind(c.d.options->paths.db + "-", 0) == 0) {
    return c.respond(ErrorResponse(
        Status::Invalid("path: " + dest + " is the database itself; name another file")));
  }
  // The store opens it on the loop, without O_NONBLOCK: a FIFO or device there would hold it.
  if (Result<UniqueFd> there = OpenUserFile(dest, FileWant::kRegular);
      !there.ok() && there.status().code() != Code::kNotFound) {
    return c.respond(ErrorResponse(Status::Invalid(
        "path: " + there.status().message() + "; a backup is written to a new or regular file")));
  }
  if (Status st = c.d.store->Backup(dest); !st.ok()) return c.respond(ErrorResponse(st));
  spdlog::info("backup of {} written to {}", c.d.options->paths.db, dest);
  c.respond(Json(200, {{"message", fmt::format("database {} copied to {}; to restore, stop the "
                                               "daemon and copy it back (docs/operations.md)",
                                               c.d.options->paths.db, dest)},
                       {"path", dest}}));
}

void Routes::Stop(RouteContext& c) {
  c.respond(
      Json(200, {{"message", fmt::format("daemon pid {} stopping; {} running job(s) keep running",
                                         SelfPid(), c.d.agent->live().size())}}));
  boost::asio::post(*c.d.io, [&d = c.d] { d.stop(); });
}

void Routes::Explain(RouteContext& c) {
  const Job& job = *c.job;
  Explanation e;
  if (job.state == JobState::kQueued) {
    Result<Explanation> got = c.d.scheduler->ExplainWaiting(job.id);
    if (!got.ok()) return c.respond(ErrorResponse(got.status()));
    e = std::move(*got);
  }
  json doc = ExplainJson(job, e, c.d.config->fair_share_half_life_ms);
  if (e.waiting) {
    // A preemption under way says so (the pass's reason), and every running job is judged as
    // a victim.
    if (const std::string* live = c.d.scheduler->LiveReason(job.id);
        live != nullptr &&
        (live->starts_with("will preempt ") || live->starts_with("preempting ") ||
         live->starts_with("will start when job "))) {
      doc["reason"] = *live;
    }
    Result<std::vector<PreemptCandidate>> candidates = c.d.scheduler->ExplainPreemption(job.id);
    if (!candidates.ok()) return c.respond(ErrorResponse(candidates.status()));
    json list = json::array();
    for (const PreemptCandidate& p : *candidates) {
      list.push_back({{"job", p.job},
                      {"user", p.user},
                      {"priority", p.priority},
                      {"eligible", p.eligible},
                      {"why", p.why}});
    }
    doc["preemption"] = std::move(list);
  }
  c.respond(Json(200, doc));
}

// GET /v1/jobs/ID/session: where the client of interactive job ID connects, once it runs
// (docs/api.md): {"socket", "node", "attempt"} when its shim is on this node, {"node",
// "attempt", "relay": true} when it is on another. With `Upgrade: trainq-session` the
// connection itself becomes the terminal's: the bytes go to the shim's socket here, or to the
// node that runs it, asked the same over the peers' signed API. 409 while it waits or once it
// ended.
void Routes::Session(RouteContext& c) {
  const Job& job = *c.job;
  if (!job.spec.interactive) {
    return c.respond(ErrorResponse(Status::Invalid(
        fmt::format("job {} is a batch job, not an interactive session; `trainq shell` starts one, "
                    "`trainq logs -f {}` follows this one",
                    job.id, job.id))));
  }
  const Attempt* attempt = job.current();
  if (attempt == nullptr || IsDone(job.state) || IsDone(attempt->state)) {
    const std::string* live = LiveReason(c.d, job);
    return c.respond(ErrorResponse(Status::Conflict(
        fmt::format("job {} is {}: {}", job.id, StateName(job.state), live ? *live : job.reason))));
  }
  for (const auto& [key, value] : c.req.query) {
    // A node asks for the attempt it was told of: a later one is not that session.
    if (key == "attempt" && value == std::to_string(attempt->n)) continue;
    if (key == "attempt") {
      return c.respond(ErrorResponse(
          Status::Conflict(fmt::format("job {} attempt {} is not running (attempt {} is)", job.id,
                                       value.substr(0, 32), attempt->n))));
    }
    return c.respond(ErrorResponse(Status::Invalid(fmt::format(
        "{}: not accepted; the session route takes only attempt (a number)", key.substr(0, 64)))));
  }
  bool elsewhere = c.d.mode->LogElsewhere(*attempt);
  std::string socket = SessionSocketPath(c.d.options->paths, job.id, attempt->n);
  if (c.req.upgrade.empty()) {
    json where = {{"node", attempt->node}, {"attempt", attempt->n}};
    if (elsewhere) where["relay"] = true;
    if (!elsewhere) where["socket"] = socket;
    return c.respond(Json(200, where));
  }
  if (c.req.upgrade != kSessionProtocol) {
    return c.respond(ErrorResponse(Status::Invalid(
        fmt::format("Upgrade: '{}' is not offered; the session route switches to {}",
                    c.req.upgrade.substr(0, 64), kSessionProtocol))));
  }
  std::string what = fmt::format("the terminal of job {}", job.id);
  if (!elsewhere) {
    auto target = std::make_shared<TunnelTarget>();
    target->protocol = kSessionProtocol;
    target->what = what;
    target->unix_path = socket;
    target->options.timeout_ms = 10000;  // the shim binds it as it starts
    HttpResponse r;
    r.tunnel = std::move(target);
    return c.respond(std::move(r));
  }
  if (!c.caller.node.empty()) {  // a node's request is not passed on again
    return c.respond(ErrorResponse(Status::Conflict(
        fmt::format("job {} runs on node {}, not on this one", job.id, attempt->node))));
  }
  Result<TunnelTarget> target =
      c.d.mode->NodeTunnel(attempt->node, c.req.path, {{"attempt", std::to_string(attempt->n)}},
                           std::string(kSessionProtocol), what);
  if (!target.ok()) return c.respond(ErrorResponse(target.status()));
  HttpResponse r;
  r.tunnel = std::make_shared<TunnelTarget>(std::move(*target));
  c.respond(std::move(r));
}

// GET /v1/jobs/ID/log?attempt=N&offset=B&length=L: bytes of an attempt's log, as stored
// (application/octet-stream; fewer or none at its end). With `size`: {"attempt", "size",
// "active"}. The daemon reads it for the caller: on a shared server the run dirs are root's.
void Routes::Log(RouteContext& c) {
  const Job& job = *c.job;
  const Attempt* attempt = job.current();
  uint64_t offset = 0, length = 1 << 20;
  bool size_only = false;
  std::optional<uint64_t> part;
  for (const auto& [key, value] : c.req.query) {
    uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    bool number = ec == std::errc() && ptr == value.data() + value.size() && !value.empty();
    if (key == "size" && (value.empty() || value == "1")) {
      size_only = true;
    } else if (key == "attempt" && number && n >= 1 && n <= static_cast<uint64_t>(job.attempt)) {
      attempt = &job.attempts[n - 1];
    } else if (key == "offset" && number) {
      offset = n;
    } else if (key == "length" && number && n <= (8u << 20)) {
      length = n;
    } else if (key == "part" && number && n < 1024) {
      part = n;
    } else {
      return c.respond(ErrorResponse(Status::Invalid(fmt::format(
          "{}: '{}' is not accepted; expected attempt (1 to {}), part (a gang's rank), offset "
          "(bytes), length (at most 8388608 bytes) and size (no value, or 1)",
          key, value.substr(0, 64), job.attempt))));
    }
  }
  if (attempt == nullptr) {
    const std::string* live = LiveReason(c.d, job);
    return c.respond(ErrorResponse(Status::Conflict(
        fmt::format("job {} has not started yet: {}", job.id, live ? *live : job.reason))));
  }
  // A gang's part: its own node and log, as the attempt's are part 0's.
  Attempt of_part;
  if (part && *part > 0) {
    if (*part >= attempt->parts.size()) {
      return c.respond(ErrorResponse(Status::Invalid(
          fmt::format("part: job {} attempt {} has {} part(s), ranks 0 to {}", job.id, attempt->n,
                      std::max<size_t>(attempt->parts.size(), 1),
                      std::max<size_t>(attempt->parts.size(), 1) - 1))));
    }
    of_part = *attempt;
    of_part.node = attempt->parts[*part].node;
    of_part.log_path = attempt->parts[*part].log_path;
    attempt = &of_part;
  }
  if (c.d.mode->LogElsewhere(*attempt)) {
    // What the holder is asked is rebuilt from the numbers read above, never the caller's text.
    std::map<std::string, std::string> query = {{"attempt", std::to_string(attempt->n)},
                                                {"offset", std::to_string(offset)},
                                                {"length", std::to_string(length)}};
    if (size_only) query["size"] = "1";
    if (part && *part > 0) query["part"] = std::to_string(*part);
    Result<HttpResponse> answer =
        c.d.mode->AskNode(attempt->node, "GET", c.req.path, query, "",
                          fmt::format("the log of job {} attempt {}", job.id, attempt->n));
    return c.respond(answer.ok() ? std::move(*answer) : ErrorResponse(answer.status()));
  }
  bool active = attempt->state == JobState::kStarting || attempt->state == JobState::kRunning;
  // A log the shim made in the run dir: nothing but a regular file is read (or waited for).
  Result<UniqueFd> opened = OpenUserFile(attempt->log_path, FileWant::kRegular);
  UniqueFd fd = opened.ok() ? std::move(*opened) : UniqueFd();
  uint64_t size = fd.valid() ? FdSize(fd.get()).value_or(0) : 0;
  if (size_only) {
    return c.respond(Json(200, {{"attempt", attempt->n}, {"size", size}, {"active", active}}));
  }
  std::string bytes;
  if (fd.valid() && offset < size) {
    bytes.resize(static_cast<size_t>(std::min<uint64_t>(length, size - offset)));
    Result<size_t> n = ReadAt(fd.get(), offset, bytes);
    bytes.resize(n.ok() ? *n : 0);
  }
  c.respond({200, std::move(bytes), "application/octet-stream"});
}

// {"message", "job"}: what was done, and the job as it is now.
void Routes::AnswerChange(RouteContext& c, const Status& st, const std::string& message) {
  if (!st.ok()) return c.respond(ErrorResponse(st));
  Result<Job> now = c.d.store->Get(c.job->id);
  c.respond(Json(200, {{"message", message}, {"job", now.ok() ? JobToJson(*now) : json(nullptr)}}));
}

void Routes::CancelJob(RouteContext& c) {
  std::string message;
  Status st = CancelOne(c.d, *c.job, c.caller.user, &message);
  AnswerChange(c, st, message);
}

namespace {

// What a requeue or a signal needs of the job: an attempt running on this node. kConflict
// naming what the job is doing otherwise, and what to use instead.
Status RunningHere(ApiParts& d, const Job& job, std::string_view verb) {
  if (IsWaiting(job.state)) {
    return Status::Conflict(fmt::format("job {} is {}, not running: nothing to {}", job.id,
                                        StateName(job.state), verb));
  }
  if (IsDone(job.state)) {
    return Status::Conflict(
        fmt::format("job {} already ended ({}){}", job.id, StateName(job.state),
                    verb == "requeue" ? fmt::format("; trainq retry {} queues it again", job.id)
                                      : std::string()));
  }
  if (d.agent->live().count(job.id) == 0) {
    const Attempt* a = job.current();
    return Status::Conflict(fmt::format(
        "job {} runs on node {}, not here: {} it through that node's daemon (inside the job, "
        "trainq reaches it)",
        job.id, a ? a->node : std::string("?"), verb));
  }
  return Status::Ok();
}

}  // namespace

// POST /v1/jobs/ID/requeue[?self=1]: stops the running attempt at once and queues the job
// again under its id (`trainq requeue`, `scontrol requeue`). self=1: the job asked itself.
void Routes::RequeueJob(RouteContext& c) {
  const Job& job = *c.job;
  std::string message;
  Status st = RunningHere(c.d, job, "requeue");
  if (st.ok()) {
    auto self = c.req.query.find("self");
    bool by_itself = self != c.req.query.end() && self->second == "1";
    ShimControl control;
    control.stop = "requeued";
    control.reason = by_itself ? "requeued by itself" : "requeued by " + c.caller.user;
    st = c.d.agent->Control(job.id, control, &message);
  }
  AnswerChange(c, st, message);
}

// POST /v1/jobs/ID/signal?signal=SIG[&batch=1]: a signal to the running job's processes, or
// its command's own process only (`trainq cancel --signal`, `scancel --signal`).
void Routes::SignalJob(RouteContext& c) {
  auto sig = c.req.query.find("signal");
  auto batch = c.req.query.find("batch");
  Result<SignalOption> parsed =
      sig == c.req.query.end() || sig->second.find('@') != std::string::npos
          ? Result<SignalOption>(Status::Invalid(
                "signal: give the signal to send, a name (USR1, TERM) or number 1-31, e.g. "
                "?signal=USR1"))
          : ParseSignalOption(sig->second, "signal");
  if (!parsed.ok()) return c.respond(ErrorResponse(parsed.status()));
  std::string message;
  Status st = RunningHere(c.d, *c.job, "signal");
  if (st.ok()) {
    ShimControl control;
    control.signal = parsed->signal;
    control.batch_only = parsed->batch_only || (batch != c.req.query.end() && batch->second == "1");
    st = c.d.agent->Control(c.job->id, control, &message);
  }
  AnswerChange(c, st, message);
}

void Routes::RetryJob(RouteContext& c) {
  std::string message;
  Status st = Retry(c, *c.job, &message);
  AnswerChange(c, st, message);
}

void Routes::ReleaseJob(RouteContext& c) {
  std::string message;
  Result<GateRelease> release = ParseRelease(c.req.body);
  Status st = release.ok() ? c.d.agent->ReleaseGate(*c.job, *release, &message) : release.status();
  AnswerChange(c, st, message);
}

Status Routes::Retry(RouteContext& c, const Job& job, std::string* message) {
  Status st = c.d.store->Requeue(job.id, "retry requested by " + c.caller.user, c.d.clock->Now());
  c.d.scheduler->Requeued(job.id);
  if (st.ok()) c.d.deps->Recheck(job.id);  // a retried job waits for its dependencies again
  c.d.scheduler->RequestSchedule();
  if (st.code() == Code::kConflict) {
    return Status::Conflict(fmt::format("job {} is {}; only a job that ended can be retried",
                                        job.id, StateName(job.state)));
  }
  TRAINQ_RETURN_IF_ERROR(st);
  *message = fmt::format("job {} queued again (was {})", job.id, StateName(job.state));
  Result<Job> now = c.d.store->Get(job.id);
  if (!now.ok() || now->state == JobState::kQueued) return Status::Ok();
  // Its dependencies judged it at once: blocked again, or cancelled by one that failed.
  if (now->state == JobState::kBlocked) {
    *message = fmt::format("job {} is back in the queue, blocked: {}", job.id, now->reason);
    return Status::Ok();
  }
  return Status::Conflict(
      fmt::format("job {} was retried but did not go back to the queue: it is {} ({})", job.id,
                  StateName(now->state), now->reason));
}

namespace {

constexpr size_t kMaxBatchIds = 100000;

// {"ids": [12, 13, ...]}: positive job ids, each once. Every problem is named at once.
Result<std::vector<JobId>> ParseIds(const std::string& body) {
  static constexpr std::string_view kForm =
      "expected {\"ids\": [12, 13, ...]}: 1 to 100000 job ids, each once, and nothing else";
  json doc = json::parse(body, nullptr, false);
  if (!doc.is_object() || doc.size() != 1 || !doc.contains("ids") || !doc["ids"].is_array() ||
      doc["ids"].empty() || doc["ids"].size() > kMaxBatchIds) {
    return Status::Invalid(fmt::format("ids: {}", kForm));
  }
  std::vector<JobId> ids;
  std::map<JobId, size_t> first;
  std::vector<std::string> problems;
  for (size_t i = 0; i < doc["ids"].size(); ++i) {
    const json& v = doc["ids"][i];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      problems.push_back(fmt::format("ids[{}]: {} is not a job id", i, v.dump()));
      continue;
    }
    JobId id = v.get<JobId>();
    auto [at, added] = first.try_emplace(id, i);
    if (!added) {
      problems.push_back(fmt::format("ids[{}]: {} is given twice (ids[{}])", i, id, at->second));
    }
    ids.push_back(id);
  }
  if (problems.empty()) return ids;
  constexpr size_t kNamed = 10;  // a list of 100000 bad ids is not read to its end
  if (problems.size() > kNamed) {
    size_t more = problems.size() - kNamed;
    problems.resize(kNamed);
    problems.push_back(fmt::format("{} more", more));
  }
  return Status::Invalid(fmt::format("{}; {}", fmt::join(problems, "; "), kForm));
}

}  // namespace

namespace {

json Refused(JobId id, const Status& st) {
  return {{"id", id}, {"error", {{"code", CodeName(st.code())}, {"message", st.message()}}}};
}

}  // namespace

// Each job's result is {"id", "state", "message"}, or {"id", "error": {"code", "message"}}
// where a request for that job alone would have been refused.
void Routes::ActOnMany(RouteContext& c, std::string_view verb) {
  Result<std::vector<JobId>> ids = ParseIds(c.req.body);
  if (!ids.ok()) return c.respond(ErrorResponse(ids.status()));
  std::vector<std::optional<Job>> jobs(ids->size());
  std::vector<json> results(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    JobId id = (*ids)[i];
    Result<Job> job = c.d.store->Get(id);
    Status st = job.status();
    if (st.ok()) st = MayActOn(c.caller, &*job, verb);
    if (st.ok()) jobs[i] = std::move(*job);
    if (!st.ok()) results[i] = Refused(id, st);
  }
  if (verb == "cancel") CancelWaitingTogether(c, jobs, results);
  for (size_t i = 0; i < ids->size(); ++i) {
    if (!results[i].is_null()) continue;
    std::string message;
    Status st = verb == "cancel" ? CancelOne(c.d, *jobs[i], c.caller.user, &message)
                                 : Retry(c, *jobs[i], &message);
    if (!st.ok()) {
      results[i] = Refused((*ids)[i], st);
      continue;
    }
    Result<Job> now = c.d.store->Get((*ids)[i]);
    results[i] = {{"id", (*ids)[i]},
                  {"state", now.ok() ? json(StateName(now->state)) : json(nullptr)},
                  {"message", message}};
  }
  c.respond(Json(200, {{"results", std::move(results)}}));
}

// The waiting jobs among `jobs` are cancelled in one store call, so a request that cancels
// thousands of them pays for one sync, not one each; their results are filled in. A job
// the store finds no longer waiting is left to CancelOne, read again.
void Routes::CancelWaitingTogether(RouteContext& c, std::vector<std::optional<Job>>& jobs,
                                   std::vector<json>& results) {
  std::vector<size_t> at;
  std::vector<std::pair<JobId, std::string>> cancels;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i] || !IsWaiting(jobs[i]->state)) continue;
    at.push_back(i);
    cancels.emplace_back(jobs[i]->id, "cancelled by " + c.caller.user);
  }
  if (cancels.empty()) return;
  Result<std::vector<Status>> done = c.d.store->CancelWaitingMany(cancels);
  for (size_t k = 0; k < at.size(); ++k) {
    std::optional<Job>& job = jobs[at[k]];
    JobId id = job->id;
    Status st = done.ok() ? (*done)[k] : done.status();
    if (st.code() == Code::kConflict) {
      Result<Job> now = c.d.store->Get(id);
      if (now.ok()) {
        job = std::move(*now);
        continue;
      }
      st = now.status();
    }
    if (!st.ok()) {
      results[at[k]] = Refused(id, st);
      continue;
    }
    std::string message;
    CancelledWaiting(c.d, *job, &message);
    results[at[k]] = {{"id", id}, {"state", "cancelled"}, {"message", message}};
  }
}

namespace {

using enum Who;
using enum PeerMay;

// Every route of the API (docs/api.md lists the same): who may call it is its rule's, and
// the caller is judged by nothing else.
// clang-format off
constexpr Route kRoutes[] = {
    {"POST", "/v1/jobs", {kSubmitter, kNo, "submit"}, Routes::Submit},
    {"GET", "/v1/jobs", {kReader, kNo, "list jobs"}, Routes::ListJobs},
    {"POST", "/v1/jobs/clean", {kOwnJobs, kNo, "clean"}, Routes::Clean},
    {"POST", "/v1/jobs/cancel", {kOwnJobs, kNo, "cancel"}, Routes::CancelMany},
    {"POST", "/v1/jobs/retry", {kOwnJobs, kNo, "retry"}, Routes::RetryMany},
    {"GET", "/v1/jobs/{id}", {kReader, kNo, "show"}, Routes::ShowJob},
    {"GET", "/v1/jobs/{id}/explain", {kReader, kNo, "explain"}, Routes::Explain},
    {"GET", "/v1/jobs/{id}/log", {kJobReader, kYes, "read the log of"}, Routes::Log},
    {"GET", "/v1/jobs/{id}/session", {kJobOwner, kYes, "connect to the session of"},
     Routes::Session},
    {"GET", "/v1/jobs/{id}/transfer", {kNoUser, kYes, "read what is shipped of"}, Routes::Transfer},
    {"GET", "/v1/jobs/{id}/outputs", {kNoUser, kYes, "read the outputs of"}, Routes::Outputs},
    {"POST", "/v1/jobs/{id}/cancel", {kJobOwner, kNo, "cancel"}, Routes::CancelJob},
    {"POST", "/v1/jobs/{id}/retry", {kJobOwner, kNo, "retry"}, Routes::RetryJob},
    {"POST", "/v1/jobs/{id}/requeue", {kJobOwner, kNo, "requeue"}, Routes::RequeueJob},
    {"POST", "/v1/jobs/{id}/signal", {kJobOwner, kNo, "signal"}, Routes::SignalJob},
    {"POST", "/v1/jobs/{id}/release", {kJobOwner, kNo, "release"}, Routes::ReleaseJob},
    {"POST", "/v1/jobs/{id}/update", {kJobOwner, kNo, "update, hold or release"},
     Routes::UpdateJob},
    {"POST", "/v1/jobs/{id}/steps", {kJobOwner, kNo, "start a step of"}, Routes::AddStep},
    {"GET", "/v1/jobs/{id}/steps", {kJobOwner, kItsPart, "read the steps of"}, Routes::ReadSteps},
    {"POST", "/v1/jobs/{id}/steps/result", {kJobOwner, kItsPart, "end a step of"},
     Routes::FinishStep},
    {"POST", "/v1/jobs/{id}/steps/cancel", {kJobOwner, kNo, "cancel a step of"},
     Routes::CancelStep},
    {"POST", "/v1/jobs/{id}/steps/done", {kJobOwner, kNo, "end the steps of"}, Routes::StepsDone},
    {"GET", "/v1/acct", {kReader, kNo, "read the accounting"}, Routes::Acct},
    {"GET", "/v1/gpus", {kReader, kNo, "list GPUs"}, Routes::Gpus},
    {"GET", "/v1/gpus/history", {kReader, kYes, "read the GPU history"}, Routes::GpuHistory},
    {"GET", "/v1/events", {kReader, kNo, "follow the events"}, Routes::Events},
    {"GET", "/metrics", {kReader, kNo, "read the metrics"}, Routes::Metrics},
    {"GET", "/v1/status", {kReader, kNo, "read the status"}, Routes::DaemonStatus},
    {"POST", "/v1/daemon/stop", {kAdmin, kNo, "stop the daemon"}, Routes::Stop},
    {"POST", "/v1/daemon/backup", {kAdmin, kNo, "back up the database"}, Routes::Backup},
    {"GET", "/v1/config", {kReader, kNo, "show the config"}, Routes::GetConfig},
    {"PUT", "/v1/config", {kAdmin, kNo, "change the config"}, Routes::SetConfig},
    {"POST", "/v1/config", {kAdmin, kNo, "change the config"}, Routes::SetConfig},
    {"POST", "/v1/tokens", {kAdmin, kNo, "create tokens"}, Routes::CreateToken},
    {"POST", "/v1/tokens/dashboard", {kSocketUser, kNo, "make a dashboard token"},
     Routes::DashboardToken},
    {"GET", "/v1/tokens", {kAdmin, kNo, "list tokens"}, Routes::ListTokens},
    // The name is the rest of the path: one with a '/' is refused as a name, not as no route.
    {"DELETE", "/v1/tokens/{name...}", {kAdmin, kNo, "revoke tokens"}, Routes::RevokeToken},
    {"GET", "/v1/nodes", {kReader, kNo, "list nodes"}, Routes::Nodes},
    {"POST", "/v1/nodes/{name}/drain", {kAdmin, kNo, "drain a node"}, Routes::DrainNode},
    {"POST", "/v1/nodes/{name}/resume", {kAdmin, kNo, "resume a node"}, Routes::ResumeNode},
    {"POST", "/v1/nodes/{name}/remove", {kAdmin, kNo, "remove a node"}, Routes::RemoveNode},
    {"GET", "/v1/cluster/store", {kReader, kYes, "ask whether the store is seen"},
     Routes::StoreSeen},
};
// clang-format on

constexpr std::string_view kRest = "...}";

// Whether `path` has the shape of `pattern`; *segment is then what its placeholder matched.
bool Matches(std::string_view pattern, std::string_view path, std::string_view* segment) {
  size_t open = pattern.find('{');
  if (open == std::string_view::npos) return path == pattern;
  if (path.substr(0, open) != pattern.substr(0, open)) return false;
  std::string_view rest = path.substr(open);
  size_t close = pattern.find('}', open);
  bool to_end = pattern.substr(0, close + 1).ends_with(kRest);
  std::string_view value = to_end ? rest : rest.substr(0, rest.find('/'));
  if (rest.substr(value.size()) != pattern.substr(close + 1)) return false;
  *segment = value;
  return true;
}

const Route* FindRoute(const std::string& method, const std::string& path,
                       std::string_view* segment) {
  for (const Route& r : kRoutes) {
    if (method == r.method && Matches(r.pattern, path, segment)) return &r;
  }
  return nullptr;
}

// The row whose pattern is `pattern`, for a path it serves under another spelling.
const Route& RowOf(std::string_view method, std::string_view pattern) {
  for (const Route& r : kRoutes) {
    if (method == r.method && pattern == r.pattern) return r;
  }
  std::abort();  // no such row: the table and its caller disagree
}

}  // namespace

std::span<const Route> RouteTable() { return kRoutes; }

std::vector<std::string> RouteNames() {
  std::vector<std::string> names;
  for (const Route& r : kRoutes) {
    std::string pattern = r.pattern;
    if (size_t at = pattern.find(kRest); at != std::string::npos) pattern.replace(at, 3, "");
    names.push_back(std::string(r.method) + " " + pattern);
  }
  return names;
}

Result<Job> Routes::FindJob(RouteContext& c, std::string_view id) {
  std::optional<JobId> n = ParseId(id);
  if (!n) {
    return Status::Invalid(fmt::format("job id: '{}' is not a job id; use a positive integer", id));
  }
  return c.d.store->Get(*n);
}

void Routes::Dispatch(RouteContext& c, const Route& route) {
  std::optional<Job> job;
  if (std::string_view(route.pattern).starts_with("/v1/jobs/{id}")) {
    Result<Job> found = FindJob(c, c.segment);
    if (!found.ok()) return c.respond(ErrorResponse(found.status()));
    job = std::move(*found);
    c.job = &*job;
  }
  Status st = Permit(route.rule, c.caller, c.req, c.job);
  if (!st.ok()) return c.respond(ErrorResponse(st));
  route.handle(c);
}

// 404 naming the request, for one no row serves. Below /v1/jobs/ the id is checked and the job
// found first, so a mistyped id or a job that is gone reads as such; GET /v1/jobs/ID/ is the
// job, served by its row. Below /v1/nodes/ the answer names the actions there.
void Routes::NoRoute(RouteContext& c) {
  const std::string& method = c.req.method;
  auto parts = SplitJobPath(c.req.path);
  if (parts && method == "GET" && parts->second.empty()) {
    c.segment = std::string_view(c.req.path).substr(kJobsPrefix.size(), parts->first.size());
    return Dispatch(c, RowOf("GET", "/v1/jobs/{id}"));
  }
  if (parts && (method == "GET" || method == "POST")) {
    Result<Job> job = FindJob(c, parts->first);
    if (!job.ok()) return c.respond(ErrorResponse(job.status()));
  } else if (method == "POST" && c.req.path.starts_with("/v1/nodes/")) {
    return c.respond(ErrorResponse(Status::NotFound(
        "no route POST " + c.req.path + "; use /v1/nodes/NAME/drain, /resume or /remove")));
  }
  c.respond(ErrorResponse(Status::NotFound("no route " + method + " " + c.req.path)));
}

namespace {

// The dashboard's files hold no data: served to anyone, checked again by the browser at each
// load (a 304 when unchanged), and the page may run only its own scripts.
HttpResponse AssetResponse(const WebAsset& asset, const HttpRequest& req) {
  HttpResponse r{200, "", asset.content_type};
  r.headers = {{"ETag", asset.etag},
               {"Cache-Control", "no-cache"},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"},
               {"Content-Security-Policy",
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}};
  if (req.if_none_match == asset.etag) {
    r.status = 304;
    return r;
  }
  r.body.assign(reinterpret_cast<const char*>(asset.data), asset.size);
  return r;
}

}  // namespace

void Api::Handle(HttpRequest request, Responder respond) {
  if (request.method == "GET") {
    if (const WebAsset* asset = FindWebAsset(request.path)) {
      return respond(AssetResponse(*asset, request));
    }
    // Browsers ask for it unbidden: no icon, rather than a 401 in the page's console.
    if (request.path == "/favicon.ico") return respond({204, "", "image/x-icon"});
  }
  Result<Caller> caller = d_.auth->Authenticate(request);
  if (!caller.ok()) return respond(ErrorResponse(caller.status()));
  std::string_view segment;
  const Route* route = FindRoute(request.method, request.path, &segment);
  // For the watchdog's log line (liveness.h) while a request holds the loop.
  SetLoopActivity(route ? route->method : "request", route ? route->pattern : "");
  RouteContext c{d_, request, respond, *caller, segment};
  if (route == nullptr) return Routes::NoRoute(c);
  Routes::Dispatch(c, *route);
}

}  // namespace trainq
