#include "src/cli/client.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/api/http.h"
#include "src/cli/api_paths.h"
#include "src/core/words.h"
#include "src/os/permissions.h"
#include "src/os/process.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {

using json = nlohmann::json;

namespace {

constexpr const char* kSharedOrigin = "the shared daemon of this machine";

// The token in ~/.config/trainq/token: only its owner may read it, as ssh asks of a key.
Result<std::string> ReadTokenFile(const std::string& path) {
  PathFacts facts = LstatFacts(path);
  if (!facts.exists) return std::string();
  if (facts.symlink || facts.uid != EffectiveUid() || (facts.mode & 077)) {
    return Status::Permission(fmt::format(
        "{} must be a file of yours that only you may read (mode {:04o}); run 'chmod 600 {}'", path,
        facts.mode, path));
  }
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::string token = *text;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  return token;
}

}  // namespace

Result<ServerChoice> ChooseServer(const std::string& state_dir_flag,
                                  const std::string& server_flag) {
  ServerChoice choice;
  choice.paths = ResolveStatePaths(state_dir_flag);
  choice.ca_file = GetEnv("TRAINQ_CA");
  choice.state_dir_origin = !state_dir_flag.empty()               ? "--state-dir"
                            : !GetEnv("TRAINQ_STATE_DIR").empty() ? "TRAINQ_STATE_DIR"
                                                                  : "";
  std::string url = server_flag;
  choice.origin = "--server";
  if (url.empty()) {
    url = GetEnv("TRAINQ_SERVER");
    choice.origin = "TRAINQ_SERVER";
  }
  if (!url.empty()) {
    Result<Endpoint> endpoint = ParseServerUrl(url, choice.origin);
    if (!endpoint.ok()) return endpoint.status();
    choice.fixed = *endpoint;
  } else if (state_dir_flag.empty() && GetEnv("TRAINQ_STATE_DIR").empty() &&
             (LstatFacts(kSharedSocket).exists || IsDirectory(kSharedStateDir))) {
    // A shared daemon serves this machine: never start a personal one behind its back, even
    // while it restarts (its socket is gone then, its state dir is not).
    choice.fixed = Endpoint{Endpoint::Kind::kUnix, kSharedSocket, "", 0};
    choice.origin = kSharedOrigin;
  }
  if (choice.fixed && choice.fixed->kind != Endpoint::Kind::kUnix) {
    choice.token = GetEnv("TRAINQ_TOKEN");
    if (choice.token.empty()) {
      std::string config = GetEnv("XDG_CONFIG_HOME");
      if (config.empty()) {
        std::string home = GetEnv("HOME");
        config = (home.empty() ? HomeDir(EffectiveUid()) : home) + "/.config";
      }
      Result<std::string> token = ReadTokenFile(config + "/trainq/token");
      if (!token.ok()) return token.status();
      choice.token = *token;
    }
  }
  return choice;
}

Code CodeFromName(const std::string& name) {
  for (Code c : {Code::kInvalid, Code::kNotFound, Code::kConflict, Code::kUnavailable, Code::kIo,
                 Code::kPermission, Code::kNoSpace, Code::kUnauthenticated}) {
    if (name == CodeName(c)) return c;
  }
  return Code::kInternal;
}

namespace {

// HttpCall's contract: kUnavailable only when the connection could not be made, so the
// request surely did not arrive. Everything else was (or may have been) received.
bool NotDelivered(const Result<HttpResponse>& r) {
  return !r.ok() && r.status().code() == Code::kUnavailable;
}

Result<json> Decode(const Result<HttpResponse>& r) {
  if (!r.ok()) return r.status();
  json doc = json::parse(r->body, nullptr, false);
  if (doc.is_discarded()) {
    return Status::Internal(
        "the daemon sent a reply that is not JSON; is trainqd the same version as trainq?");
  }
  if (r->status >= 200 && r->status < 300) return doc;
  if (doc.is_object() && doc.contains("error") && doc["error"].is_object()) {
    const json& e = doc["error"];
    json code = e.value("code", json("internal")), message = e.value("message", json());
    if (code.is_string() && message.is_string()) {
      return Status(CodeFromName(code.get<std::string>()), message.get<std::string>());
    }
  }
  return Status::Internal("the daemon answered HTTP " + std::to_string(r->status));
}

// "trainqd: config.toml: ..." -> "config.toml: ...", one line for the caller to prefix.
std::string DaemonMessage(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  constexpr std::string_view kPrefix = "trainqd: ";
  if (std::string_view(text).starts_with(kPrefix)) text.erase(0, kPrefix.size());
  return text;
}

}  // namespace

