// Code snapshots and run records on the client (docs/workflow.md, "Code snapshots and run
// records"): the copy is made here, where the working tree is, before the job is submitted;
// `trainq diff` compares what two runs ran.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/cli/api_paths.h"
#include "src/cli/commands.h"
#include "src/cli/format.h"
#include "src/cli/reply.h"
#include "src/core/json_codec.h"
#include "src/core/transfers.h"
#include "src/core/version.h"
#include "src/core/words.h"
#include "src/os/crypto/token_crypto.h"
#include "src/os/run_dir.h"
#include "src/os/snapshot.h"
#include "src/os/system.h"
#include "src/os/transfer.h"
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
  if (data.empty()) {
    std::string home = GetEnv("HOME");  // as XDG says, and as the token file is found
    data = (home.empty() ? HomeDir(RealUid()) : home) + "/.local/share";
  }
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

// What the daemon's config says of snapshots.
struct SnapshotSettings {
  bool wanted = false;
  bool cluster = false;  // the snapshot and its links are shipped to the nodes that run it
  uint64_t max_bytes = 200ull << 20;
  std::vector<std::string> links;  // snapshot_link
};

// "on", "off", or the daemon's `snapshot` option when the command line says nothing; the
// option applies to jobs submitted from a git work tree, and only those ask the daemon.
Result<SnapshotSettings> SnapshotWanted(Client& client, const std::string& flag,
                                        const std::string& cwd) {
  if (flag == "off" || (flag.empty() && !InGitWorkTree(cwd))) return SnapshotSettings{};
  Result<json> config = client.CallRepeatable("GET", api::ConfigPath());
  // A daemon without the route has no snapshot default to give.
  if (!config.ok() && config.status().code() == Code::kNotFound && flag.empty()) {
    return SnapshotSettings{};
  }
  if (!config.ok()) return config.status();
  Reply reply(*config);
  SnapshotSettings s;
  std::string mode = reply.OptStr("snapshot").value_or("off");
  s.max_bytes = reply.OptUInt("snapshot_max_bytes").value_or(s.max_bytes);
  if (!reply.ok()) return reply.status();
  s.wanted = flag == "git" || mode == "git";
  s.cluster = config->value("cluster", false);
  if (auto it = config->find("snapshot_link"); it != config->end() && it->is_array()) {
    for (const json& p : *it) {
      if (p.is_string()) s.links.push_back(p.get<std::string>());
    }
  }
  return s;
}

// Where the manifests of what a job ships are kept ("manifests/SHA256"), beside the snapshots:
// the daemon of the node that stores the job serves the bytes they name to the other nodes.
json TransferJson(TransferKind kind, const std::string& src, const std::string& dst,
                  const std::string& sha, const std::string& store, uint64_t bytes,
                  uint64_t files) {
  return json{{"kind", TransferKindName(kind)},
              {"src", src},
              {"dst", dst},
              {"manifest", sha},
              {"manifest_path", store + "/manifests/" + sha},
              {"bytes", bytes},
              {"files", files}};
}

Result<json> Shipped(TransferKind kind, const Manifest& m, const std::string& dst,
                     const std::string& store) {
  std::string text = ManifestText(m);
  std::string sha = Sha256Hex(text);
  std::string path = store + "/manifests/" + sha;
  TRAINQ_RETURN_IF_ERROR(MakeDirs(store + "/manifests"));
  if (!FileExists(path)) TRAINQ_RETURN_IF_ERROR(WriteFileAtomic(path, text, Durability::kNoSync));
  return TransferJson(kind, m.root, dst, sha, store, m.bytes, m.files);
}

