#include "src/cli/commands.h"
#include "src/cli/api_paths.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/format.h"
#include "src/cli/log_follow.h"
#include "src/cli/reply.h"
#include "src/core/json_codec.h"
#include "src/core/spec.h"
#include "src/core/sweep.h"
#include "src/core/version.h"
#include "src/core/words.h"
#include "src/os/system.h"

namespace trainq {

using json = nlohmann::json;

int Fail(const Status& status) {
  std::fprintf(stderr, "trainq: %s\n", TerminalSafe(status.message()).c_str());
  return ExitCodeFor(status.code());
}

Result<int64_t> ParseJobId(const std::string& text) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || id <= 0) {
    return Status::Invalid(
        fmt::format("job id: '{}' is not a job id; use the number that "
                    "'trainq submit' printed (see 'trainq ls')",
                    text));
  }
  return id;
}

namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

Result<json> GetJob(Client& client, const std::string& id_text) {
  Result<int64_t> id = ParseJobId(id_text);
  if (!id.ok()) return id.status();
  return client.Call("GET", api::JobPath(*id));
}

// "12,13" (and repeated options) -> [12, 13]; kInvalid naming `option` otherwise.
Result<json> JobIdList(const std::vector<std::string>& values, const char* option) {
  json ids = json::array();
  for (const std::string& value : values) {
    for (const std::string& word : SplitList(value)) {
      Result<int64_t> id = ParseJobId(word);
      if (!id.ok()) {
        return Status::Invalid(
            fmt::format("{}: '{}' is not a job id; use {} ID[,ID...], e.g. "
                        "{} 12,13",
                        option, word, option, option));
      }
      ids.push_back(*id);
    }
  }
  return ids;
}

// "a,b" (and repeated options) -> ["a", "b"].
json NameList(const std::vector<std::string>& values) {
  json names = json::array();
  for (const std::string& value : values) {
    for (const std::string& word : SplitList(value)) names.push_back(word);
  }
  return names;
}

// The API carries text as JSON strings: bytes that are not UTF-8 are refused, never replaced,
// so a command never runs with other bytes than the user gave.
Status CheckUtf8(std::string_view field, std::string_view text, std::string_view hint = "") {
  std::optional<std::string> problem = Utf8Problem(text);
  if (!problem) return Status::Ok();
  return Status::Invalid(
      fmt::format("{}: {}; trainq carries commands, names and environment as "
                  "UTF-8 text{}",
                  field, *problem, hint));
}