Result<std::string> FindDaemonBinary() {
  if (Result<std::string> self = SelfExecutable(); self.ok()) {
    std::string beside = self->substr(0, self->rfind('/') + 1) + "trainqd";
    if (IsExecutable(beside)) return beside;
  }
  Result<std::string> on_path = FindOnPath("trainqd");
  if (on_path.ok()) return on_path;
  return Status::NotFound(
      "cannot find trainqd (the trainq daemon) beside trainq or on PATH; install both");
}

Status CheckConfigWithDaemon(const std::string& daemon_binary, const StatePaths& paths) {
  Result<CommandOutput> r =
      RunCommand({daemon_binary, "--check-config", "--state-dir", paths.state_dir});
  if (!r.ok()) return r.status();
  if (r->exit_code == 0) return Status::Ok();
  // trainqd's exit code says which (ExitCodeFor): 2 a bad value, 4 a state dir not ours.
  Code code = r->exit_code == 2   ? Code::kInvalid
              : r->exit_code == 4 ? Code::kPermission
                                  : Code::kIo;
  return Status(code, DaemonMessage(r->output));
}

namespace {

// ScopedTestTransport's; empty (HttpCall) when none lives.
Transport& DefaultTransport() {
  static Transport transport;
  return transport;
}

}  // namespace

ScopedTestTransport::ScopedTestTransport(Transport transport) {
  DefaultTransport() = std::move(transport);
}

ScopedTestTransport::~ScopedTestTransport() { DefaultTransport() = nullptr; }

Client::Client(StatePaths paths) : transport_(DefaultTransport()) {
  choice_.paths = std::move(paths);
}

Client::Client(ServerChoice choice) : choice_(std::move(choice)), transport_(DefaultTransport()) {}

Result<HttpResponse> Client::Send(std::string_view method, std::string_view target,
                                  const std::string& body, int timeout_ms,
                                  std::string_view idempotency_key) const {
  if (transport_) {
    return transport_(ClientRequest{std::string(method), std::string(target), body, timeout_ms,
                                    std::string(idempotency_key)});
  }
  if (choice_.fixed) {
    CallOptions options;
    options.timeout_ms = timeout_ms;
    options.idempotency_key = std::string(idempotency_key);
    // On the Unix socket the kernel says who calls; a token goes only where it is the proof.
    if (choice_.fixed->kind != Endpoint::Kind::kUnix) options.bearer_token = choice_.token;
    options.ca_file = choice_.ca_file;
    return HttpCall(*choice_.fixed, method, target, body, options);
  }
  const StatePaths& paths = choice_.paths;
  // A socket directory that does not exist yet holds no listener; the daemon creates it.
  if (!paths.socket_dir.empty() && LstatFacts(paths.socket_dir).exists) {
    TRAINQ_RETURN_IF_ERROR(CheckPrivateDir(paths.socket_dir));
  }
  return HttpCall(paths.socket, method, target, body, timeout_ms, idempotency_key);
}

std::string Client::Describe() const {
  if (!choice_.fixed) return "the trainq daemon for " + choice_.paths.state_dir;
  return fmt::format("the trainq daemon at {} ({})", choice_.fixed->Describe(), choice_.origin);
}

