#include "src/cli/commands.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/format.h"
#include "src/core/json_codec.h"
#include "src/core/spec.h"
#include "src/core/words.h"
#include "src/daemon/daemon.h"
#include "src/os/system.h"

namespace trainq {

using json = nlohmann::json;

int Fail(const Status& status) {
  std::fprintf(stderr, "trainq: %s\n", status.message().c_str());
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

// Every command but `daemon` talks to a running daemon, starting it when nobody answered.
// Only a refused connection is retried: then the request surely did not arrive.
Result<json> Call(Client& client, const std::string& method, const std::string& target,
                  const std::string& body = "") {
  Result<json> r = client.Call(method, target, body);
  if (r.ok() || r.status().code() != Code::kUnavailable) return r;
  TRAINQ_RETURN_IF_ERROR(client.EnsureDaemon());
  return client.Call(method, target, body);
}

Result<json> GetJob(Client& client, const std::string& id_text) {
  Result<int64_t> id = ParseJobId(id_text);
  if (!id.ok()) return id.status();
  return Call(client, "GET", fmt::format("/v1/jobs/{}", *id));
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

Result<json> SubmitBody(const SubmitArgs& a) {
  json env = json::object();
  for (const auto& [k, v] : CurrentEnvironment()) env[k] = v;
  for (const std::string& e : a.env) {
    Result<std::pair<std::string, std::string>> kv = ParseEnvAssignment(e);
    if (!kv.ok()) return kv.status();
    env[kv->first] = kv->second;
  }
  std::string cwd = a.cwd.empty() ? CurrentDirectory() : a.cwd;
  if (cwd[0] != '/') cwd = CurrentDirectory() + "/" + cwd;
  json body = {{"command", a.command}, {"cwd", cwd},     {"env", env},
               {"gpus", a.gpus},       {"cpus", a.cpus}, {"priority", a.priority},
               {"retries", a.retries}};
  if (!a.name.empty()) body["name"] = a.name;
  if (!a.mem.empty()) body["mem"] = a.mem;
  if (!a.time.empty()) body["time"] = a.time;
  Result<json> after = JobIdList(a.after, "--after");
  if (!after.ok()) return after.status();
  Result<json> after_any = JobIdList(a.after_any, "--after-any");
  if (!after_any.ok()) return after_any.status();
  if (!after->empty()) body["after"] = std::move(*after);
  if (!after_any->empty()) body["after_any"] = std::move(*after_any);
  return body;
}

// The jobs of a --from file: blank lines and # comments are skipped.
Result<json> JobsFromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Invalid(fmt::format("--from: cannot read '{}'", path));
  json jobs = json::array();
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    std::string where = fmt::format("--from {}:{}", path, n);
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
  if (jobs.empty()) return Status::Invalid(fmt::format("--from: '{}' has no jobs", path));
  return jobs;
}

// One request for the whole file, so one transaction: the options are every job's defaults.
int SubmitFromFile(Client& client, const SubmitArgs& args, json defaults) {
  if (!args.command.empty()) {
    return Fail(Status::Invalid("--from: give either --from FILE or a command after --, not both"));
  }
  Result<json> jobs = JobsFromFile(args.from);
  if (!jobs.ok()) return Fail(jobs.status());
  defaults.erase("command");
  json body = {{"defaults", std::move(defaults)}, {"jobs", std::move(*jobs)}};
  Result<json> r = Call(client, "POST", "/v1/jobs", DumpJson(body));
  if (!r.ok()) return Fail(r.status());
  if (args.json) {
    std::printf("%s\n", DumpJson((*r)["ids"]).c_str());
    return 0;
  }
  std::string out;
  for (const json& id : (*r)["ids"]) out += std::to_string(id.get<int64_t>()) + "\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

int CmdSubmit(Client& client, const SubmitArgs& args) {
  Result<json> body = SubmitBody(args);
  if (!body.ok()) return Fail(body.status());
  if (!args.from.empty()) return SubmitFromFile(client, args, std::move(*body));
  Result<json> r = Call(client, "POST", "/v1/jobs", DumpJson(*body));
  if (!r.ok()) return Fail(r.status());
  int64_t id = (*r)["ids"][0].get<int64_t>();
  if (!args.json) {
    std::printf("%lld\n", static_cast<long long>(id));
    return 0;
  }
  Result<json> job = client.Call("GET", fmt::format("/v1/jobs/{}", id));
  if (!job.ok()) return Fail(job.status());
  std::printf("%s\n", DumpJson(*job, 2).c_str());
  return 0;
}

int CmdList(Client& client, const ListArgs& args) {
  std::string target = "/v1/jobs?";
  if (!args.state.empty()) {
    target += "state=" + args.state + "&";
  } else if (args.all) {
    target += "all=1&";
  }
  if (args.limit < 0) return Fail(Status::Invalid("--limit: use a positive number of jobs"));
  if (args.limit > 0) target += fmt::format("limit={}&", args.limit);
  target.pop_back();
  bool as_json = args.json;
  Result<json> r = Call(client, "GET", target);
  if (!r.ok()) return Fail(r.status());
  if (as_json) {
    std::printf("%s\n", DumpJson((*r)["jobs"], 2).c_str());
  } else {
    std::fputs(JobsTable((*r)["jobs"]).c_str(), stdout);
  }
  return 0;
}

int CmdShow(Client& client, const std::string& id, bool as_json) {
  Result<json> job = GetJob(client, id);
  if (!job.ok()) return Fail(job.status());
  std::fputs(as_json ? (DumpJson(*job, 2) + "\n").c_str() : JobDetails(*job).c_str(), stdout);
  return 0;
}

int CmdExplain(Client& client, const std::string& id_text, bool as_json) {
  Result<int64_t> id = ParseJobId(id_text);
  if (!id.ok()) return Fail(id.status());
  Result<json> doc = Call(client, "GET", fmt::format("/v1/jobs/{}/explain", *id));
  if (!doc.ok()) return Fail(doc.status());
  std::fputs(as_json ? (DumpJson(*doc, 2) + "\n").c_str() : ExplainReport(*doc).c_str(), stdout);
  return 0;
}

namespace {

// Copies what was appended to `path` since `offset` to stdout.
size_t PrintFrom(const std::string& path, size_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return offset;
  in.seekg(static_cast<std::streamoff>(offset));
  char buf[65536];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    std::fwrite(buf, 1, static_cast<size_t>(in.gcount()), stdout);
    offset += static_cast<size_t>(in.gcount());
  }
  std::fflush(stdout);
  return offset;
}

const json* FindAttempt(const json& job, int n) {
  const json& attempts = job["attempts"];
  if (attempts.empty()) return nullptr;
  if (n == 0) return &attempts.back();
  for (const json& a : attempts) {
    if (a["n"].get<int>() == n) return &a;
  }
  return nullptr;
}

bool AttemptActive(const json& a) {
  std::string s = a["state"].get<std::string>();
  return s == "starting" || s == "running";
}

// A job that ended (cancelled while waiting) without ever starting: no log will come.
bool EndedUnstarted(const json& job) {
  std::string s = job["state"].get<std::string>();
  return s == "succeeded" || s == "failed" || s == "cancelled";
}

Status NoOutput(const json& job) {
  std::string state = job["state"].get<std::string>();
  std::string reason = job["reason"].get<std::string>();
  if (EndedUnstarted(job)) {
    return Status::Conflict(
        fmt::format("job {} never started ({}): {}", job["id"].get<int64_t>(), state, reason));
  }
  return Status::Conflict(
      fmt::format("job {} has not started yet: {}", job["id"].get<int64_t>(), reason));
}

}  // namespace

int CmdLogs(Client& client, const std::string& id, bool follow, int attempt) {
  Result<json> job = GetJob(client, id);
  if (!job.ok()) return Fail(job.status());
  const json* a = FindAttempt(*job, attempt);
  if (!a) {
    if (attempt != 0) {
      return Fail(Status::NotFound(fmt::format("job {} has no attempt {}", id, attempt)));
    }
    if (!follow || EndedUnstarted(*job)) return Fail(NoOutput(*job));
  }
  int n = a ? (*a)["n"].get<int>() : 0;
  size_t offset = a ? PrintFrom((*a)["log_path"].get<std::string>(), 0) : 0;
  while (follow) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    job = GetJob(client, id);  // starts the daemon again if it went away meanwhile
    if (!job.ok()) return Fail(job.status());
    a = FindAttempt(*job, n);
    if (!a && EndedUnstarted(*job)) return Fail(NoOutput(*job));
    if (!a) continue;  // still waiting for its first attempt
    n = (*a)["n"].get<int>();
    offset = PrintFrom((*a)["log_path"].get<std::string>(), offset);
    if (!AttemptActive(*a)) break;
  }
  return 0;
}

int CmdCancel(Client& client, const std::vector<std::string>& ids) {
  int rc = 0;
  for (const std::string& text : ids) {
    Result<int64_t> id = ParseJobId(text);
    Result<json> r = id.ok() ? Call(client, "POST", fmt::format("/v1/jobs/{}/cancel", *id))
                             : Result<json>(id.status());
    if (!r.ok()) {
      rc = std::max(rc, Fail(r.status()));
      continue;
    }
    std::printf("%s\n", (*r)["message"].get<std::string>().c_str());
  }
  return rc;
}

int CmdRetry(Client& client, const std::string& text) {
  Result<int64_t> id = ParseJobId(text);
  if (!id.ok()) return Fail(id.status());
  Result<json> r = Call(client, "POST", fmt::format("/v1/jobs/{}/retry", *id));
  if (!r.ok()) return Fail(r.status());
  std::printf("%s\n", (*r)["message"].get<std::string>().c_str());
  return 0;
}

int CmdGpus(Client& client, bool as_json) {
  Result<json> r = Call(client, "GET", "/v1/gpus");
  if (!r.ok()) return Fail(r.status());
  std::fputs(as_json ? (DumpJson(*r, 2) + "\n").c_str() : GpusTable(*r).c_str(), stdout);
  return 0;
}

int CmdDaemon(Client& client, bool foreground) {
  if (foreground) return RunDaemon({client.paths(), true});
  if (Status st = client.EnsureDaemon(); !st.ok()) return Fail(st);
  std::printf("trainq daemon running for %s\n", client.paths().state_dir.c_str());
  return 0;
}

int CmdDaemonStop(Client& client) {
  if (!client.DaemonRunning()) {
    std::printf("no trainq daemon runs for %s\n", client.paths().state_dir.c_str());
    return 0;
  }
  Result<json> r = client.Call("POST", "/v1/daemon/stop");
  if (!r.ok()) return Fail(r.status());
  // Stopped once it lets go of its lock.
  for (int i = 0; i < 500; ++i) {
    if (LockFile(client.paths().lock).ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("%s\n", (*r)["message"].get<std::string>().c_str());
  return 0;
}

}  // namespace trainq

namespace trainq {

int CmdDaemonStatus(Client& client, bool as_json) {
  if (!client.DaemonRunning()) {
    if (as_json) {
      std::printf("%s\n",
                  DumpJson({{"running", false}, {"state_dir", client.paths().state_dir}}).c_str());
    } else {
      std::printf("no trainq daemon runs for %s\n", client.paths().state_dir.c_str());
    }
    return 0;
  }
  Result<json> r = client.Call("GET", "/v1/status");
  if (!r.ok()) return Fail(r.status());
  int64_t attempts = (*r)["running_attempts"].get<int64_t>();
  (*r)["running"] = true;
  if (as_json) {
    std::printf("%s\n", DumpJson(*r, 2).c_str());
    return 0;
  }
  std::printf("trainq daemon pid %lld for %s: node %s, %s, %lld running attempt(s)\n",
              static_cast<long long>((*r)["pid"].get<int64_t>()),
              (*r)["state_dir"].get<std::string>().c_str(), (*r)["node"].get<std::string>().c_str(),
              (*r)["probe"].get<std::string>().c_str(), static_cast<long long>(attempts));
  return 0;
}

}  // namespace trainq