Status CheckSubmitText(const SubmitArgs& a, const json& env, const std::string& cwd) {
  for (size_t i = 0; i < a.command.size(); ++i) {
    TRAINQ_RETURN_IF_ERROR(CheckUtf8(fmt::format("command[{}]", i), a.command[i]));
  }
  TRAINQ_RETURN_IF_ERROR(CheckUtf8("--name", a.name));
  TRAINQ_RETURN_IF_ERROR(CheckUtf8("--cwd", cwd));
  for (const auto& [k, v] : env.items()) {
    std::string hint = fmt::format(" (unset it or give --env {}=VALUE)", TerminalSafe(k));
    TRAINQ_RETURN_IF_ERROR(CheckUtf8("environment variable name", k, hint));
    TRAINQ_RETURN_IF_ERROR(CheckUtf8("environment variable " + k, v.get<std::string>(), hint));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// An --image that names a file here is an archive, sent as its absolute path; anything else
// is an image name for the node's store.
std::string ImageArgument(const std::string& image, const std::string& cwd) {
  if (image.starts_with('/')) return image;
  std::string path = std::filesystem::path(cwd + "/" + image).lexically_normal().string();
  return IsRegularFile(path) ? path : image;
}

}  // namespace

Result<json> SubmitBody(const SubmitArgs& a) {
  json env = json::object();
  for (const auto& [k, v] : CurrentEnvironment()) env[k] = v;
  // Where `trainq submit` ran, as Slurm's SLURM_SUBMIT_DIR: a job in a snapshot's copy
  // still finds the project.
  env["TRAINQ_SUBMIT_DIR"] = CurrentDirectory();
  for (const std::string& e : a.env) {
    Result<std::pair<std::string, std::string>> kv = ParseEnvAssignment(e);
    if (!kv.ok()) return kv.status();
    env[kv->first] = kv->second;
  }
  std::string cwd = a.cwd.empty() ? CurrentDirectory() : a.cwd;
  if (cwd[0] != '/') cwd = CurrentDirectory() + "/" + cwd;
  TRAINQ_RETURN_IF_ERROR(CheckSubmitText(a, env, cwd));
  json body = {{"command", a.command},   {"cwd", cwd},          {"env", env}, {"gpus", a.gpus},
               {"priority", a.priority}, {"retries", a.retries}};
  if (a.max_gpus != 0) body["max_gpus"] = a.max_gpus;
  if (a.cpus) body["cpus"] = *a.cpus;
  if (!a.name.empty()) body["name"] = a.name;
  if (!a.mem.empty()) body["mem"] = a.mem;
  // A bare number is MiB, as in Slurm; under a GiB, the user meant GiB far more often.
  if (!a.mem.empty() && a.mem.find_first_not_of("0123456789") == std::string::npos &&
      a.mem.size() <= 4 && std::stoi(a.mem) > 0 && std::stoi(a.mem) < 1024) {
    std::fprintf(stderr,
                 "trainq: warning: --mem %s is %s MiB (a number without a unit is MiB, as in "
                 "Slurm); for GiB write --mem %sGiB\n",
                 a.mem.c_str(), a.mem.c_str(), a.mem.c_str());
  }
  if (!a.time.empty()) body["time"] = a.time;
  if (!a.mem_limit.empty()) body["mem_limit"] = a.mem_limit;
  if (a.max_procs) body["max_procs"] = *a.max_procs;
  Result<json> after = JobIdList(a.after, "--after");
  if (!after.ok()) return after.status();
  Result<json> after_any = JobIdList(a.after_any, "--after-any");
  if (!after_any.ok()) return after_any.status();
  if (!after->empty()) body["after"] = std::move(*after);
  if (!after_any->empty()) body["after_any"] = std::move(*after_any);
  // Names are judged by the daemon (ValidateSpec), like every other field.
  json nodes = NameList(a.nodes), exclude = NameList(a.exclude_nodes);
  if (!nodes.empty()) body["nodes"] = std::move(nodes);
  if (!exclude.empty()) body["exclude_nodes"] = std::move(exclude);
  if (a.num_nodes != 1) body["num_nodes"] = a.num_nodes;
  if (a.max_nodes != 0) body["max_nodes"] = a.max_nodes;
  if (!a.gpu_type.empty()) body["gpu_type"] = a.gpu_type;
  if (!a.constraints.empty()) body["constraints"] = a.constraints;
  if (!a.image.empty()) body["image"] = ImageArgument(a.image, cwd);
  if (!a.mounts.empty()) {
    json mounts = json::array();
    for (const std::string& m : a.mounts) mounts.push_back(m.starts_with('/') ? m : cwd + "/" + m);
    body["mounts"] = std::move(mounts);
  }
  if (!a.shm_size.empty()) body["shm_size"] = a.shm_size;
  if (!a.container_workdir.empty()) body["container_workdir"] = a.container_workdir;
  if (!a.collect.empty()) body["collect"] = a.collect;
  if (!a.collect_to.empty()) {
    body["collect_to"] = a.collect_to.starts_with('/') ? a.collect_to : cwd + "/" + a.collect_to;
  }
  if (!a.notify.empty()) body["notify"] = a.notify;
  if (!a.mail.empty()) body["mail"] = a.mail;
  if (!a.signal.empty()) body["signal"] = a.signal;
  if (a.requeue) body["requeue"] = true;
  if (a.hold) body["hold"] = true;
  if (a.preemptible) body["preemptible"] = *a.preemptible;
  if (!a.checkpoint.empty()) body["checkpoint"] = a.checkpoint;
  return body;
}

namespace {

// The jobs of a --from file (or standard input, "-"): blank lines and # comments are skipped;
// `lines` gets each job's line number, for errors the daemon reports as "jobs[i]".
Result<json> JobsFromFile(const std::string& path, std::vector<int>& lines) {
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    if (!file) return Status::Invalid(fmt::format("--from: cannot read '{}'", path));
  }
  std::istream& in = path == "-" ? std::cin : file;
  const std::string shown = path == "-" ? "standard input" : path;
  json jobs = json::array();
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    // A script would become one job per line, none of them what the author meant.
    if (n == 1 && line.starts_with("#!")) {
      return Status::Invalid(fmt::format(
          "--from: {} is a script (it starts with #!), and --from queues each line as a job; "
          "queue the script as one job: trainq submit [options] -- {}",
          shown,
          path == "-"                           ? "./SCRIPT"
          : path.find('/') == std::string::npos ? "./" + path
                                                : path));
    }
    if (line.starts_with("#SBATCH")) {
      return Status::Invalid(fmt::format(
          "--from: {} line {} is an #SBATCH line: a Slurm batch script, not a list of jobs; "
          "run it with: trainq sbatch {}",
          shown, n, path == "-" ? "SCRIPT" : path));
    }
    size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    std::string where = fmt::format("--from {} line {}", shown, n);
    TRAINQ_RETURN_IF_ERROR(CheckUtf8(where, line));
    lines.push_back(n);
    if (line[start] == '{') {
      json job = json::parse(line, nullptr, false);
      if (job.is_discarded() || !job.is_object()) {
        return Status::Invalid(where + ": not a JSON object");
      }
      jobs.push_back(std::move(job));
      continue;
    }
    Result<std::vector<std::string>> words = SplitWords(line, where);
    if (!words.ok()) return words.status();
    jobs.push_back({{"command", std::move(*words)}});
  }
  if (jobs.empty()) return Status::Invalid(fmt::format("--from: {} has no jobs", shown));
  return jobs;
}

