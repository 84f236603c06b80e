// The researcher's workflow on the command line (docs/workflow.md): groups, `run`, `wait`
// and `sbatch`. Each builds on the API the other commands use.
#include <fnmatch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/reply.h"
#include "src/core/duration.h"
#include "src/core/hostlist.h"
#include "src/core/json_codec.h"
#include "src/core/sbatch.h"
#include "src/core/session_frames.h"
#include "src/core/spec.h"
#include "src/core/stop_spec.h"
#include "src/core/sweep.h"
#include "src/core/words.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/terminal_session.h"
#include "src/os/users.h"

namespace trainq {

using json = nlohmann::json;

namespace {

bool Done(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

Result<int64_t> GroupId(const std::string& text) {
  Result<int64_t> id = ParseJobId(text);
  if (id.ok()) return id;
  return Status::Invalid("--group: '" + text +
                         "' is not a group; use the number 'submit' printed as group");
}

// Every job of the group, oldest first; kNotFound when it has none.
Result<std::vector<json>> GroupJobs(Client& client, int64_t group) {
  Result<json> r = client.Call("GET", api::JobsPath(fmt::format("all=1&group={}", group)));
  if (!r.ok()) return r.status();
  Reply reply(*r);
  std::vector<Reply> jobs = reply.Array("jobs");
  if (!reply.ok()) return reply.status();
  if (jobs.empty()) {
    return Status::NotFound(
        fmt::format("no group {}: no job belongs to it (see 'trainq ls -a')", group));
  }
  std::vector<json> out;
  for (const Reply& job : jobs) out.push_back(job.raw());
  return out;
}

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

int JobExitCode(const json& job) {
  Reply reply(job);
  if (reply.Str("state") == "succeeded") return 0;
  std::vector<Reply> attempts = reply.ArrayOr("attempts");
  if (attempts.empty()) return 1;
  const Reply& last = attempts.back();
  if (std::optional<int64_t> sig = last.OptInt("signal")) return 128 + static_cast<int>(*sig);
  std::optional<int64_t> code = last.OptInt("exit_code");
  return code && *code != 0 ? static_cast<int>(*code) : 1;
}

namespace {

// What became of one job of a `cancel` or `retry`.
struct JobOutcome {
  int64_t id = 0;
  Status status;  // as a request for this job alone would have ended
  json reply;     // {"id", "state", "message"} when status is ok
};

// One request for all `ids` (POST /v1/jobs/cancel or /v1/jobs/retry): the daemon decides
// them together, with no scheduling pass between them. Outcomes in the order of `ids`.
Result<std::vector<JobOutcome>> ActOnJobs(Client& client, std::string_view verb,
                                          const std::vector<int64_t>& ids) {
  Result<json> r = client.Call("POST", api::JobsActionPath(verb), DumpJson(json{{"ids", ids}}));
  // A daemon older than this route reads the verb as a job id and refuses it.
  if (!r.ok() && r.status().code() == Code::kInvalid &&
      r.status().message().starts_with(fmt::format("job id: '{}'", verb))) {
    return Status::Internal(fmt::format(
        "the daemon is older than this trainq and cannot {} many jobs in one request; restart "
        "it ('trainq daemon stop', then any command starts this version's)",
        verb));
  }
  if (!r.ok()) return r.status();
  Reply reply(*r);
  std::vector<JobOutcome> out;
  for (const Reply& item : reply.Array("results")) {
    JobOutcome o{item.Int("id"), Status::Ok(), item.raw()};
    if (item.Has("error")) {
      Reply error = item.Object("error");
      o.status = Status(CodeFromName(error.Str("code")), error.Str("message"));
    } else {
      (void)item.Str("message");  // checked here: printed later
    }
    out.push_back(std::move(o));
  }
  if (!reply.ok()) return reply.status();
  return out;
}

// {"id", "state", "message"} of a job acted on, or {"id", "error": {"code", "message"}}.
json OutcomeJson(const JobOutcome& o) {
  if (o.status.ok()) return o.reply;
  return {{"id", o.id},
          {"error", {{"code", CodeName(o.status.code())}, {"message", o.status.message()}}}};
}

// `cancel --group G --json` and `retry --group G --json`: each job's outcome; `rc` back.
int PrintGroupResults(int64_t group, size_t jobs, json results, int rc) {
  json out = {{"group", group}, {"jobs", jobs}, {"results", std::move(results)}};
  std::printf("%s\n", DumpJson(out, 2).c_str());
  return rc;
}

int CmdCancelGroup(Client& client, const std::string& text, bool as_json) {
  Result<int64_t> group = GroupId(text);
  if (!group.ok()) return Fail(group.status());
  Result<std::vector<json>> jobs = GroupJobs(client, *group);
  if (!jobs.ok()) return Fail(jobs.status());
  std::vector<int64_t> ids;
  for (const json& job : *jobs) {
    if (!Done(job.value("state", ""))) ids.push_back(job.value("id", int64_t{0}));
  }
  int cancelled = 0, rc = 0;
  json results = json::array();
  if (!ids.empty()) {
    Result<std::vector<JobOutcome>> outcomes = ActOnJobs(client, "cancel", ids);
    if (!outcomes.ok()) return Fail(outcomes.status());
    for (const JobOutcome& o : *outcomes) {
      // One that ended meanwhile is not an error: the group is what was asked.
      if (!o.status.ok() && o.status.code() != Code::kConflict) rc = std::max(rc, Fail(o.status));
      if (o.status.ok()) ++cancelled;
      results.push_back(OutcomeJson(o));
    }
  }
  if (as_json) return PrintGroupResults(*group, jobs->size(), std::move(results), rc);
  std::printf("group %lld: %d job(s) cancelled or stopping, %zu in the group\n",
              static_cast<long long>(*group), cancelled, jobs->size());
  return rc;
}

int CmdRetryGroup(Client& client, const std::string& text, bool failed_only, bool as_json) {
  Result<int64_t> group = GroupId(text);
  if (!group.ok()) return Fail(group.status());
  Result<std::vector<json>> jobs = GroupJobs(client, *group);
  if (!jobs.ok()) return Fail(jobs.status());
  std::vector<int64_t> ids;
  for (const json& job : *jobs) {
    std::string state = job.value("state", "");
    bool wanted = failed_only ? state == "failed" : (state == "failed" || state == "cancelled");
    if (wanted) ids.push_back(job.value("id", int64_t{0}));
  }
  int queued = 0, rc = 0;
  json results = json::array();
  if (!ids.empty()) {
    Result<std::vector<JobOutcome>> outcomes = ActOnJobs(client, "retry", ids);
    if (!outcomes.ok()) return Fail(outcomes.status());
    for (const JobOutcome& o : *outcomes) {
      if (!o.status.ok()) rc = std::max(rc, Fail(o.status));
      if (o.status.ok()) ++queued;
      results.push_back(OutcomeJson(o));
    }
  }
  if (as_json) return PrintGroupResults(*group, jobs->size(), std::move(results), rc);
  std::printf("group %lld: %d job(s) queued again\n", static_cast<long long>(*group), queued);
  return rc;
}

constexpr std::string_view kIdForms = "use ids like 12, lists like 597,598 and ranges like 10-20";
constexpr int64_t kMaxRange = 100000;

Status BadIds(const std::string& text, std::string_view why = "") {
  return Status::Invalid(fmt::format("job ids: '{}' {}; {}", text,
                                     why.empty() ? "is not a job id, list or range" : why,
                                     kIdForms));
}

bool Filtered(const JobSelection& s) {
  return !s.name.empty() || !s.state.empty() || s.all_mine || !s.group.empty();
}

// The caller's jobs the filters pick, oldest first: those in `states` (the command's default
// when --state is not given), named as --name's glob says, of --group, among `ids` if any.
Result<std::vector<json>> Selected(Client& client, const JobSelection& s,
                                   const std::vector<int64_t>& ids,
                                   const std::set<std::string>& states) {
  std::string target = api::JobsPath("all=1&mine=1");
  if (!s.group.empty()) {
    Result<int64_t> group = GroupId(s.group);
    if (!group.ok()) return group.status();
    target += fmt::format("&group={}", *group);
  }
  Result<json> r = client.Call("GET", target);
  if (!r.ok()) return r.status();
  Reply reply(*r);
  std::vector<Reply> jobs = reply.Array("jobs");
  if (!reply.ok()) return reply.status();
  std::set<int64_t> among(ids.begin(), ids.end());
  std::vector<json> out;
  for (const Reply& job : jobs) {
    if (!among.empty() && !among.count(job.Int("id"))) continue;
    if (!states.count(job.Str("state"))) continue;
    if (!s.name.empty() && ::fnmatch(s.name.c_str(), job.Str("name").c_str(), 0) != 0) continue;
    out.push_back(job.raw());
  }
  return out;
}

// --state's states, checked; `fallback` when it is not given.
Result<std::set<std::string>> States(const std::string& text, std::set<std::string> fallback) {
  if (text.empty()) return fallback;
  static const std::set<std::string> kStates = {"queued",    "blocked", "starting", "running",
                                                "succeeded", "failed",  "cancelled"};
  std::set<std::string> states;
  for (size_t start = 0;;) {
    size_t comma = text.find(',', start);
    std::string state = text.substr(start, comma - start);
    if (!kStates.count(state)) {
      return Status::Invalid(fmt::format(
          "--state: '{}' is not a state; use queued, blocked, starting, running, succeeded, "
          "failed or cancelled, comma-separated",
          state));
    }
    states.insert(state);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return states;
}

// What `cancel`/`retry` (`verb`) acts on: the ids in order, or what the filters pick; an
// empty list with a note on stderr when the filters pick nothing.
Result<std::vector<int64_t>> Resolve(Client& client, const JobSelection& s, std::string_view verb,
                                     std::set<std::string> default_states) {
  Result<std::vector<int64_t>> ids = ParseIdList(s.ids);
  if (!ids.ok()) return ids.status();
  if (ids->empty() && !Filtered(s)) {
    return Status::Invalid(
        fmt::format("{}: give job ids ({}), or choose your jobs with --group, --name PATTERN, "
                    "--state S or --all-mine",
                    verb, kIdForms.substr(4)));
  }
  if (!Filtered(s)) return ids;
  Result<std::set<std::string>> states = States(s.state, std::move(default_states));
  if (!states.ok()) return states.status();
  Result<std::vector<json>> jobs = Selected(client, s, *ids, *states);
  if (!jobs.ok()) return jobs.status();
  std::vector<int64_t> out;
  for (const json& job : *jobs) out.push_back(job.value("id", int64_t{0}));
  if (out.empty())
    std::fprintf(stderr, "trainq: no job of yours matches; nothing to %s\n",
                 std::string(verb).c_str());
  return out;
}

bool OnlyGroup(const JobSelection& s) {
  return !s.group.empty() && s.ids.empty() && s.name.empty() && s.state.empty() && !s.all_mine;
}

}  // namespace

Result<std::vector<int64_t>> ParseIdList(const std::vector<std::string>& texts) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  auto add = [&](int64_t id) {
    if (seen.insert(id).second) out.push_back(id);
  };
  for (const std::string& text : texts) {
    for (size_t start = 0;;) {
      size_t comma = text.find(',', start);
      std::string part = text.substr(start, comma - start);
      size_t dash = part.find('-');
      if (dash == std::string::npos) {
        Result<int64_t> id = ParseJobId(part);
        if (!id.ok()) return BadIds(part);
        add(*id);
      } else {
        Result<int64_t> first = ParseJobId(part.substr(0, dash));
        Result<int64_t> last = ParseJobId(part.substr(dash + 1));
        if (!first.ok() || !last.ok()) return BadIds(part);
        if (*last < *first) return BadIds(part, "runs backwards");
        if (*last - *first >= kMaxRange) {
          return BadIds(part, fmt::format("spans more than {} ids", kMaxRange));
        }
        for (int64_t id = *first; id <= *last; ++id) add(id);
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

int CmdClean(Client& client, const CleanArgs& args) {
  json body = {{"keep_logs", args.keep_logs}, {"all_users", args.all_users}};
  if (!args.before.empty()) {
    Result<int64_t> ms = ParseDurationMs(args.before, "--before");
    if (!ms.ok()) return Fail(ms.status());
    body["older_than_ms"] = *ms;
  }
  if (!args.state.empty()) {
    Result<std::set<std::string>> states = States(args.state, {});
    if (!states.ok()) return Fail(states.status());
    for (const std::string& state : *states) {
      if (!Done(state)) {
        return Fail(Status::Invalid(fmt::format(
            "--state: {} jobs have not ended; clean forgets succeeded, failed or cancelled ones",
            state)));
      }
    }
    body["states"] = *states;
  }
  Result<json> r = client.Call("POST", api::JobsActionPath("clean"), DumpJson(body));
  if (!r.ok()) return Fail(r.status());
  if (args.json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
    return 0;
  }
  return PrintJobMessage(*r);
}

namespace {

// With --json, {"results": [...]} on stdout; nothing otherwise (each job had its line).
int PrintResults(const json& results, bool as_json) {
  if (as_json) std::printf("%s\n", DumpJson(json{{"results", results}}, 2).c_str());
  return 0;
}

}  // namespace

int CmdUpdate(Client& client, const UpdateArgs& a) {
  Result<std::vector<int64_t>> ids = ParseIdList(a.ids);
  if (!ids.ok()) return Fail(ids.status());
  if (ids->empty()) return Fail(Status::Invalid("give the jobs: trainq update ID... [OPTIONS]"));
  json body = json::object();
  if (a.priority) body["priority"] = *a.priority;
  if (a.gpus) body["gpus"] = *a.gpus;
  if (a.cpus) body["cpus"] = *a.cpus;
  if (a.mem) body["mem"] = *a.mem;
  if (a.time) body["time"] = *a.time;
  if (a.name) body["name"] = *a.name;
  if (a.gpu_type) body["gpu_type"] = *a.gpu_type == "none" ? json(nullptr) : json(*a.gpu_type);
  if (!a.constraints.empty()) {
    body["constraints"] =
        a.constraints == std::vector<std::string>{"none"} ? json(nullptr) : json(a.constraints);
  }
  // --after none: no dependencies any more.
  for (auto [text, key, option] : {std::tuple{&a.after, "after", "--after"},
                                   std::tuple{&a.after_any, "after_any", "--after-any"}}) {
    if (!*text) continue;
    if (**text == "none") {
      body[key] = json::array();
      continue;
    }
    Result<std::vector<int64_t>> deps = ParseIdList({**text});
    if (!deps.ok()) {
      return Fail(Status::Invalid(fmt::format("{}: {}", option, deps.status().message())));
    }
    body[key] = *deps;
  }
  if (a.hold) body["hold"] = *a.hold;
  if (body.empty()) {
    return Fail(Status::Invalid(
        "nothing to change: give --priority, --gpus, --mem, --cpus, --time, --name, --after or "
        "--after-any"));
  }
  int rc = 0;
  json results = json::array();
  for (int64_t id : *ids) {
    Result<json> r = client.Call("POST", api::JobPath(id, "update"), DumpJson(body));
    if (!r.ok()) {
      rc = std::max(rc, Fail(r.status()));
      results.push_back(
          {{"id", id},
           {"error", {{"code", CodeName(r.status().code())}, {"message", r.status().message()}}}});
      continue;
    }
    results.push_back({{"id", id}, {"message", r->value("message", "")}, {"job", (*r)["job"]}});
    if (!a.json) rc = std::max(rc, PrintJobMessage(*r));
  }
  if (a.json) std::printf("%s\n", DumpJson(json{{"results", results}}, 2).c_str());
  return rc;
}

namespace {

// What `cancel --signal` and `requeue` send one job at a time (POST /v1/jobs/ID/ACTION); each
// job's outcome printed, or gathered for --json.
int ActEach(Client& client, const std::vector<int64_t>& ids, bool as_json,
            const std::function<std::string(int64_t)>& target) {
  int rc = 0;
  json results = json::array();
  for (int64_t id : ids) {
    Result<json> r = client.Call("POST", target(id));
    if (!r.ok()) {
      rc = std::max(rc, Fail(r.status()));
      if (as_json) {
        results.push_back(
            {{"id", id},
             {"error",
              {{"code", CodeName(r.status().code())}, {"message", r.status().message()}}}});
      }
      continue;
    }
    if (as_json) {
      results.push_back({{"id", id}, {"message", r->value("message", "")}, {"job", (*r)["job"]}});
    } else {
      rc = std::max(rc, PrintJobMessage(*r));
    }
  }
  return std::max(rc, PrintResults(results, as_json));
}

}  // namespace

int CmdRequeue(Client& client, const RequeueArgs& a) {
  std::string own = GetEnv("TRAINQ_JOB_ID");
  if (own.empty()) own = GetEnv("SLURM_JOB_ID");
  std::vector<std::string> texts = a.ids;
  if (texts.empty() && own.empty()) {
    return Fail(Status::Invalid(
        "requeue: give the job ids (or run it inside a job, where TRAINQ_JOB_ID names it)"));
  }
  if (texts.empty()) texts.push_back(own);
  Result<std::vector<int64_t>> ids = ParseIdList(texts);
  if (!ids.ok()) return Fail(ids.status());
  return ActEach(client, *ids, a.json, [&own](int64_t id) {
    return api::JobPath(id, "requeue") + (std::to_string(id) == own ? "?self=1" : "");
  });
}

int CmdCancel(Client& client, const JobSelection& s) {
  if (s.failed) return Fail(Status::Invalid("--failed: goes with retry"));
  if (s.batch && s.signal.empty()) return Fail(Status::Invalid("--batch: goes with --signal"));
  if (!s.signal.empty()) {
    Result<SignalOption> sig = ParseSignalOption(s.signal, "--signal");
    if (!sig.ok() || s.signal.find('@') != std::string::npos) {
      return Fail(sig.ok() ? Status::Invalid("--signal: cancel sends it now; give no @TIME")
                           : sig.status());
    }
    Result<std::vector<int64_t>> ids = Resolve(client, s, "signal", {"running"});
    if (!ids.ok()) return Fail(ids.status());
    return ActEach(client, *ids, s.json, [&](int64_t id) {
      return fmt::format("{}?signal={}{}", api::JobPath(id, "signal"), ShortSignalName(sig->signal),
                         s.batch || sig->batch_only ? "&batch=1" : "");
    });
  }
  if (OnlyGroup(s)) return CmdCancelGroup(client, s.group, s.json);
  Result<std::vector<int64_t>> ids =
      Resolve(client, s, "cancel", {"queued", "blocked", "starting", "running"});
  if (!ids.ok()) return Fail(ids.status());
  if (ids->empty()) return PrintResults(json::array(), s.json);
  Result<std::vector<JobOutcome>> outcomes = ActOnJobs(client, "cancel", *ids);
  if (!outcomes.ok()) return Fail(outcomes.status());
  int rc = 0;
  json results = json::array();
  for (const JobOutcome& o : *outcomes) {
    // A job a filter picked that ended meanwhile is not an error: it is no longer to cancel.
    if (!o.status.ok() && Filtered(s) && o.status.code() == Code::kConflict) continue;
    results.push_back(OutcomeJson(o));
    if (s.json) {
      if (!o.status.ok()) rc = std::max(rc, Fail(o.status));
      continue;
    }
    rc = std::max(rc, o.status.ok() ? PrintJobMessage(o.reply) : Fail(o.status));
  }
  return std::max(rc, PrintResults(results, s.json));
}

int CmdRetry(Client& client, const JobSelection& s) {
  if (OnlyGroup(s)) return CmdRetryGroup(client, s.group, s.failed, s.json);
  if (s.failed && !s.state.empty()) {
    return Fail(Status::Invalid("--failed and --state: give one of them"));
  }
  std::set<std::string> fallback =
      s.failed ? std::set<std::string>{"failed"} : std::set<std::string>{"failed", "cancelled"};
  JobSelection chosen = s;
  if (s.failed) chosen.state = "failed";
  Result<std::vector<int64_t>> ids = Resolve(client, chosen, "retry", fallback);
  if (!ids.ok()) return Fail(ids.status());
  if (ids->empty()) return PrintResults(json::array(), s.json);
  Result<std::vector<JobOutcome>> outcomes = ActOnJobs(client, "retry", *ids);
  if (!outcomes.ok()) return Fail(outcomes.status());
  int rc = 0;
  json results = json::array();
  for (const JobOutcome& o : *outcomes) {
    results.push_back(OutcomeJson(o));
    if (s.json) {
      if (!o.status.ok()) rc = std::max(rc, Fail(o.status));
      continue;
    }
    rc = std::max(rc, o.status.ok() ? PrintJobMessage(o.reply) : Fail(o.status));
  }
  return std::max(rc, PrintResults(results, s.json));
}

namespace {

// The jobs `wait` watches: the ids given, or every job of --group.
Result<std::vector<int64_t>> WaitIds(Client& client, const WaitArgs& args) {
  if (args.ids.empty() == args.group.empty()) {
    return Status::Invalid("wait: give job ids or --group G, not both and not neither");
  }
  std::vector<int64_t> ids;
  for (const std::string& text : args.ids) {
    for (size_t start = 0;;) {
      size_t comma = text.find(',', start);
      Result<int64_t> id = ParseJobId(text.substr(start, comma - start));
      if (!id.ok()) return id.status();
      ids.push_back(*id);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (args.group.empty()) return ids;
  Result<int64_t> group = GroupId(args.group);
  if (!group.ok()) return group.status();
  Result<std::vector<json>> jobs = GroupJobs(client, *group);
  if (!jobs.ok()) return jobs.status();
  for (const json& job : *jobs) ids.push_back(job.value("id", int64_t{0}));
  return ids;
}

}  // namespace

namespace {

// `wait --json`: each job that ended, its state and exit code, and wait's own exit code.
void PrintWaited(const std::vector<int64_t>& ids, const std::vector<std::string>& states,
                 const std::vector<std::optional<int>>& codes, int rc) {
  json jobs = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!codes[i]) continue;
    jobs.push_back({{"id", ids[i]}, {"state", states[i]}, {"exit_code", *codes[i]}});
  }
  std::printf("%s\n", DumpJson(json{{"jobs", std::move(jobs)}, {"exit_code", rc}}, 2).c_str());
}

}  // namespace

int CmdWait(Client& client, const WaitArgs& args) {
  Result<std::vector<int64_t>> ids = WaitIds(client, args);
  if (!ids.ok()) return Fail(ids.status());
  std::vector<std::optional<int>> codes(ids->size());
  std::vector<std::string> states(ids->size());
  for (;;) {
    size_t open = 0;
    for (size_t i = 0; i < ids->size(); ++i) {
      if (codes[i]) continue;
      Result<json> job = client.Call("GET", api::JobPath((*ids)[i]));
      if (!job.ok()) return Fail(job.status());
      // Checked: a reply without a state (another version's) would be waited on forever.
      Reply reply(*job);
      std::string state = reply.Str("state");
      if (!reply.ok()) return Fail(reply.status());
      if (!Done(state)) {
        ++open;
        continue;
      }
      codes[i] = JobExitCode(*job);
      states[i] = state;
      std::fprintf(stderr, "trainq: job %lld %s\n", static_cast<long long>((*ids)[i]),
                   states[i].c_str());
      if (args.any) {
        if (args.json) PrintWaited(*ids, states, codes, *codes[i]);
        return *codes[i];
      }
    }
    if (open == 0) break;
    Sleep(500);
  }
  int rc = 0;
  for (const std::optional<int>& code : codes) {
    if (*code != 0) {
      rc = *code;
      break;
    }
  }
  if (args.json) PrintWaited(*ids, states, codes, rc);
  return rc;
}

// --- run ---

namespace {

std::atomic<int> g_interrupts{0};

void OnInterrupt(int) { g_interrupts.fetch_add(1); }

// What `run` shows while the job waits: one line that updates in place on a terminal, a
// new line only when it changes elsewhere.
class StatusLine {
 public:
  StatusLine() : tty_(IsTerminal(2)) {}
  void Show(const std::string& text) {
    if (text == last_) return;
    last_ = text;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", text.c_str());
      shown_ = true;
    } else {
      std::fprintf(stderr, "%s\n", text.c_str());
    }
    std::fflush(stderr);
  }
  void Clear() {
    if (tty_ && shown_) std::fputs("\r\033[K", stderr);
    shown_ = false;
    last_.clear();
  }

 private:
  bool tty_;
  bool shown_ = false;
  std::string last_;
};

std::string Ordinal(int64_t n) {
  const char* suffix = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    if (n % 10 == 1) suffix = "st";
    if (n % 10 == 2) suffix = "nd";
    if (n % 10 == 3) suffix = "rd";
  }
  return std::to_string(n) + suffix;
}

// "job 12 queued, 3rd in line: needs 1 GPU with 20.0 GiB usable; best: ..."
std::string WaitingText(Client& client, int64_t id, const json& job) {
  std::string state = job.value("state", "");
  std::string reason = TerminalSafe(job.value("reason", ""));
  std::string where;
  if (state == "queued") {
    Result<json> e = client.Call("GET", api::JobPath(id, "explain"));
    if (e.ok() && e->contains("position") && (*e)["position"].is_number_integer() &&
        (*e)["position"].get<int64_t>() > 0) {
      where = ", " + Ordinal((*e)["position"].get<int64_t>()) + " in line";
    }
  }
  return fmt::format("trainq: job {} {}{}{}{}", id, state, where, reason.empty() ? "" : ": ",
                     reason);
}

// The attempt being followed: its number and log.
struct Following {
  int64_t n = 0;
  std::unique_ptr<LogFollower> log;
};

// Streams the current attempt's new output; a new attempt (an OOM retry) gets a new follower.
void StreamAttempt(Client& client, int64_t id, const json& job, Following& f) {
  const json& attempts = job.contains("attempts") ? job["attempts"] : json::array();
  if (!attempts.is_array() || attempts.empty()) return;
  const json& a = attempts.back();
  int64_t n = a.value("n", int64_t{0});
  if (n != f.n) {
    if (f.log) f.log->Poll(stdout);
    if (f.n != 0)
      std::fprintf(stderr, "trainq: job %lld attempt %lld\n", static_cast<long long>(id),
                   static_cast<long long>(n));
    f.n = n;
    f.log = AttemptFollower(client, id, n, a.value("log_path", ""));
  }
  f.log->Poll(stdout);
  std::fflush(stdout);
}

// Ctrl-C once cancels the job; twice, detaches. Returns an exit code once `run` should end.
std::optional<int> OnInterrupts(Client& client, int64_t id, int& seen, StatusLine& status) {
  int now = g_interrupts.load();
  if (now == seen) return std::nullopt;
  seen = now;
  status.Clear();
  if (now >= 2) {
    std::fprintf(
        stderr, "trainq: detached; job %lld goes on (trainq logs -f %lld, trainq wait %lld)\n",
        static_cast<long long>(id), static_cast<long long>(id), static_cast<long long>(id));
    return 130;
  }
  Result<json> r = client.Call("POST", api::JobPath(id, "cancel"));
  if (!r.ok() && r.status().code() != Code::kConflict) return Fail(r.status());
  std::fprintf(stderr, "trainq: cancelling job %lld; Ctrl-C again to detach and leave it running\n",
               static_cast<long long>(id));
  return std::nullopt;
}

int Attach(Client& client, int64_t id) {
  StatusLine status;
  Following following;
  int seen = 0;
  for (;;) {
    if (std::optional<int> rc = OnInterrupts(client, id, seen, status)) return *rc;
    Result<json> job = client.Call("GET", api::JobPath(id));
    // A Ctrl-C can break the call it lands in: what it asks for comes first.
    if (!job.ok() && g_interrupts.load() != seen) continue;
    if (!job.ok()) return Fail(job.status());
    std::string state = job->value("state", "");
    if (state == "queued" || state == "blocked") {
      status.Show(WaitingText(client, id, *job));
      Sleep(seen > 0 ? 100 : 500);
      continue;
    }
    status.Clear();
    StreamAttempt(client, id, *job, following);
    if (!Done(state)) {
      Sleep(200);
      continue;
    }
    int code = JobExitCode(*job);
    if (state == "cancelled" && seen > 0) code = 130;
    if (code != 0) {
      std::fprintf(stderr, "trainq: job %lld %s: %s\n", static_cast<long long>(id), state.c_str(),
                   TerminalSafe(job->value("reason", "")).c_str());
    }
    return code;
  }
}

}  // namespace

int CmdRun(Client& client, const SubmitArgs& args) {
  if (!args.from.empty() || !args.sweeps.empty() || !args.array.empty()) {
    return Fail(
        Status::Invalid("run: attaches to one job; for --from, --sweep or --array use "
                        "'trainq submit', then 'trainq wait --group G'"));
  }
  Result<json> body = SubmitBody(args);
  if (!body.ok()) return Fail(body.status());
  if (Status st = ApplySnapshot(client, args, *body); !st.ok()) return Fail(st);
  // Installed before the submit, so a Ctrl-C while it is sent still cancels the job.
  constexpr int kInterrupt[] = {SIGINT};
  CatchSignals(kInterrupt, OnInterrupt, /*restart_calls=*/true);  // API calls in flight go on
  Result<int64_t> id = SubmitOne(client, *body);
  if (!id.ok()) return Fail(id.status());
  std::fprintf(stderr, "trainq: job %lld submitted\n", static_cast<long long>(*id));
  return Attach(client, *id);
}

// --- shell ---

namespace {

// What `trainq shell` runs without a command: the shell the user works in, as salloc does.
// In a container this machine's shell may not exist: the image's bash, else its sh.
std::vector<std::string> SessionShell(bool in_image) {
  if (in_image) {
    return {"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh"};
  }
  if (const char* shell = std::getenv("SHELL"); shell != nullptr && shell[0] == '/') {
    return {shell};
  }
  if (Result<UserInfo> me = LookupUserById(RealUid()); me.ok() && !me->shell.empty()) {
    return {me->shell};
  }
  return {"/bin/sh"};
}

// "job 12 on node gpu1, GPU 0,1": the line a session starts with.
std::string StartedText(int64_t id, const json& job) {
  Reply reply(job);
  std::vector<Reply> attempts = reply.ArrayOr("attempts");
  if (attempts.empty()) return fmt::format("trainq: job {} started", id);
  const Reply& a = attempts.back();
  std::vector<std::string> gpus;
  for (const Reply& g : a.ArrayOr("gpu_indices")) gpus.push_back(g.AsText());
  std::string node = a.OptStr("node").value_or("");
  return fmt::format(
      "trainq: job {} on {}{}", id, node.empty() ? "this machine" : "node " + TerminalSafe(node),
      gpus.empty() ? std::string(", no GPU") : fmt::format(", GPU {}", fmt::join(gpus, ",")));
}

int RunSession(Client& client, const json& body);

}  // namespace

int CmdShell(Client& client, const ShellArgs& args) {
  SubmitArgs a = args.submit;
  if (a.command.empty()) a.command = SessionShell(!a.image.empty());
  Result<json> body = SubmitBody(a);
  if (!body.ok()) return Fail(body.status());
  (*body)["interactive"] = true;
  if (args.no_log) (*body)["no_log"] = true;
  if (Status st = ApplySnapshot(client, a, *body); !st.ok()) return Fail(st);
  return RunSession(client, *body);
}

namespace {

// Submits session `body`, waits for its place, then joins this terminal to it.
int RunSession(Client& client, const json& body) {
  // The terminal's bytes go to the shim's socket on the daemon's machine.
  if (!client.Local()) {
    return Fail(Status::Invalid(fmt::format(
        "a session's terminal is reached on the daemon's own machine, and {} is reached over "
        "the network; run the command there (ssh -t HOST trainq shell ...)",
        client.Describe())));
  }
  constexpr int kInterrupt[] = {SIGINT};
  // Qualified: slurm_tools.cc has a CatchSignals of its own, and unity builds join the two.
  trainq::CatchSignals(kInterrupt, OnInterrupt, /*restart_calls=*/true);
  Result<int64_t> id = SubmitOne(client, body);
  if (!id.ok()) return Fail(id.status());
  StatusLine status;
  int seen = 0;
  for (;;) {
    // Ctrl-C while it waits gives the place in line up, as srun's does.
    if (g_interrupts.load() != seen) {
      seen = g_interrupts.load();
      status.Clear();
      Result<json> r = client.Call("POST", api::JobPath(*id, "cancel"));
      if (!r.ok() && r.status().code() != Code::kConflict) return Fail(r.status());
      std::fprintf(stderr, "trainq: job %lld cancelled\n", static_cast<long long>(*id));
      return 130;
    }
    Result<json> job = client.Call("GET", api::JobPath(*id));
    if (!job.ok() && g_interrupts.load() != seen) continue;
    if (!job.ok()) return Fail(job.status());
    std::string state = job->value("state", "");
    if (Done(state)) {
      status.Clear();
      std::fprintf(stderr, "trainq: job %lld %s: %s\n", static_cast<long long>(*id), state.c_str(),
                   TerminalSafe(job->value("reason", "")).c_str());
      return JobExitCode(*job);
    }
    Result<json> session = state == "running" ? client.Call("GET", api::JobPath(*id, "session"))
                                              : Result<json>(Status::Conflict("waiting"));
    if (!session.ok() && session.status().code() != Code::kConflict) {
      status.Clear();
      return Fail(session.status());
    }
    if (!session.ok()) {
      status.Show(WaitingText(client, *id, *job));
      Sleep(state == "running" ? 100 : 500);
      continue;
    }
    status.Clear();
    // The shim on this machine is reached directly; on another node, through the daemon,
    // which carries the bytes to that node.
    Upgraded link;
    if (session->contains("socket")) {
      Result<int> fd = ConnectSession(Reply(*session).Str("socket"), 10000);
      if (!fd.ok()) return Fail(fd.status());
      link.fd = *fd;
    } else {
      Result<Upgraded> up = client.Upgrade(api::JobPath(*id, "session"), kSessionProtocol);
      if (!up.ok()) return Fail(up.status());
      link = std::move(*up);
    }
    std::fprintf(stderr, "%s\n", StartedText(*id, *job).c_str());
    return RelaySession(link.fd, link.early);
  }
}

}  // namespace

// --- sbatch ---

namespace {

// Runs the script as submitted (a copy made when it starts, as Slurm runs its spool copy, in
// a folder of its own that srun keeps its step numbers in),
// with its output also in the files --output and --error name, so `trainq logs` and the
// out-of-memory check still see it. $1 is the script's text; the rest its arguments. The tees
// are in pipelines the shell waits for, so no output is lost when the script ends; a script
// killed by a signal ends the wrapper by the same signal.
std::string SbatchWrapper(const SbatchOptions& o, const std::string& name, const std::string& user,
                          bool array) {
  std::string out = !o.output.empty() ? o.output : array ? "slurm-%A_%a.out" : "slurm-%j.out";
  std::string text = "out=" + ShellPathOf(out, name, user) + "; ";
  // With --container-image the script runs in the container the daemon describes
  // (TRAINQ_CONTAINER_RUN: its run line up to the image), its copy mounted read-only.
  std::string run =
      "if [ -n \"${TRAINQ_CONTAINER_RUN:-}\" ]; then mapfile -t c < \"$TRAINQ_CONTAINER_RUN\"; "
      "\"${c[@]:0:${#c[@]}-1}\" --volume \"$TRAINQ_SLURM_DIR:$TRAINQ_SLURM_DIR:ro\" "
      "--env SLURM_TASK_PID --env SLURM_JOB_UID --env SLURM_JOB_GID --env TRAINQ_SLURM_DIR "
      "\"${c[-1]}\" \"$script\" \"$@\"; else \"$script\" \"$@\"; fi";
  // A requeued job's attempts append to its files, as Slurm's do.
  text += "t=(tee); [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ] || t+=(-a); ";
  std::string pipeline = run + " 2>&1 | \"${t[@]}\" -- \"$out\"";
  if (!o.error.empty() && o.error != out) {
    text += "err=" + ShellPathOf(o.error, name, user) + "; ";
    pipeline = "{ " + run + " 2>&1 1>&3 3>&- | \"${t[@]}\" -- \"$err\" 1>&2 3>&-; " +
               "exit \"${PIPESTATUS[0]}\"; } 3>&1 | \"${t[@]}\" -- \"$out\"";
  }
  // A part on another node than the first runs no script: it runs the steps srun gives it.
  return text +
         "if [ \"${SLURM_NODEID:-0}\" != 0 ]; then exec srun --trainq-node-steps; fi"
         "; export SLURM_TASK_PID=$$ SLURM_JOB_UID=\"$UID\" SLURM_JOB_GID=\"$(id -g)\""
         "; TRAINQ_SLURM_DIR=$(mktemp -d \"${TMPDIR:-/tmp}/trainq-sbatch.XXXXXX\") || exit 1"
         "; export TRAINQ_SLURM_DIR; script=\"$TRAINQ_SLURM_DIR/slurm_script\""
         "; printf '%s' \"$1\" > \"$script\" && chmod 700 \"$script\" || exit 1"
         "; shift; " +
         pipeline +
         "; rc=${PIPESTATUS[0]}; rm -rf \"$TRAINQ_SLURM_DIR\""
         "; if [ \"${SLURM_NNODES:-1}\" != 1 ]; then srun --trainq-steps-done; fi"
         "; if [ \"$rc\" -gt 128 ] && [ \"$rc\" -lt 160 ]; then kill -$((rc - 128)) $$; fi"
         "; exit \"$rc\"";
}

// The variables Slurm gives an array task that are the same for every task.
void ArrayVars(const ArraySpec& a, json& env) {
  int step = a.indices.size() > 1 ? a.indices[1] - a.indices[0] : 1;
  for (size_t i = 2; i < a.indices.size(); ++i) {
    if (a.indices[i] - a.indices[i - 1] != step) step = 1;  // a list: Slurm says 1
  }
  env["SLURM_ARRAY_TASK_COUNT"] = std::to_string(a.indices.size());
  env["SLURM_ARRAY_TASK_MIN"] = std::to_string(a.indices.front());
  env["SLURM_ARRAY_TASK_MAX"] = std::to_string(a.indices.back());
  env["SLURM_ARRAY_TASK_STEP"] = std::to_string(step);
}

// afterok:ID of an array waits for all its jobs, as in Slurm: a group's id becomes its jobs.
Result<json> DependencyIds(Client& client, const std::vector<int64_t>& ids) {
  json out = json::array();
  for (int64_t id : ids) {
    Result<json> r = client.Call("GET", api::JobsPath(fmt::format("all=1&group={}", id)));
    if (!r.ok()) return r.status();
    const json& jobs = (*r)["jobs"];
    if (!jobs.is_array() || jobs.empty()) {
      out.push_back(id);
      continue;
    }
    for (const json& job : jobs) out.push_back(job.value("id", int64_t{0}));
  }
  return out;
}

struct SbatchInput {
  SbatchOptions options;
  std::string script_path, script;
  std::vector<std::string> script_args;
};

Result<SbatchInput> ReadSbatchInput(const SbatchArgs& args) {
  SbatchInput in;
  SbatchOptions scratch;
  Result<size_t> at = ApplySbatchCommandLine(args.words, "the command line", scratch);
  if (!at.ok()) return at.status();
  if (*at == args.words.size()) {
    return Status::Invalid("sbatch: give the batch script: trainq sbatch [OPTIONS] SCRIPT [ARGS]");
  }
  in.script_path = args.words[*at];
  in.script_args.assign(args.words.begin() + *at + 1, args.words.end());
  Result<std::string> text = ReadFile(in.script_path);
  if (!text.ok()) {
    return Status::Invalid(fmt::format("sbatch: cannot read the script '{}': {}", in.script_path,
                                       text.status().message()));
  }
  in.script = std::move(*text);
  Status read = ReadSbatchScript(in.script, in.options);
  if (!read.ok()) return Status::Invalid(in.script_path + ": " + read.message());
  // The command line's options win over the script's, as in sbatch.
  std::vector<std::string> cli(args.words.begin(), args.words.begin() + *at);
  TRAINQ_RETURN_IF_ERROR(ApplySbatchOptions(cli, "the command line", in.options));
  return in;
}

// An --output/--error file in a folder that does not exist would fail the job when it starts
// (as it does in Slurm): refused now, with the line that named it. A folder named with %
// patterns is known only then.
Status CheckOutputFolder(const SbatchOptions& o, std::string_view option,
                         const std::string& pattern) {
  size_t slash = pattern.rfind('/');
  if (pattern.empty() || slash == std::string::npos || slash == 0) return Status::Ok();
  std::string dir = pattern.substr(0, slash);
  if (dir.find('%') != std::string::npos) return Status::Ok();
  std::string base = o.chdir.empty() ? CurrentDirectory() : o.chdir;
  std::string full = dir[0] == '/' ? dir : base + "/" + dir;
  if (IsDirectory(full)) return Status::Ok();
  auto it = o.origin.find(std::string(option));
  std::string where = it != o.origin.end() ? it->second : "--" + std::string(option);
  return Status::Invalid(fmt::format(
      "{}: the folder {} does not exist, so the job could write no output there; create it "
      "first (mkdir -p {})",
      where, TerminalSafe(full), TerminalSafe(dir)));
}

// The submit request for the script: one job, or one per array index in a new group.
// The submit request sbatch's (and salloc's) options ask for, all but the command: named
// `name`, with the SLURM_* variables Slurm fixes at submit.
Result<json> SlurmBody(Client& client, const SbatchOptions& o, const std::string& name) {
  TRAINQ_RETURN_IF_ERROR(CheckOutputFolder(o, "output", o.output));
  TRAINQ_RETURN_IF_ERROR(CheckOutputFolder(o, "error", o.error));
  SubmitArgs a;
  a.cwd = o.chdir;
  a.command = {"x"};
  a.stage = o.stage;
  a.collect = o.collect;
  a.collect_to = o.collect_to;
  a.snapshot = "off";  // sbatch copies the script, not the tree
  Result<json> body = SubmitBody(a);
  if (!body.ok()) return body.status();
  // #TRAINQ --stage: the manifests made here, as `trainq submit --stage` makes them.
  TRAINQ_RETURN_IF_ERROR(ApplySnapshot(client, a, *body));
  Result<SbatchAllocation> alloc = AllocationOf(o);
  if (!alloc.ok()) return alloc.status();
  // A node range (#SBATCH --nodes=MIN-MAX) is an elastic gang that grows only at its start;
  // a job without GPUs on each node is no gang, and takes MIN nodes as before.
  bool range = o.max_nodes && alloc->gpus_per_node > 0;
  if (o.max_nodes && !range) {
    std::fprintf(stderr,
                 "trainq: warning: --nodes=%d-%d: a range needs GPUs on each node (--gres, "
                 "--gpus-per-node); this job takes exactly %d node%s\n",
                 alloc->nodes, *o.max_nodes, alloc->nodes, alloc->nodes == 1 ? "" : "s");
  }
  json& env = (*body)["env"];
  env["SLURM_SUBMIT_DIR"] = CurrentDirectory();
  env["SLURM_SUBMIT_HOST"] = HostName();
  // What srun reads to lay out its tasks (and what Slurm gives the script): fixed at submit.
  if (o.cpus_per_task) env["SLURM_CPUS_PER_TASK"] = std::to_string(*o.cpus_per_task);
  // A node range's are set when it starts, from the nodes it got (SetSlurmVars).
  if ((o.ntasks || o.ntasks_per_node) && !range) {
    env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = std::to_string(alloc->ntasks);
  }
  if (o.ntasks_per_node) env["SLURM_NTASKS_PER_NODE"] = std::to_string(*o.ntasks_per_node);
  if (o.gpus_per_task) env["SLURM_GPUS_PER_TASK"] = std::to_string(*o.gpus_per_task);
  if (!range) env["SLURM_TASKS_PER_NODE"] = CompressCounts(alloc->tasks_per_node);
  (*body)["name"] = name;
  (*body)["gpus"] = alloc->gpus_per_node;  // as in Slurm, no GPU unless asked
  if (!o.mem_per_gpu.empty() && alloc->gpus_per_node > 0) (*body)["mem"] = o.mem_per_gpu;
  if (alloc->cpus_per_node > 0) (*body)["cpus"] = alloc->cpus_per_node;
  if (o.time_limit_ms) (*body)["time"] = fmt::format("{}ms", *o.time_limit_ms);
  if (o.nodes || alloc->nodes > 1) (*body)["num_nodes"] = alloc->nodes;
  if (range) (*body)["max_nodes"] = *o.max_nodes;
  if (!o.nodelist.empty()) (*body)["nodes"] = o.nodelist;
  if (!o.exclude.empty()) (*body)["exclude_nodes"] = o.exclude;
  if (!o.gpu_type.empty() && alloc->gpus_per_node > 0) (*body)["gpu_type"] = o.gpu_type;
  if (!o.constraints.empty()) (*body)["constraints"] = o.constraints;
  if (!o.container_image.empty()) {
    // As --image: a file here is an archive, by its absolute path.
    std::string image = o.container_image;
    std::string here = CurrentDirectory() + "/" + image;
    if (!image.starts_with('/') && FileExists(here)) image = here;
    (*body)["image"] = image;
  }
  if (!o.container_mounts.empty()) (*body)["mounts"] = o.container_mounts;
  if (!o.container_workdir.empty()) (*body)["container_workdir"] = o.container_workdir;
  if (!o.mail_user.empty()) (*body)["mail"] = o.mail_user;
  if (!o.signal.empty()) (*body)["signal"] = o.signal;
  if (o.requeue) (*body)["requeue"] = *o.requeue;
  if (o.hold) (*body)["hold"] = true;
  Result<json> after = DependencyIds(client, o.after_ok);
  if (!after.ok()) return after.status();
  Result<json> after_any = DependencyIds(client, o.after_any);
  if (!after_any.ok()) return after_any.status();
  if (!after->empty()) (*body)["after"] = std::move(*after);
  if (!after_any->empty()) (*body)["after_any"] = std::move(*after_any);
  (*body)["slurm"] = true;
  env["SLURM_JOB_NAME"] = name;  // an array's tasks are NAME[INDEX] in trainq, NAME in Slurm
  return body;
}

Result<json> SbatchBody(Client& client, const SbatchInput& in) {
  const SbatchOptions& o = in.options;
  std::string name = o.job_name;
  if (name.empty()) name = in.script_path.substr(in.script_path.rfind('/') + 1);
  Result<json> body = SlurmBody(client, o, name);
  if (!body.ok()) return body.status();
  json& env = (*body)["env"];
  // What `show` prints for the command: the script and its arguments, not the wrapper.
  json& record = (*body)["record"];
  if (!record.is_object()) record = json::object();
  std::string script =
      in.script_path.starts_with("/") ? in.script_path : CurrentDirectory() + "/" + in.script_path;
  record["sbatch"] = {{"script", script}, {"args", in.script_args}};
  std::string user = GetEnv("USER");
  json command = {"/bin/bash", "-c", SbatchWrapper(o, name, user, !o.array.empty()),
                  "trainq-sbatch", in.script};
  for (const std::string& arg : in.script_args) command.push_back(arg);
  (*body)["command"] = std::move(command);
  if (o.array.empty()) return body;
  Result<ArraySpec> array = ParseArray(o.array, "--array");
  if (!array.ok()) return array.status();
  ArrayVars(*array, env);
  json jobs = json::array();
  for (int index : array->indices) {
    jobs.push_back({{"array_index", index}, {"name", fmt::format("{}[{}]", name, index)}});
  }
  (*body)["group"] = true;
  if (array->limit > 0) (*body)["group_limit"] = array->limit;
  return json{{"defaults", std::move(*body)}, {"jobs", std::move(jobs)}};
}

// A refusal of trainq's own flag (--cpus, --gpus, ...) told against the sbatch options that
// made it, with the line each was read from: the user wrote those, not trainq's flags.
Status AgainstTheScript(const Status& st, const SbatchOptions& o) {
  if (st.code() != Code::kInvalid) return st;
  static const std::vector<std::pair<std::string_view, std::vector<std::string_view>>> kMade = {
      {"--cpus:", {"cpus-per-task", "ntasks-per-node", "ntasks", "nodes"}},
      {"--gpus:", {"gres", "gpus", "gpus-per-node", "gpus-per-task", "ntasks-per-node", "ntasks"}},
      {"--nodes:", {"nodes", "ntasks", "ntasks-per-node"}},
      {"--mem:", {"mem-per-gpu"}},
      {"--time:", {"time"}},
      {"--gpu-type:", {"gres", "gpus", "gpus-per-node"}},
      {"--constraint:", {"constraint"}},
      {"--image:", {"container-image"}},
      {"--mount:", {"container-mounts"}},
      {"--container-workdir:", {"container-workdir"}},
      {"--stage:", {"stage"}},
      {"--collect:", {"collect"}},
      {"--collect-to:", {"collect-to"}},
  };
  for (const auto& [flag, options] : kMade) {
    if (!st.message().starts_with(flag)) continue;
    std::vector<std::string> lines;
    for (std::string_view option : options) {
      auto it = o.origin.find(std::string(option));
      if (it != o.origin.end()) lines.push_back(it->second);
    }
    if (lines.empty()) return st;
    return Status::Invalid(
        fmt::format("{} cannot be met: {}", fmt::join(lines, "; "), st.message()));
  }
  return st;
}

}  // namespace

int CmdSbatch(Client& client, const SbatchArgs& args) {
  Result<SbatchInput> in = ReadSbatchInput(args);
  if (!in.ok()) return Fail(in.status());
  for (const std::string& w : in->options.warnings) {
    std::fprintf(stderr, "trainq sbatch: warning: %s\n", TerminalSafe(w).c_str());
  }
  const SbatchOptions& o = in->options;
  if (o.gpus.value_or(0) == 0 && o.gpus_total.value_or(0) == 0 && !o.gpus_per_task &&
      !o.mem_per_gpu.empty()) {
    std::fprintf(stderr,
                 "trainq sbatch: warning: --mem-per-gpu without GPUs (--gres=gpu:N or "
                 "--gpus) asks for none; ignored\n");
  }
  Result<json> body = SbatchBody(client, *in);
  if (!body.ok()) return Fail(body.status());
  Result<json> r = client.Submit(DumpJson(*body));
  if (!r.ok()) return Fail(AgainstTheScript(r.status(), o));
  Reply reply(*r);
  std::vector<Reply> ids = reply.Array("ids");
  std::optional<int64_t> group = reply.OptInt("group");
  if (!reply.ok()) return Fail(reply.status());
  if (ids.empty()) return Fail(Status::Internal("the daemon stored no job"));
  int64_t id = group ? *group : ids[0].AsInt();
  if (in->options.parsable) {
    std::printf("%lld\n", static_cast<long long>(id));
  } else {
    std::printf("Submitted batch job %lld\n", static_cast<long long>(id));
  }
  return 0;
}

// `trainq salloc [OPTIONS] [COMMAND]`: an allocation as Slurm's salloc gives it, sbatch's
// options, COMMAND (default: the user's shell) run in it as a session, with the SLURM_*
// variables, so that srun inside runs steps on it and `exit` gives it back.
int CmdSalloc(Client& client, const SbatchArgs& args) {
  SbatchOptions o;
  Result<size_t> at = ApplySbatchCommandLine(args.words, "the command line", o);
  if (!at.ok()) return Fail(at.status());
  for (const std::string& w : o.warnings) {
    std::fprintf(stderr, "trainq salloc: warning: %s\n", TerminalSafe(w).c_str());
  }
  if (o.max_nodes && o.nodes) {
    // A session does not wait for nodes to grow into: it takes the range's MIN.
    std::fprintf(stderr, "trainq salloc: warning: --nodes=%d-%d: an allocation takes exactly %d\n",
                 *o.nodes, *o.max_nodes, *o.nodes);
    o.max_nodes.reset();
  }
  if (!o.array.empty()) {
    return Fail(Status::Invalid(
        "--array: an allocation is one session; for one job per index use trainq sbatch --array"));
  }
  std::vector<std::string> command(args.words.begin() + static_cast<std::ptrdiff_t>(*at),
                                   args.words.end());
  if (command.empty()) command = SessionShell(!o.container_image.empty());
  std::string name = o.job_name.empty() ? DefaultJobName(command) : o.job_name;
  Result<json> body = SlurmBody(client, o, name);
  if (!body.ok()) return Fail(AgainstTheScript(body.status(), o));
  (*body)["interactive"] = true;
  (*body)["command"] = command;
  return RunSession(client, *body);
}

}  // namespace trainq
