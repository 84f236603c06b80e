// The CLI's side of the API: finds (or starts) the daemon for a state dir and makes JSON
// calls to it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "src/api/http.h"
#include "src/core/endpoint.h"

#include "src/os/state_paths.h"
#include "trainq/status.h"

namespace trainq {

// The daemon a command talks to (docs/operations.md, "A shared server"): `--server URL` or
// TRAINQ_SERVER; else, unless a state dir is named (--state-dir, TRAINQ_STATE_DIR), the
// shared daemon's socket when it or the shared state dir exists; else the personal daemon of the
// state dir, started on demand. Only the personal daemon is ever started by trainq.
struct ServerChoice {
  StatePaths paths;               // the personal daemon's
  std::optional<Endpoint> fixed;  // a daemon trainq does not start
  std::string origin;             // where `fixed` came from: "--server", "TRAINQ_SERVER", ...
  std::string token;              // sent over TCP only (TRAINQ_TOKEN, ~/.config/trainq/token)
  std::string ca_file;            // TRAINQ_CA
  std::string state_dir_origin;   // "--state-dir" or "TRAINQ_STATE_DIR" when one names it
};
// kInvalid naming --server or TRAINQ_SERVER for a bad URL; kPermission for a token file
// others may read.
Result<ServerChoice> ChooseServer(const std::string& state_dir_flag,
                                  const std::string& server_flag);

// The Code an API error's "code" names ("not_found", ...); kInternal for a name it lacks.
Code CodeFromName(const std::string& name);

// One request as the Client sends it.
struct ClientRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // the path and query: "/v1/jobs?all=1"
  std::string body;
  int timeout_ms = 30000;
  std::string idempotency_key;  // "" for none
};

// Carries one request to the daemon and brings back its answer, under HttpCall's contract
// (src/api/http.h): kUnavailable only when nothing was sent, kIo when the exchange broke after
// the request went out. It exists for tests: by default the Client calls HttpCall itself, and
// a test of the CLI's commands passes a fake daemon (src/cli/fake_daemon_test_util.h) that
// scripts the answers (status and JSON body) and records what was sent.
using Transport = std::function<Result<HttpResponse>(const ClientRequest&)>;

// While one lives, every Client made without a transport uses `transport`: tests of whole
// command lines (RunCli, and the Slurm tools that call it), whose Client is made inside. One
// at a time, on the test's thread.
class ScopedTestTransport {
 public:
  explicit ScopedTestTransport(Transport transport);
  ~ScopedTestTransport();
  ScopedTestTransport(const ScopedTestTransport&) = delete;
  ScopedTestTransport& operator=(const ScopedTestTransport&) = delete;
};

class Client {
 public:
  explicit Client(StatePaths paths);
  explicit Client(ServerChoice choice);
  // Requests go through `transport` instead of HTTP. A test gives a `choice` with `fixed` set
  // (unix:/...), so that no daemon is ever started when the fake answers kUnavailable.
  Client(ServerChoice choice, Transport transport)
      : choice_(std::move(choice)), transport_(std::move(transport)) {}

  // Starts `trainqd` for this state dir unless a daemon answers; waits until one does. A
  // config trainqd would refuse is reported first, naming the option (kInvalid), and so is
  // a state dir it would refuse (kPermission, src/os/permissions.h).
  Status EnsureDaemon();
  bool DaemonRunning() const;
  // A call whose non-2xx answer becomes the Status the daemon sent (code and message). When
  // nothing could be sent (no daemon listens), the daemon is started and the call made once
  // more; a request that was sent is never sent again, whatever came back.
  Result<nlohmann::json> Call(const std::string& method, const std::string& target,
                              const std::string& body = "");
  // POST /v1/jobs with a fresh Idempotency-Key. When the answer is lost (the connection
  // broke, the daemon died mid-request) the same request is sent again with the same key,
  // the daemon started if none answers, up to a few times over about half a minute: the
  // daemon answers a repeat with the ids it already stored, so a submit is stored once and
  // its ids are printed, or it fails and nothing was stored twice.
  // `jobs`: how many the body holds; a large batch is given time to be stored (about 60 µs
  // a job here), so its answer is waited for rather than taken for a dead daemon.
  Result<nlohmann::json> Submit(const std::string& body, size_t jobs = 1);
  // The same for any request the daemon may receive twice without harm (a GET, or a request
  // carrying Idempotency-Key `key`, "" for none).
  Result<nlohmann::json> CallRepeatable(const std::string& method, const std::string& target,
                                        const std::string& body = "", const std::string& key = "",
                                        int timeout_ms = 30000);
  // A call whose 2xx answer is bytes (a log), not JSON; errors as Call's.
  Result<std::string> CallBytes(const std::string& method, const std::string& target);
  // The same without starting a daemon: kUnavailable when none listens.
  Result<nlohmann::json> CallRunning(const std::string& method, const std::string& target,
                                     const std::string& body = "");
  // GET `target` asking the daemon to switch the connection to `protocol` (an interactive
  // session's terminal); the daemon must be on this machine's Unix socket. Its refusal
  // becomes the Status it sent, as Call's do.
  Result<Upgraded> Upgrade(const std::string& target, std::string_view protocol);
  const StatePaths& paths() const { return choice_.paths; }
  // The daemon is one trainq does not start (--server, TRAINQ_SERVER, the shared one).
  bool Fixed() const { return choice_.fixed.has_value(); }
  // "the daemon for STATE_DIR" or "the daemon at URL (ORIGIN)", for messages.
  std::string Describe() const;
  // Where the state dir was named ("--state-dir", "TRAINQ_STATE_DIR"); "": the default.
  const std::string& StateDirOrigin() const { return choice_.state_dir_origin; }
  // Whether a file of the daemon's machine (a log) can be this machine's: the Unix socket.
  bool Local() const { return !Fixed() || choice_.fixed->kind == Endpoint::Kind::kUnix; }

 private:
  // HttpCall after checking the socket's directory, when it is not the state dir: every
  // request carries the caller's environment, so it goes only where no one else can listen.
  Result<HttpResponse> Send(std::string_view method, std::string_view target,
                            const std::string& body, int timeout_ms = 30000,
                            std::string_view idempotency_key = "") const;

  ServerChoice choice_;
  Transport transport_;  // empty: HttpCall
};

// trainqd beside this executable, else the first on PATH.
Result<std::string> FindDaemonBinary();
// `trainqd --check-config` for `paths`: kInvalid with its message when the config is bad.
Status CheckConfigWithDaemon(const std::string& daemon_binary, const StatePaths& paths);

}  // namespace trainq