// One request for the whole file, so one transaction: the options are every job's defaults.
int SubmitFromFile(Client& client, const SubmitArgs& args, json defaults) {
  if (!args.command.empty()) {
    return Fail(Status::Invalid("--from: give either --from FILE or a command after --, not both"));
  }
  std::vector<int> lines;
  Result<json> jobs = JobsFromFile(args.from, lines);
  if (!jobs.ok()) return Fail(jobs.status());
  defaults.erase("command");
  // One --name for many jobs: numbered in file order, as an array's tasks are.
  if (defaults.contains("name") && jobs->size() > 1) {
    std::string base = defaults["name"].get<std::string>();
    defaults.erase("name");
    for (size_t i = 0; i < jobs->size(); ++i) {
      json& job = (*jobs)[i];
      if (!job.contains("name")) job["name"] = fmt::format("{}-{}", base, i + 1);
    }
  }
  json body = {{"defaults", std::move(defaults)}, {"jobs", std::move(*jobs)}};
  const std::string shown = args.from == "-" ? "standard input" : args.from;
  return SubmitBatch(client, std::move(body), args.json, [&](size_t i) {
    return i < lines.size() ? fmt::format("--from {} line {}", shown, lines[i])
                            : fmt::format("jobs[{}]", i);
  });
}

}  // namespace

namespace {

// --sweep and --array: one job per combination, all in one new group.
Result<json> ExpandedBatch(const SubmitArgs& args, json defaults) {
  std::vector<SweepAxis> axes;
  for (const std::string& text : args.sweeps) {
    Result<SweepAxis> axis = ParseSweep(text);
    if (!axis.ok()) return axis.status();
    axes.push_back(std::move(*axis));
  }
  std::optional<ArraySpec> array;
  if (!args.array.empty()) {
    Result<ArraySpec> parsed = ParseArray(args.array);
    if (!parsed.ok()) return parsed.status();
    array = std::move(*parsed);
  }
  Result<std::vector<ExpandedJob>> jobs = ExpandJobs(args.command, axes, array ? &*array : nullptr);
  if (!jobs.ok()) return jobs.status();
  std::string base = args.name.empty() ? DefaultJobName(args.command) : args.name;
  json list = json::array();
  for (ExpandedJob& job : *jobs) {
    json one = {{"command", std::move(job.command)}, {"name", base + " " + job.label}};
    if (job.array_index >= 0) one["array_index"] = job.array_index;
    list.push_back(std::move(one));
  }
  defaults.erase("command");
  defaults.erase("name");
  defaults["group"] = true;
  if (array && array->limit > 0) defaults["group_limit"] = array->limit;
  return json{{"defaults", std::move(defaults)}, {"jobs", std::move(list)}};
}

}  // namespace

namespace {

// The daemon names a batch's job by its index ("jobs[3]: --mem: ..."); `where` says where the
// user wrote it instead.
Status NameJobsInError(const Status& st, const std::function<std::string(size_t)>& where) {
  const std::string& text = st.message();
  size_t index = 0;
  if (!text.starts_with("jobs[")) return st;
  auto [end, ec] = std::from_chars(text.data() + 5, text.data() + text.size(), index);
  if (ec != std::errc() || !std::string_view(end, text.data() + text.size()).starts_with("]")) {
    return st;
  }
  return Status(st.code(), where(index) + std::string(end + 1, text.data() + text.size()));
}

}  // namespace

Result<int64_t> SubmitOne(Client& client, const json& body) {
  Result<json> r = client.Submit(DumpJson(body));
  if (!r.ok()) return r.status();
  Reply reply(*r);
  std::vector<Reply> ids = reply.Array("ids");
  int64_t id = ids.size() == 1 ? ids[0].AsInt() : 0;
  if (reply.ok() && ids.size() != 1) {
    return Status::Internal(
        "the daemon's reply has field 'ids' without exactly one id; is trainqd the same "
        "version as trainq?");
  }
  if (!reply.ok()) return reply.status();
  return id;
}

int SubmitBatch(Client& client, json body, bool as_json,
                const std::function<std::string(size_t)>& where) {
  size_t jobs = body.contains("jobs") && body["jobs"].is_array() ? body["jobs"].size() : 1;
  Result<json> r = client.Submit(DumpJson(body), jobs);
  if (!r.ok()) return Fail(where ? NameJobsInError(r.status(), where) : r.status());
  Reply reply(*r);
  std::string out;
  json ids = json::array();
  for (const Reply& id : reply.Array("ids")) {
    out += std::to_string(id.AsInt()) + "\n";
    ids.push_back(id.AsInt());
  }
  std::optional<int64_t> group = reply.OptInt("group");
  if (!reply.ok()) return Fail(reply.status());
  if (as_json) {
    // A group's batch says its group; a --from file's is the array of ids alone.
    json doc = group ? json{{"ids", std::move(ids)}, {"group", *group}} : std::move(ids);
    std::printf("%s\n", DumpJson(doc).c_str());
    return 0;
  }
  std::fputs(out.c_str(), stdout);
  if (group) {
    std::fprintf(stderr, "trainq: group %lld: %zu jobs (trainq ls --group %lld)\n",
                 static_cast<long long>(*group), ids.size(), static_cast<long long>(*group));
  }
  return 0;
}