bool Client::DaemonRunning() const {
  Result<HttpResponse> r = Send("GET", api::StatusPath(), "", 2000);
  return r.ok() && r->status == 200;
}

namespace {

// The message of the last "error" line the daemon logged from byte `from` on: its log lines
// are "TIME LEVEL MESSAGE".
std::string LastErrorLine(const std::string& log, uint64_t from) {
  std::ifstream in(log, std::ios::binary);
  if (!in) return "";
  in.seekg(static_cast<std::streamoff>(from));
  std::string line, last;
  while (std::getline(in, line)) {
    size_t level = line.find(' ');
    if (level != std::string::npos && line.compare(level + 1, 6, "error ") == 0) {
      last = line.substr(level + 7);
    }
  }
  return TerminalSafe(last.substr(0, 1000));
}

}  // namespace

namespace {

Status Busy(const StatePaths& paths) {
  return Status::Unavailable(
      "the trainq daemon for " + paths.state_dir +
      " runs (it holds daemon.lock) but has not answered for 20 s: it may be busy storing a "
      "large submit or loading its queue. Nothing was restarted; try again in a while. Its "
      "log: " +
      paths.log);
}

}  // namespace

Status Client::EnsureDaemon() {
  if (DaemonRunning()) return Status::Ok();
  if (choice_.fixed) {
    std::string hint =
        choice_.origin == kSharedOrigin
            ? "; it serves every user of this machine and is started by the system (systemctl "
              "status trainqd), never by trainq. For a daemon of your own, name a state dir "
              "(--state-dir or TRAINQ_STATE_DIR)"
            : "";
    return Status::Unavailable(Describe() + " does not answer" + hint);
  }
  const StatePaths& paths = choice_.paths;
  Result<std::string> daemon = FindDaemonBinary();
  if (!daemon.ok()) return daemon.status();
  // A config the daemon would refuse: say why now, not after the start timeout.
  TRAINQ_RETURN_IF_ERROR(CheckConfigWithDaemon(*daemon, paths));
  TRAINQ_RETURN_IF_ERROR(MakeDirs(paths.state_dir));
  // What trainqd would refuse at start: say it now, not after the start timeout.
  TRAINQ_RETURN_IF_ERROR(CheckStateDir(paths));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // A daemon that holds the state dir's lock runs, answering or not (storing a large batch,
  // loading its queue): wait for it, and never start one beside it.
  while (LockHeld(paths.lock)) {
    if (DaemonRunning()) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) return Busy(paths);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int starts = 0; starts < 5 && std::chrono::steady_clock::now() < deadline; ++starts) {
    const uint64_t log_start = FileSize(paths.log).value_or(0);
    Result<pid_t> pid = StartDetached({*daemon, "--state-dir", paths.state_dir}, paths.log);
    if (!pid.ok()) return pid.status();
    std::string why;
    bool waiting = true;  // for this daemon, or for the one that holds the lock
    while (waiting && std::chrono::steady_clock::now() < deadline) {
      if (DaemonRunning()) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (*pid > 0 && ProcessExited(*pid)) {
        why = LastErrorLine(paths.log, log_start);
        // It lost the lock to a daemon another command started: that one will answer.
        if (why.find("already runs") == std::string::npos) waiting = false;
        *pid = 0;
      }
    }
    if (DaemonRunning()) return Status::Ok();
    // Ours or another command's, a daemon holds the lock and has not answered yet: busy (a
    // large queue loading), not to be started again.
    if (LockHeld(paths.lock)) return Busy(paths);
    // Gone before it answered: the error it logged says why, at once. Without one it was
    // killed from outside: start it again.
    if (!why.empty()) {
      return Status::Unavailable(
          fmt::format("the trainq daemon exited as it started: {}; see {}", why, paths.log));
    }
  }
  return Status::Unavailable("the trainq daemon did not start; see " + paths.log);
}

Result<json> Client::CallRunning(const std::string& method, const std::string& target,
                                 const std::string& body) {
  return Decode(Send(method, target, body));
}

