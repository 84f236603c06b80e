// Code snapshots and run records on the client (docs/workflow.md, "Code snapshots and run
// records"): the copy is made here, where the working tree is, before the job is submitted;
// `trainq diff` compares what two runs ran.
#include <algorithm>
#include <cstdio>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/cli/reply.h"
#include "src/core/json_codec.h"
#include "src/core/words.h"
#include "src/os/run_dir.h"
#include "src/os/snapshot.h"
#include "src/os/system.h"
#include "trainq/size.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// Where this user's snapshots are kept: the personal daemon's state dir; for a daemon
// trainq does not start (a shared server, a remote one), the user's own data dir, which the
// jobs (run as this user) can read.
std::string SnapshotStore(const Client& client) {
  if (!client.Fixed()) return client.paths().state_dir + "/snapshots";
  std::string data = GetEnv("XDG_DATA_HOME");
  if (data.empty()) data = HomeDir(::getuid()) + "/.local/share";
  return data + "/trainq/snapshots";
}

Status CheckSize(const GitState& git, uint64_t max_bytes) {
  uint64_t total = 0;
  for (const SnapshotFile& f : git.files) total += f.size;
  if (total <= max_bytes) return Status::Ok();
  std::vector<SnapshotFile> biggest = git.files;
  std::sort(biggest.begin(), biggest.end(),
            [](const SnapshotFile& a, const SnapshotFile& b) { return a.size > b.size; });
  biggest.resize(std::min<size_t>(biggest.size(), 5));
  std::vector<std::string> named;
  for (const SnapshotFile& f : biggest) {
    named.push_back(fmt::format("{} ({})", TerminalSafe(f.path), FormatBytes(f.size)));
  }
  return Status::Invalid(fmt::format(
      "--snapshot: {} holds {} in {} files, more than snapshot_max_size ({}); the biggest: {}; "
      "have git ignore them (.gitignore) or raise snapshot_max_size",
      git.root, FormatBytes(total), git.files.size(), FormatBytes(max_bytes),
      fmt::join(named, ", ")));
}

// "on", "off", or the daemon's `snapshot` option when the command line says nothing; the
// option applies to jobs submitted from a git work tree, and only those ask the daemon.
Result<std::pair<bool, uint64_t>> SnapshotWanted(Client& client, const std::string& flag,
                                                 const std::string& cwd) {
  if (flag == "off" || (flag.empty() && !InGitWorkTree(cwd))) {
    return std::pair<bool, uint64_t>{false, 0};
  }
  Result<json> config = client.CallRepeatable("GET", api::ConfigPath());
  // A daemon without the route has no snapshot default to give.
  if (!config.ok() && config.status().code() == Code::kNotFound && flag.empty()) {
    return std::pair<bool, uint64_t>{false, 0};
  }
  if (!config.ok()) return config.status();
  Reply reply(*config);
  std::string mode = reply.OptStr("snapshot").value_or("off");
  uint64_t max = reply.OptUInt("snapshot_max_bytes").value_or(200ull << 20);
  if (!reply.ok()) return reply.status();
  return std::pair<bool, uint64_t>{flag == "git" || mode == "git", max};
}

}  // namespace

Status ApplySnapshot(Client& client, const SubmitArgs& args, json& body) {
  Result<std::pair<bool, uint64_t>> wanted =
      SnapshotWanted(client, args.snapshot, body["cwd"].get<std::string>());
  if (!wanted.ok()) return wanted.status();
  json record = {{"host", HostName()}, {"trainq_version", TRAINQ_VERSION}};
  if (!args.env.empty()) record["env_overrides"] = args.env;
  if (!wanted->first) {
    body["record"] = std::move(record);
    return Status::Ok();
  }
  std::string cwd = body["cwd"].get<std::string>();
  Result<GitState> git = ReadGitState(cwd);
  if (!git.ok()) return git.status();
  TRAINQ_RETURN_IF_ERROR(CheckSize(*git, wanted->second));
  Result<SnapshotResult> snap = MakeSnapshot(*git, SnapshotStore(client));
  if (!snap.ok()) return Status(snap.status().code(), "--snapshot: " + snap.status().message());
  // The job runs where it would have in the tree, in the copy.
  std::string rel = cwd.size() > git->root.size() ? cwd.substr(git->root.size()) : "";
  body["cwd"] = snap->dir + rel;
  record["git"] = {{"root", git->root},
                   {"commit", git->commit},
                   {"branch", git->branch},
                   {"dirty", git->dirty},
                   {"diff_sha256", snap->diff_sha256},
                   {"diff_path", snap->diff_path}};
  record["snapshot"] = {{"id", snap->id},
                        {"dir", snap->dir},
                        {"files", snap->files},
                        {"bytes", snap->bytes},
                        {"bytes_stored", snap->bytes_stored}};
  body["record"] = std::move(record);
  std::fprintf(stderr, "trainq: snapshot %s: %zu files, %s (%s new)\n",
               snap->id.substr(0, 12).c_str(), snap->files, FormatBytes(snap->bytes).c_str(),
               FormatBytes(snap->bytes_stored).c_str());
  return Status::Ok();
}