int CmdSubmit(Client& client, const SubmitArgs& args) {
  Result<json> body = SubmitBody(args);
  if (!body.ok()) return Fail(body.status());
  if (Status st = ApplySnapshot(client, args, *body); !st.ok()) return Fail(st);
  if (!args.from.empty()) {
    if (!args.sweeps.empty() || !args.array.empty()) {
      return Fail(
          Status::Invalid("--from: --sweep and --array expand one command; give them "
                          "without --from"));
    }
    return SubmitFromFile(client, args, std::move(*body));
  }
  if (!args.sweeps.empty() || !args.array.empty()) {
    Result<json> batch = ExpandedBatch(args, std::move(*body));
    if (!batch.ok()) return Fail(batch.status());
    return SubmitBatch(client, std::move(*batch), args.json);
  }
  Result<int64_t> submitted = SubmitOne(client, *body);
  if (!submitted.ok()) return Fail(submitted.status());
  int64_t id = *submitted;
  if (!args.json) {
    std::printf("%lld\n", static_cast<long long>(id));
    return 0;
  }
  Result<json> job = client.CallRunning("GET", api::JobPath(id));
  if (!job.ok()) return Fail(job.status());
  std::printf("%s\n", DumpJson(*job, 2).c_str());
  return 0;
}

namespace {
constexpr int kTablePage = 200;  // rows `trainq ls` shows unless --limit says otherwise

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int CmdList(Client& client, const ListArgs& args) {
  std::string target = api::JobsPath() + "?";
  if (!args.state.empty()) {
    target += "state=" + args.state + "&";
  } else if (args.all || args.newest) {
    // The newest jobs are the ones just finished as much as those waiting (pueue's status).
    target += "all=1&";
  }
  // A table is for people: a queue of 100,000 is shown a page at a time, so its listing costs
  // the daemon (and everyone else's commands) a page. Scripts (--json, -q) get every job.
  bool paged = args.limit < 0 && !args.json && !args.quiet && !args.newest;
  int limit = paged ? kTablePage : std::max(args.limit, 0);
  // The daemon lists oldest first; the N newest are the last N of the whole list. One more
  // than a page says whether there are more.
  if (limit > 0 && !args.newest) target += fmt::format("limit={}&", limit + (paged ? 1 : 0));
  if (!args.user.empty() && args.mine) {
    return Fail(Status::Invalid("--user and --mine: give one of them"));
  }
  if (!args.user.empty()) {
    if (Status st = CheckUtf8("--user", args.user); !st.ok()) return Fail(st);
    if (args.user.find_first_of("&=%# /") != std::string::npos) {
      return Fail(Status::Invalid("--user: '" + args.user + "' is not a user name"));
    }
    target += "user=" + args.user + "&";
  }
  if (args.mine) target += "mine=1&";
  if (!args.group.empty()) {
    Result<int64_t> group = ParseJobId(args.group);
    if (!group.ok()) {
      return Fail(Status::Invalid("--group: '" + args.group +
                                  "' is not a group; use the number 'submit' printed as group"));
    }
    // A group is looked at whole: its done jobs too, unless --state narrows it.
    target += fmt::format("group={}&", *group);
    if (args.state.empty() && !args.all) target += "all=1&";
  }
  target.pop_back();
  bool as_json = args.json;
  Result<json> r = client.Call("GET", target);
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  std::vector<Reply> jobs = reply.Array("jobs");
  if (!reply.ok()) return Fail(reply.status());
  json listed = r->at("jobs");
  if (args.newest) {
    std::reverse(jobs.begin(), jobs.end());
    std::reverse(listed.begin(), listed.end());
    if (limit > 0 && jobs.size() > static_cast<size_t>(limit)) {
      jobs.erase(jobs.begin() + limit, jobs.end());
      listed.erase(listed.begin() + limit, listed.end());
    }
  }
  bool more = paged && jobs.size() > static_cast<size_t>(kTablePage);
  if (more) {
    jobs.erase(jobs.begin() + kTablePage, jobs.end());
    listed.erase(listed.begin() + kTablePage, listed.end());
  }
  if (args.reverse) {
    std::reverse(jobs.begin(), jobs.end());
    std::reverse(listed.begin(), listed.end());
  }
  std::string out;
  if (args.quiet) {
    for (const Reply& job : jobs) out += job.Text("id") + "\n";
  } else {
    out = as_json ? DumpJson(listed, 2) + "\n"
                  : JobsTable(jobs, reply.BoolOr("cluster", false), NowUnixMs());
  }
  if (!reply.ok()) return Fail(reply.status());
  std::fputs(out.c_str(), stdout);
  if (more) {
    std::fprintf(stderr,
                 "(the %d oldest shown; there are more: --limit N shows N, --limit 0 all, "
                 "--newest the newest)\n",
                 kTablePage);
  }
  return 0;
}

namespace {

// Prints `text` if the reply it came from had the expected shape, else that reply's error.
int PrintChecked(const Reply& reply, const std::string& text) {
  if (!reply.ok()) return Fail(reply.status());
  std::fputs(text.c_str(), stdout);
  return 0;
}

// A reply's "message", e.g. "job 12 cancelled".
int PrintMessage(const json& doc) {
  Reply reply(doc);
  std::string message = reply.Str("message");
  return PrintChecked(reply, message + "\n");
}

}  // namespace

int PrintJobMessage(const json& doc) { return PrintMessage(doc); }

int CmdShow(Client& client, const std::string& id, bool as_json) {
  Result<json> job = GetJob(client, id);
  if (!job.ok()) return Fail(job.status());
  Reply reply(*job);
  return PrintChecked(reply, as_json ? DumpJson(*job, 2) + "\n" : JobDetails(reply, NowUnixMs()));
}

int CmdExplain(Client& client, const std::string& id_text, bool as_json) {
  Result<int64_t> id = ParseJobId(id_text);
  if (!id.ok()) return Fail(id.status());
  Result<json> doc = client.Call("GET", api::JobPath(*id, "explain"));
  if (!doc.ok()) return Fail(doc.status());
  Reply reply(*doc);
  return PrintChecked(reply, as_json ? DumpJson(*doc, 2) + "\n" : ExplainReport(reply));
}

namespace {

// What `trainq logs` needs of one attempt.
struct AttemptLog {
  int64_t n = 0;
  std::string log_path;
  bool active = false;             // starting or running: more output may come
  std::vector<std::string> parts;  // a gang's nodes in rank order; empty for one node
  std::string end_reason{};        // "" while it runs
};

// What `trainq logs` needs of a job: its attempt `n` (0: the latest), if it has one.
struct JobLog {
  int64_t id = 0;
  std::string state, reason;
  std::optional<AttemptLog> attempt;
  // The earlier attempts whose log this one's continues: those before it stopped by a requeue
  // or a preemption (oldest first).
  std::vector<AttemptLog> continued;
};

// Whether an attempt that ended so was stopped to run again: its log goes on in the next (an
// elastic job's resize is such a restart too).
bool Requeued(std::string_view end_reason) {
  return end_reason.starts_with("requeued by ") || end_reason.starts_with("preempted by job ") ||
         end_reason.starts_with("resized: ");
}

Result<JobLog> ReadJobLog(const json& doc, int64_t n) {
  Reply job(doc);
  JobLog out{job.Int("id"), job.Str("state"), job.OptStr("reason").value_or(""), std::nullopt, {}};
  std::vector<Reply> attempts = job.Array("attempts");
  for (size_t i = 0; i < attempts.size(); ++i) {
    const Reply& a = attempts[i];
    int64_t number = a.Int("n");
    std::string end = a.OptStr("end_reason").value_or("");
    if (n == 0 && i + 1 < attempts.size() && a.ArrayOr("parts").size() <= 1) {
      if (!Requeued(end)) out.continued.clear();
      if (Requeued(end)) {
        out.continued.push_back(AttemptLog{number, a.Str("log_path"), false, {}, end});
      }
    }
    if (n != 0 ? number != n : i + 1 != attempts.size()) continue;
    std::string state = a.Str("state");
    out.attempt =
        AttemptLog{number, a.Str("log_path"), state == "starting" || state == "running", {}, end};
    for (const Reply& part : a.ArrayOr("parts")) out.attempt->parts.push_back(part.Str("node"));
  }
  if (!job.ok()) return job.status();
  return out;
}

// A job that ended (cancelled while waiting) without ever starting: no log will come.
bool EndedUnstarted(const JobLog& job) {
  return job.state == "succeeded" || job.state == "failed" || job.state == "cancelled";
}

Status NoOutput(const JobLog& job) {
  if (EndedUnstarted(job)) {
    return Status::Conflict(
        fmt::format("job {} never started ({}): {}", job.id, job.state, job.reason));
  }
  return Status::Conflict(fmt::format("job {} has not started yet: {}", job.id, job.reason));
}

Result<JobLog> FetchJobLog(Client& client, const std::string& id, int64_t n) {
  Result<json> doc = GetJob(client, id);  // starts the daemon again if it went away meanwhile
  if (!doc.ok()) return doc.status();
  return ReadJobLog(*doc, n);
}

// An attempt's log read through the daemon: on a shared server the run dirs are root's, and
// a daemon over TCP is on another machine.
class ApiLogSource : public LogSource {
 public:
  // `part`: a gang's rank (0: the attempt's own log, part 0's).
  ApiLogSource(Client& client, int64_t job, int64_t attempt, int part = 0)
      : client_(client),
        base_(api::JobLogPath(job, attempt) + (part > 0 ? fmt::format("&part={}", part) : "")) {}
  std::optional<uint64_t> Size() override {
    Result<json> r = client_.Call("GET", base_ + "&size=1");
    if (!r.ok()) {
      if (!failed_) Fail(r.status());
      failed_ = true;
      return std::nullopt;
    }
    Reply reply(*r);
    int64_t size = reply.Int("size");
    if (!reply.ok() || size < 0) return std::nullopt;
    return static_cast<uint64_t>(size);
  }
  std::string ReadAt(uint64_t offset, size_t length) override {
    if (length == 0) return "";
    Result<std::string> r =
        client_.CallBytes("GET", fmt::format("{}&offset={}&length={}", base_, offset, length));
    return r.ok() ? *r : std::string();
  }
  bool failed() const { return failed_; }