Result<json> Client::Submit(const std::string& body, size_t jobs) {
  // A million jobs took the daemon about a minute to check and store: four times that, so a
  // batch being stored is waited for, never taken for a daemon that does not answer.
  constexpr int64_t kPerJobUs = 250;
  int64_t timeout_ms = 30000 + static_cast<int64_t>(jobs) * kPerJobUs / 1000;
  return CallRepeatable("POST", api::JobsPath(), body, RandomToken(),
                        static_cast<int>(std::min<int64_t>(timeout_ms, 24 * 3600 * 1000)));
}

Result<json> Client::CallRepeatable(const std::string& method, const std::string& target,
                                    const std::string& body, const std::string& key,
                                    int timeout_ms) {
  constexpr int kTries = 6;
  auto pause = std::chrono::milliseconds(200);
  Result<HttpResponse> r = Status::Unavailable("not sent");
  for (int attempt = 1; attempt <= kTries; ++attempt) {
    r = Send(method, target, body, timeout_ms, key);
    if (r.ok() || attempt == kTries) break;
    // Only a transport failure is tried again; a refusal (another user's listener) is final.
    if (r.status().code() != Code::kUnavailable && r.status().code() != Code::kIo) break;
    if (!NotDelivered(r)) {
      // It may have been received: wait for the daemon (or its restart), then ask again.
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(5000));
    }
    if (Status st = EnsureDaemon(); !st.ok()) {
      if (NotDelivered(r)) return st;
      return Status(st.code(), st.message() +
                                   ". The request was sent: it may still be carried out when the "
                                   "daemon answers (`trainq ls` shows what was queued)");
    }
  }
  return Decode(r);
}

Result<std::string> Client::CallBytes(const std::string& method, const std::string& target) {
  Result<HttpResponse> r = Send(method, target, "");
  if (r.ok() && r->status >= 200 && r->status < 300) return std::move(r->body);
  Result<json> error = Decode(r);
  return error.ok() ? Status::Internal("the daemon answered HTTP " + std::to_string(r->status))
                    : error.status();
}

Result<Upgraded> Client::Upgrade(const std::string& target, std::string_view protocol) {
  if (transport_) return Status::Internal("a test transport cannot switch a connection");
  std::string socket = choice_.paths.socket;
  if (choice_.fixed && choice_.fixed->kind != Endpoint::Kind::kUnix) {
    return Status::Invalid(Describe() +
                           " is reached over the network: a switched connection "
                           "needs the daemon's Unix socket");
  }
  if (choice_.fixed) {
    socket = choice_.fixed->path;
  } else if (!choice_.paths.socket_dir.empty() && LstatFacts(choice_.paths.socket_dir).exists) {
    TRAINQ_RETURN_IF_ERROR(CheckPrivateDir(choice_.paths.socket_dir));
  }
  // The daemon opens the far end before it answers: the shim (10 s), or another node (5 s)
  // and its shim.
  Result<Upgraded> up = HttpUpgrade(socket, target, protocol, 30000);
  if (!up.ok() || up->fd >= 0) return up;
  int code = up->answer.status;
  Result<json> error = Decode(std::move(up->answer));
  if (!error.ok()) return error.status();
  return Status::Internal(fmt::format("the daemon answered HTTP {}, not 101, to {}", code, target));
}

Result<json> Client::Call(const std::string& method, const std::string& target,
                          const std::string& body) {
  Result<HttpResponse> r = Send(method, target, body);
  // A read whose answer was lost (the connection reset: a daemon killed or restarting
  // as it was asked) changes nothing and is asked once more; a write is not.
  bool lost_read = method == "GET" && !r.ok() && r.status().code() == Code::kIo;
  if (NotDelivered(r) || lost_read) {
    TRAINQ_RETURN_IF_ERROR(EnsureDaemon());
    r = Send(method, target, body);
  }
  return Decode(r);
}

}  // namespace trainq
