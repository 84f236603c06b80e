// The CLI's side of the API: finds (or starts) the daemon for a state dir and makes JSON
// calls to it.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "src/api/http.h"

#include "src/os/state_paths.h"
#include "trainq/status.h"

namespace trainq {

class Client {
 public:
  explicit Client(StatePaths paths) : paths_(std::move(paths)) {}

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
  Result<nlohmann::json> Submit(const std::string& body);
  // The same without starting a daemon: kUnavailable when none listens.
  Result<nlohmann::json> CallRunning(const std::string& method, const std::string& target,
                                     const std::string& body = "");
  const StatePaths& paths() const { return paths_; }

 private:
  // HttpCall after checking the socket's directory, when it is not the state dir: every
  // request carries the caller's environment, so it goes only where no one else can listen.
  Result<HttpResponse> Send(std::string_view method, std::string_view target,
                            const std::string& body, int timeout_ms = 30000,
                            std::string_view idempotency_key = "") const;

  StatePaths paths_;
};

// trainqd beside this executable, else the first on PATH.
Result<std::string> FindDaemonBinary();
// `trainqd --check-config` for `paths`: kInvalid with its message when the config is bad.
Status CheckConfigWithDaemon(const std::string& daemon_binary, const StatePaths& paths);

}  // namespace trainq