 private:
  Client& client_;
  std::string base_;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<LogFollower> AttemptFollower(Client& client, int64_t job, int64_t attempt,
                                             const std::string& log_path) {
  if (client.Local() && IsReadable(log_path)) {
    return std::make_unique<LogFollower>(log_path);
  }
  if (client.Local() && !FileExists(log_path) && !client.Fixed()) {
    return std::make_unique<LogFollower>(log_path);  // not opened yet
  }
  return std::make_unique<LogFollower>(std::make_unique<ApiLogSource>(client, job, attempt));
}

namespace {

// The last `n` lines of `text` (all of it for n < 0).
std::string LastLines(const std::string& text, int n) {
  if (n < 0) return text;
  if (n == 0) return "";
  size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;  // the last line's own newline
  size_t at = end;
  for (int seen = 0; at > 0; --at) {
    if (text[at - 1] == '\n' && ++seen == n) break;
  }
  return text.substr(at);
}

}  // namespace

namespace {

// `--node`: a gang's part by its rank or its node's name; kInvalid naming the parts there are.
Result<int> PartOf(const JobLog& job, const std::string& node) {
  const AttemptLog& a = *job.attempt;
  std::vector<std::string> nodes = a.parts;
  if (nodes.empty()) nodes = {""};
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (node == std::to_string(r) || (!nodes[r].empty() && node == nodes[r])) {
      return static_cast<int>(r);
    }
  }
  std::vector<std::string> named;
  for (size_t r = 0; r < nodes.size(); ++r) {
    named.push_back(nodes[r].empty() ? std::to_string(r) : fmt::format("{} ({})", r, nodes[r]));
  }
  return Status::Invalid(fmt::format(
      "--node: '{}' is no part of job {} attempt {}; its parts are {}: give a rank or a node name",
      TerminalSafe(node), job.id, a.n, fmt::join(named, ", ")));
}

// Up to the last 8 MiB of one part's log, through the daemon.
Result<std::string> PartText(Client& client, int64_t job, int64_t n, int part, int tail) {
  std::string path =
      api::JobLogPath(job, n) + (part > 0 ? fmt::format("&part={}", part) : std::string());
  Result<json> size = client.Call("GET", path + "&size=1");
  if (!size.ok()) return size.status();
  uint64_t bytes = size->value("size", uint64_t{0});
  uint64_t from = bytes > (8u << 20) ? bytes - (8u << 20) : 0;
  Result<std::string> text =
      client.CallBytes("GET", path + fmt::format("&offset={}&length={}", from, 8u << 20));
  if (!text.ok()) return text.status();
  return LastLines(*text, tail);
}

// Every part of a gang's attempt, each line after "[RANK NODE] ", as it comes.
class PartsFollower {
 public:
  PartsFollower(Client& client, int64_t job, const AttemptLog& a, int tail) {
    for (size_t r = 0; r < a.parts.size(); ++r) {
      Part p;
      p.prefix = fmt::format("[{} {}] ", r, TerminalSafe(a.parts[r]));
      p.log = r == 0 ? AttemptFollower(client, job, a.n, a.log_path)
                     : std::make_unique<LogFollower>(
                           std::make_unique<ApiLogSource>(client, job, a.n, static_cast<int>(r)));
      if (tail >= 0) p.log->SkipToLastLines(static_cast<size_t>(tail));
      parts_.push_back(std::move(p));
    }
  }
  // `last`: the attempt ended; a line without its newline is printed all the same.
  void Poll(bool last) {
    for (Part& p : parts_) {
      char* buf = nullptr;
      size_t len = 0;
      std::FILE* mem = ::open_memstream(&buf, &len);
      if (mem == nullptr) continue;
      p.log->Poll(mem);
      std::fclose(mem);
      p.pending.append(buf, len);
      std::free(buf);
      size_t start = 0;
      for (size_t nl; (nl = p.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::fprintf(stdout, "%s%.*s\n", p.prefix.c_str(), static_cast<int>(nl - start),
                     p.pending.data() + start);
      }
      p.pending.erase(0, start);
      if (last && !p.pending.empty()) {
        std::fprintf(stdout, "%s%s\n", p.prefix.c_str(), p.pending.c_str());
        p.pending.clear();
      }
    }
    std::fflush(stdout);
  }

 private:
  struct Part {
    std::string prefix, pending;
    std::unique_ptr<LogFollower> log;
  };
  std::vector<Part> parts_;
};

}  // namespace

namespace {

// A requeued job's log goes on: the attempts it was stopped in come first, each closed by the
// line that says how it ended, as one log (Slurm appends to a requeued job's output).
void PrintContinued(Client& client, const JobLog& job) {
  for (const AttemptLog& earlier : job.continued) {
    AttemptFollower(client, job.id, earlier.n, earlier.log_path)->Poll(stdout);
    std::printf("trainq: attempt %lld ended: %s; attempt %lld follows\n",
                static_cast<long long>(earlier.n), TerminalSafe(earlier.end_reason).c_str(),
                static_cast<long long>(earlier.n + 1));
  }
}

}  // namespace

int CmdLogs(Client& client, const std::string& id, bool follow, int attempt, int tail, bool as_json,
            const std::string& node) {
  if (as_json && follow) {
    return Fail(Status::Invalid(
        "--json and --follow: --json prints the log as it is now; follow without --json"));
  }
  Result<JobLog> job = FetchJobLog(client, id, attempt);
  if (!job.ok()) return Fail(job.status());
  if (!job->attempt) {
    if (attempt != 0) {
      return Fail(Status::NotFound(fmt::format("job {} has no attempt {}", id, attempt)));
    }
    if (as_json || !follow || EndedUnstarted(*job)) return Fail(NoOutput(*job));
  }
  std::optional<int> part;
  if (!node.empty()) {
    if (!job->attempt) {
      return Fail(Status::Conflict(fmt::format("--node: job {} has not started yet", job->id)));
    }
    Result<int> p = PartOf(*job, node);
    if (!p.ok()) return Fail(p.status());
    part = *p;
  }
  bool gang = job->attempt && job->attempt->parts.size() > 1 && !part;
  if (as_json) {
    int64_t n = job->attempt->n;
    json out = {{"job", job->id}, {"attempt", n}, {"active", job->attempt->active}};
    Result<std::string> text = PartText(client, job->id, n, part.value_or(0), tail);
    if (!text.ok()) return Fail(text.status());
    out["text"] = *text;
    if (part) out["part"] = *part;
    if (gang) {
      json parts = json::array();
      for (size_t r = 0; r < job->attempt->parts.size(); ++r) {
        Result<std::string> t =
            r == 0 ? text : PartText(client, job->id, n, static_cast<int>(r), tail);
        if (!t.ok()) return Fail(t.status());
        parts.push_back({{"rank", r}, {"node", job->attempt->parts[r]}, {"text", *t}});
      }
      out["parts"] = std::move(parts);
    }
    std::printf("%s\n", DumpJson(out, 2).c_str());
    return 0;
  }
  int64_t n = job->attempt ? job->attempt->n : 0;
  // The owner's check first: on a shared server only the job's user (or an admin) may.
  if (job->attempt && client.Fixed()) {
    Result<json> size = client.Call("GET", api::JobLogPath(job->id, n) + "&size=1");
    if (!size.ok()) return Fail(size.status());
  }
  auto single = [&](const AttemptLog& a) {
    return part.value_or(0) > 0 ? std::make_unique<LogFollower>(
                                      std::make_unique<ApiLogSource>(client, job->id, a.n, *part))
                                : AttemptFollower(client, job->id, a.n, a.log_path);
  };
  std::unique_ptr<LogFollower> log;
  std::unique_ptr<PartsFollower> parts;
  auto start = [&](const AttemptLog& a) {
    if (a.parts.size() > 1 && !part) {
      parts = std::make_unique<PartsFollower>(client, job->id, a, tail);
    } else {
      log = single(a);
      if (tail >= 0) log->SkipToLastLines(static_cast<size_t>(tail));
    }
  };
  auto poll = [&](bool last) {
    if (parts) parts->Poll(last);
    if (log) log->Poll(stdout);
  };
  if (attempt == 0 && !part && tail < 0) PrintContinued(client, *job);
  if (job->attempt) {
    start(*job->attempt);
    poll(!follow || !job->attempt->active);
  }
  while (follow) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    job = FetchJobLog(client, id, attempt);
    if (!job.ok()) return Fail(job.status());
    if (!job->attempt && EndedUnstarted(*job)) return Fail(NoOutput(*job));
    if (!job->attempt) continue;  // still waiting for its first attempt
    if (job->attempt->n != n && n != 0 && attempt == 0) {
      // Requeued while followed: the next attempt's output continues the log.
      std::printf("trainq: attempt %lld ended; attempt %lld follows\n", static_cast<long long>(n),
                  static_cast<long long>(job->attempt->n));
      log.reset();
      parts.reset();
    }
    n = job->attempt->n;
    if (!log && !parts) start(*job->attempt);
    poll(!job->attempt->active);
    // Ended: done, unless it was queued again to run on (a requeue, a preemption).
    if (!job->attempt->active &&
        !(attempt == 0 && Requeued(job->attempt->end_reason) &&
          (job->state == "queued" || job->state == "starting" || job->state == "running"))) {
      break;
    }
  }
  return 0;
}

int CmdGpus(Client& client, bool as_json) {
  Result<json> r = client.Call("GET", api::GpusPath());
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  return PrintChecked(reply, as_json ? DumpJson(*r, 2) + "\n" : GpusTable(reply));
}

namespace {

// Commands that act on the personal daemon's files (its lock, its config) or start one.
Status NeedPersonal(const Client& client, std::string_view what) {
  if (!client.Fixed()) return Status::Ok();
  return Status::Invalid(
      fmt::format("{} is for a personal daemon, and this command talks to {}; name a state dir "
                  "(--state-dir or TRAINQ_STATE_DIR) for one of your own",
                  what, client.Describe()));
}

std::string NotRunning(const Client& client) {
  if (client.Fixed()) return client.Describe() + " does not answer";
  return "no trainq daemon runs for " + client.paths().state_dir;
}

// A daemon that holds the lock but does not answer is running, busy or stopped, not absent.
bool RunsButSilent(const Client& client) {
  return !client.Fixed() && LockHeld(client.paths().lock);
}

std::string Silent(const Client& client) {
  return "the trainq daemon for " + client.paths().state_dir +
         " runs (it holds daemon.lock) but does not answer: it may be busy storing a large "
         "submit or loading its queue; see " +
         client.paths().log;
}

}  // namespace

int CmdDaemonForeground(Client& client) {
  if (Status st = NeedPersonal(client, "trainq daemon --foreground"); !st.ok()) return Fail(st);
  Result<std::string> daemon = FindDaemonBinary();
  if (!daemon.ok()) return Fail(daemon.status());
  return Fail(ExecReplace({*daemon, "--state-dir", client.paths().state_dir}));
}

int CmdDaemonStart(Client& client) {
  if (Status st = client.EnsureDaemon(); !st.ok()) return Fail(st);
  std::printf("%s is running\n", client.Describe().c_str());
  return 0;
}

namespace {

// Where --server or TRAINQ_SERVER and a state dir both name a daemon and the one that answers
// serves another state dir: a message that names both; "" when they agree (or one is unnamed).
std::string OtherDaemon(Client& client, const std::string& served) {
  if (!client.Fixed() || client.StateDirOrigin().empty() || served.empty()) return "";
  const std::string& named = client.paths().state_dir;
  std::error_code ec;
  if (served == named || std::filesystem::equivalent(served, named, ec)) return "";
  return fmt::format("{} serves the state dir {}, not {} ({})", client.Describe(), served, named,
                     client.StateDirOrigin());
}

}  // namespace

int CmdDaemonStop(Client& client) {
  if (client.Fixed() && !client.StateDirOrigin().empty() && client.DaemonRunning()) {
    // `daemon stop` must not stop a daemon other than the one the user meant.
    Result<json> status = client.CallRunning("GET", api::StatusPath());
    std::string served = status.ok() ? Reply(*status).OptStr("state_dir").value_or("") : "";
    if (std::string other = OtherDaemon(client, served); !other.empty()) {
      return Fail(Status::Invalid(fmt::format(
          "{}; say which daemon to stop: unset TRAINQ_SERVER (or drop --server) for the daemon "
          "of {}, or {} for the one at the server",
          other, client.paths().state_dir,
          client.StateDirOrigin() == "--state-dir" ? "drop --state-dir"
                                                   : "unset TRAINQ_STATE_DIR")));
    }
  }
  if (!client.DaemonRunning()) {
    if (RunsButSilent(client)) return Fail(Status::Unavailable(Silent(client)));
    std::printf("%s\n", NotRunning(client).c_str());
    return 0;
  }
  Result<json> r = client.CallRunning("POST", api::DaemonPath("stop"));
  if (!r.ok()) return Fail(r.status());
  if (client.Fixed()) return PrintMessage(*r);
  // Stopped once it lets go of its lock.
  for (int i = 0; i < 500; ++i) {
    if (LockFile(client.paths().lock).ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return PrintMessage(*r);
}

int CmdDaemonStatus(Client& client, bool as_json) {
  bool answers = client.DaemonRunning();
  if (!answers && RunsButSilent(client)) {
    if (as_json) {
      std::printf("%s\n", DumpJson({{"running", true},
                                    {"answering", false},
                                    {"state_dir", client.paths().state_dir}})
                              .c_str());
    } else {
      std::printf("%s\n", Silent(client).c_str());
    }
    return 1;
  }
  if (!answers) {
    if (as_json) {
      std::printf("%s\n",
                  DumpJson({{"running", false}, {"state_dir", client.paths().state_dir}}).c_str());
    } else {
      std::printf("%s\n", NotRunning(client).c_str());
    }
    return 3;  // as LSB's `status`: not running
  }
  Result<json> r = client.CallRunning("GET", api::StatusPath());
  if (!r.ok()) return Fail(r.status());
  Reply reply(*r);
  // One by one, so the first field missing is the one reported.
  int64_t pid = reply.Int("pid");
  std::string state_dir = reply.Str("state_dir"), node = reply.Str("node");
  std::string probe = reply.Str("probe");
  int64_t attempts = reply.Int("running_attempts");
  // A daemon from before versions were reported is older than any client that asks.
  std::string version = reply.OptStr("version").value_or("unknown (older)");
  std::string text =
      fmt::format("trainq daemon pid {} (version {}) for {}: node {}, {}, {} running attempt(s)\n",
                  pid, version, state_dir, node, probe, attempts);
  if (!reply.ok()) return Fail(reply.status());
  if (std::string other = OtherDaemon(client, state_dir); !other.empty()) {
    std::fprintf(stderr, "trainq: note: %s\n", other.c_str());
  }
  if (version != kVersion) {
    std::fprintf(stderr,
                 "trainq: warning: this client is %s but the daemon is %s; restart the daemon "
                 "to run the installed version (a personal one: trainq daemon stop, then any "
                 "command; a shared one: systemctl restart trainqd)\n",
                 kVersion, version.c_str());
  }
  (*r)["running"] = true;
  return PrintChecked(reply, as_json ? DumpJson(*r, 2) + "\n" : text);
}

int CmdDaemonBackup(Client& client, const std::string& path) {
  if (path.empty()) return Fail(Status::Invalid("backup: give the file to write, e.g. q.db"));
  std::string absolute = path[0] == '/' ? path : CurrentDirectory() + "/" + path;
  if (Status st = CheckUtf8("backup path", absolute); !st.ok()) return Fail(st);
  Result<json> r = client.Call("POST", api::DaemonPath("backup"), DumpJson({{"path", absolute}}));
  if (!r.ok()) return Fail(r.status());
  return PrintMessage(*r);
}

int CmdConfigCheck(Client& client) {
  if (Status st = NeedPersonal(client, "trainq config check (trainqd --check-config there)");
      !st.ok()) {
    return Fail(st);
  }
  Result<std::string> daemon = FindDaemonBinary();
  if (!daemon.ok()) return Fail(daemon.status());
  if (Status st = CheckConfigWithDaemon(*daemon, client.paths()); !st.ok()) return Fail(st);
  std::printf("%s: valid\n", client.paths().config.c_str());
  return 0;
}

}  // namespace trainq