// What `root` ships as `kind`: its manifest made now (unchanged files' chunks remembered in
// `memo`), or the one made at an earlier submit when the tree's fingerprint says nothing
// changed since (STORE/tree_memo/SHA256-OF-ROOT): a submit of an unchanged dataset reads no
// file and parses no memo. A snapshot's tree is new at each submit: nothing to remember.
// `error_prefix` names the flag in an error.
Result<json> ShipTree(TransferKind kind, const std::string& root, const std::string& dst,
                      const std::string& store, ChunkMemo& memo, const std::string& error_prefix) {
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  if (kind == TransferKind::kTree) {
    Result<Manifest> m = MakeManifest(r, &memo);
    if (!m.ok()) return Status(m.status().code(), error_prefix + m.status().message());
    return Shipped(kind, *m, dst, store);
  }
  Result<std::string> print = TreeFingerprint(r);
  if (!print.ok()) return Status(print.status().code(), error_prefix + print.status().message());
  std::string memo_path = store + "/tree_memo/" + Sha256Hex(r);
  if (Result<std::string> text = ReadFile(memo_path); text.ok()) {
    json known = json::parse(*text, nullptr, false);
    if (known.is_object() && known.value("fingerprint", "") == *print &&
        known.value("src", "") == r && known.contains("manifest") &&
        known["manifest"].is_string() && known.contains("bytes") &&
        known["bytes"].is_number_unsigned() && known.contains("files") &&
        known["files"].is_number_unsigned()) {
      auto sha = known["manifest"].get<std::string>();
      if (sha.size() == 64 && FileExists(store + "/manifests/" + sha)) {
        memo.Keep(r);
        return TransferJson(kind, r, dst, sha, store, known["bytes"].get<uint64_t>(),
                            known["files"].get<uint64_t>());
      }
    }
  }
  Result<Manifest> m = MakeManifest(r, &memo);
  if (!m.ok()) return Status(m.status().code(), error_prefix + m.status().message());
  Result<json> t = Shipped(kind, *m, dst, store);
  if (!t.ok()) return t.status();
  TRAINQ_RETURN_IF_ERROR(MakeDirs(store + "/tree_memo"));
  json known = {{"fingerprint", *print},
                {"src", r},
                {"manifest", (*t)["manifest"]},
                {"bytes", m->bytes},
                {"files", m->files}};
  // Lost to a power cut, it costs one more walk with the chunk memo: no fsync.
  TRAINQ_RETURN_IF_ERROR(WriteFileAtomic(memo_path, known.dump(), Durability::kNoSync));
  return t;
}

// Bytes of the files below `dir` (not following links); stops counting past `limit`.
uint64_t TreeBytes(const std::string& dir, uint64_t limit) {
  std::error_code ec;
  uint64_t total = 0;
  namespace fs = std::filesystem;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end && total <= limit; it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) total += it->file_size(ec);
  }
  return total;
}

// --stage SRC[:DST]: each source's manifest, made now (its unchanged files' chunks remembered
// in the store's chunk memo), so the job gets the bytes as they are at this submit.
Status ApplyStages(const SubmitArgs& args, const std::string& store, const std::string& cwd,
                   ChunkMemo& memo, json& transfers) {
  for (const std::string& text : args.stage) {
    Result<StageArg> stage = ParseStage(text, cwd, "--stage");
    if (!stage.ok()) return stage.status();
    Result<json> t =
        ShipTree(TransferKind::kStage, stage->src, stage->dst, store, memo, "--stage: ");
    if (!t.ok()) return t.status();
    auto files = (*t)["files"].get<uint64_t>();
    auto bytes = (*t)["bytes"].get<uint64_t>();
    transfers.push_back(std::move(*t));
    std::fprintf(stderr, "trainq: stage %s: %llu file%s, %s\n", TerminalSafe(stage->src).c_str(),
                 static_cast<unsigned long long>(files), files == 1 ? "" : "s",
                 FormatBytes(bytes).c_str());
  }
  return Status::Ok();
}

// In a cluster: the snapshot's tree, and each directory it links to that is at most
// `max_bytes`, shipped to the node that runs the job; a bigger one is named, as it will be
// missing there.
Status ShipSnapshot(const SnapshotResult& snap, uint64_t max_bytes, const std::string& store,
                    ChunkMemo& memo, json& transfers) {
  Result<json> t = ShipTree(TransferKind::kTree, snap.dir, "", store, memo, "--snapshot: ");
  if (!t.ok()) return t.status();
  transfers.push_back(std::move(*t));
  for (const auto& [path, target] : snap.links) {
    if (uint64_t bytes = TreeBytes(target, max_bytes); bytes > max_bytes) {
      std::fprintf(stderr,
                   "trainq: warning: %s holds more than snapshot_max_size (%s): not shipped; on "
                   "another node the job's %s is missing (--stage what it needs)\n",
                   TerminalSafe(target).c_str(), FormatBytes(max_bytes).c_str(),
                   TerminalSafe(path).c_str());
      continue;
    }
    Result<json> link = ShipTree(TransferKind::kLink, target, path, store, memo, "--snapshot: ");
    if (!link.ok()) return link.status();
    transfers.push_back(std::move(*link));
  }
  return Status::Ok();
}

}  // namespace