namespace {

std::string Field(const json& job, std::initializer_list<const char*> path) {
  const json* v = &job;
  for (const char* key : path) {
    if (!v->is_object() || !v->contains(key)) return "-";
    v = &(*v)[key];
  }
  if (v->is_null() || (v->is_string() && v->get_ref<const std::string&>().empty())) return "-";
  return TerminalSafe(v->is_string() ? v->get<std::string>() : v->dump());
}

// One line of the comparison: printed only when the two runs differ, unless `always`.
void Compare(std::string& out, const std::string& what, const std::string& a,
             const std::string& b) {
  if (a == b) return;
  out += fmt::format("{}:\n  - {}\n  + {}\n", what, a, b);
}

}  // namespace

int CmdDiff(Client& client, const std::string& first, const std::string& second) {
  json jobs[2];
  const std::string* texts[2] = {&first, &second};
  for (int i = 0; i < 2; ++i) {
    Result<int64_t> id = ParseJobId(*texts[i]);
    if (!id.ok()) return Fail(id.status());
    Result<json> job = client.Call("GET", api::JobPath(*id));
    if (!job.ok()) return Fail(job.status());
    jobs[i] = std::move(*job);
  }
  const json &a = jobs[0], &b = jobs[1];
  std::string out;
  Compare(out, "commit", Field(a, {"record", "git", "commit"}),
          Field(b, {"record", "git", "commit"}));
  Compare(out, "branch", Field(a, {"record", "git", "branch"}),
          Field(b, {"record", "git", "branch"}));
  Compare(out, "uncommitted changes (diff sha256)", Field(a, {"record", "git", "diff_sha256"}),
          Field(b, {"record", "git", "diff_sha256"}));
  Compare(out, "snapshot", Field(a, {"record", "snapshot", "id"}),
          Field(b, {"record", "snapshot", "id"}));
  Compare(out, "command", Field(a, {"command"}), Field(b, {"command"}));
  Compare(out, "env (--env)", Field(a, {"record", "env_overrides"}),
          Field(b, {"record", "env_overrides"}));
  Compare(out, "asks", RequestSummary(Reply(a)), RequestSummary(Reply(b)));
  Compare(out, "host", Field(a, {"record", "host"}), Field(b, {"record", "host"}));
  Compare(out, "gpu models", Field(a, {"record", "gpu_models"}),
          Field(b, {"record", "gpu_models"}));
  Compare(out, "trainq", Field(a, {"record", "trainq_version"}),
          Field(b, {"record", "trainq_version"}));
  if (out.empty()) out = "the two runs ran the same code, command and environment\n";
  std::fputs(out.c_str(), stdout);
  // The uncommitted changes themselves, when both were kept and differ.
  std::string da = Field(a, {"record", "git", "diff_path"});
  std::string db = Field(b, {"record", "git", "diff_path"});
  if (da != db && (da != "-" || db != "-")) {
    Result<std::string> git = FindOnPath("git");
    if (!git.ok()) return 0;
    std::vector<std::string> argv = {*git,
                                     "diff",
                                     "--no-index",
                                     "--no-color",
                                     da == "-" ? "/dev/null" : da,
                                     db == "-" ? "/dev/null" : db};
    Result<CommandOutput> shown = RunCommand(argv);
    if (shown.ok()) {
      std::printf("how the uncommitted changes differ:\n%s", shown->output.c_str());
    }
  }
  return 0;
}

}  // namespace trainq
