// The CLI's side of the API: finds (or starts) the personal daemon for a state dir and
// makes JSON calls to it.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "src/daemon/paths.h"
#include "trainq/status.h"

namespace trainq {

class Client {
 public:
  explicit Client(StatePaths paths) : paths_(std::move(paths)) {}

  // Starts `trainq daemon` for this state dir unless one answers; waits until it does.
  Status EnsureDaemon();
  bool DaemonRunning() const;
  // A call whose non-2xx answer becomes the Status the daemon sent (code and message).
  Result<nlohmann::json> Call(const std::string& method, const std::string& target,
                              const std::string& body = "");
  const StatePaths& paths() const { return paths_; }

 private:
  StatePaths paths_;
};

}  // namespace trainq