Status ApplySnapshot(Client& client, const SubmitArgs& args, json& body) {
  Result<SnapshotSettings> wanted =
      SnapshotWanted(client, args.snapshot, body["cwd"].get<std::string>());
  if (!wanted.ok()) return wanted.status();
  json record = {{"host", HostName()}, {"trainq_version", kVersion}};
  if (!args.env.empty()) record["env_overrides"] = args.env;
  std::string store = SnapshotStore(client);
  ChunkMemo memo(store + "/chunk_memo.json");
  json transfers = json::array();
  if (!args.stage.empty()) {
    TRAINQ_RETURN_IF_ERROR(
        ApplyStages(args, store, body["cwd"].get<std::string>(), memo, transfers));
  }
  if (!wanted->wanted) {
    body["record"] = std::move(record);
    if (transfers.empty()) return Status::Ok();
    body["transfers"] = std::move(transfers);
    return memo.Save();
  }
  std::string cwd = body["cwd"].get<std::string>();
  Result<GitState> git = ReadGitState(cwd);
  if (!git.ok()) return git.status();
  TRAINQ_RETURN_IF_ERROR(CheckSize(*git, wanted->max_bytes));
  // What git ignores at the top (datasets, checkpoints) and what the config names stay the
  // project's: links in the tree, not copies.
  std::vector<std::string> links = git->ignored_dirs;
  links.insert(links.end(), wanted->links.begin(), wanted->links.end());
  Result<SnapshotResult> snap = MakeSnapshot(*git, store, links);
  if (!snap.ok()) return Status(snap.status().code(), "--snapshot: " + snap.status().message());
  if (wanted->cluster) {
    TRAINQ_RETURN_IF_ERROR(ShipSnapshot(*snap, wanted->max_bytes, store, memo, transfers));
  }
  if (!transfers.empty()) body["transfers"] = std::move(transfers);
  // The job runs where it would have in the tree, in the copy.
  std::string rel = cwd.size() > git->root.size() ? cwd.substr(git->root.size()) : "";
  body["cwd"] = snap->dir + rel;
  record["git"] = {{"root", git->root},
                   {"commit", git->commit},
                   {"branch", git->branch},
                   {"dirty", git->dirty},
                   {"diff_sha256", snap->diff_sha256},
                   {"diff_path", snap->diff_path}};
  json linked = json::array();
  std::vector<std::string> names;
  for (const auto& [path, target] : snap->links) {
    linked.push_back({{"path", path}, {"to", target}});
    names.push_back(TerminalSafe(path));
  }
  record["snapshot"] = {{"id", snap->id},
                        {"dir", snap->dir},
                        {"files", snap->files},
                        {"bytes", snap->bytes},
                        {"bytes_stored", snap->bytes_stored},
                        {"links", std::move(linked)}};
  body["record"] = std::move(record);
  std::fprintf(
      stderr, "trainq: snapshot %s: %zu files, %s (%s new)%s\n", snap->id.substr(0, 12).c_str(),
      snap->files, FormatBytes(snap->bytes).c_str(), FormatBytes(snap->bytes_stored).c_str(),
      names.empty() ? ""
                    : fmt::format("; linked to the work tree: {}", fmt::join(names, ", ")).c_str());
  return memo.Save();
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

// Commits and snapshot ids shown short, as git shows them; the JSON keeps them whole.
std::string Short(const std::string& text) { return text.size() > 12 ? text.substr(0, 12) : text; }

struct Difference {
  std::string what, first, second;
};

// The files a kept `git diff` touches ("diff --git a/X b/X" lines).
std::vector<std::string> PatchFiles(const std::string& path) {
  std::vector<std::string> out;
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return out;
  size_t at = 0;
  while ((at = text->find("diff --git a/", at)) != std::string::npos) {
    size_t end = text->find(" b/", at);
    if (end == std::string::npos) break;
    out.push_back(text->substr(at + 13, end - at - 13));
    at = end;
  }
  return out;
}

// `git diff --no-index` of two snapshot trees, their folders' names taken out of the paths
// (a/train.py, not a/.../trees/ID-.../train.py). "" when git is missing or they are the same.
std::string TreeDiff(const std::string& a, const std::string& b, bool stat) {
  Result<std::string> git = FindOnPath("git");
  if (!git.ok()) return "";
  std::vector<std::string> argv = {*git, "diff", "--no-index", "--no-color"};
  if (stat) argv.push_back("--name-status");
  argv.push_back(a);
  argv.push_back(b);
  Result<CommandOutput> shown = RunCommand(argv);
  if (!shown.ok()) return "";
  std::string out = shown->output;
  // The names git prints: the folders as given (--name-status), or without their leading '/'
  // after a/ and b/.
  for (const std::string& dir : {a, b}) {
    std::string bare = (dir.starts_with("/") ? dir.substr(1) : dir) + "/";
    for (std::string side : {"a/", "b/"}) {
      for (size_t at; (at = out.find(side + bare)) != std::string::npos;) {
        out.erase(at + side.size(), bare.size());
      }
    }
    for (size_t at; (at = out.find(dir + "/")) != std::string::npos;) out.erase(at, dir.size() + 1);
  }
  return out;
}

}  // namespace

int CmdDiff(Client& client, const std::string& first, const std::string& second, bool as_json) {
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
  std::vector<Difference> diffs;
  auto compare = [&](const std::string& what, const std::string& x, const std::string& y) {
    if (x != y) diffs.push_back({what, x, y});
  };
  compare("commit", Field(a, {"record", "git", "commit"}), Field(b, {"record", "git", "commit"}));
  compare("branch", Field(a, {"record", "git", "branch"}), Field(b, {"record", "git", "branch"}));
  compare("uncommitted changes (diff sha256)", Field(a, {"record", "git", "diff_sha256"}),
          Field(b, {"record", "git", "diff_sha256"}));
  compare("snapshot", Field(a, {"record", "snapshot", "id"}),
          Field(b, {"record", "snapshot", "id"}));
  compare("command", Field(a, {"command"}), Field(b, {"command"}));
  compare("env (--env)", Field(a, {"record", "env_overrides"}),
          Field(b, {"record", "env_overrides"}));
  compare("asks", RequestSummary(Reply(a)), RequestSummary(Reply(b)));
  compare("host", Field(a, {"record", "host"}), Field(b, {"record", "host"}));
  compare("gpu models", Field(a, {"record", "gpu_models"}), Field(b, {"record", "gpu_models"}));
  compare("trainq", Field(a, {"record", "trainq_version"}), Field(b, {"record", "trainq_version"}));
  // The code: between the two snapshot trees where both are kept, else between the two
  // runs' uncommitted changes.
  std::string sa = Field(a, {"record", "snapshot", "dir"});
  std::string sb = Field(b, {"record", "snapshot", "dir"});
  std::string files, code;
  if (sa != "-" && sb != "-" && sa != sb && IsDirectory(sa) && IsDirectory(sb)) {
    files = TreeDiff(sa, sb, true);
    code = TreeDiff(sa, sb, false);
  } else {
    std::string da = Field(a, {"record", "git", "diff_path"});
    std::string db = Field(b, {"record", "git", "diff_path"});
    if (da != db && (da != "-" || db != "-")) {
      std::vector<std::string> fa = da == "-" ? std::vector<std::string>{} : PatchFiles(da);
      std::vector<std::string> fb = db == "-" ? std::vector<std::string>{} : PatchFiles(db);
      for (const std::string& f : fa) files += "first: " + f + "\n";
      for (const std::string& f : fb) files += "second: " + f + "\n";
      Result<std::string> git = FindOnPath("git");
      if (git.ok()) {
        Result<CommandOutput> shown =
            RunCommand({*git, "diff", "--no-index", "--no-color", da == "-" ? "/dev/null" : da,
                        db == "-" ? "/dev/null" : db});
        if (shown.ok()) code = shown->output;
      }
    }
  }
  if (as_json) {
    json out = {{"first", a.value("id", int64_t{0})},
                {"second", b.value("id", int64_t{0})},
                {"differences", json::array()},
                {"files", files},
                {"code_diff", code}};
    for (const Difference& d : diffs) {
      out["differences"].push_back({{"what", d.what}, {"first", d.first}, {"second", d.second}});
    }
    std::printf("%s\n", DumpJson(out, 2).c_str());
    return 0;
  }
  std::string out;
  for (const Difference& d : diffs) {
    bool hash = d.what == "commit" || d.what == "snapshot" || d.what.starts_with("uncommitted");
    out += fmt::format("{}:\n  - {}\n  + {}\n", d.what, hash ? Short(d.first) : d.first,
                       hash ? Short(d.second) : d.second);
  }
  if (out.empty()) out = "the two runs ran the same code, command and environment\n";
  if (!files.empty()) out += "files that differ:\n" + files;
  if (!code.empty()) out += "the code diff (first -> second):\n" + code;
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace trainq
