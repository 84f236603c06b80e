#include "src/cli/client.h"

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "src/api/http.h"
#include "src/daemon/config.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {

using json = nlohmann::json;

namespace {

Code CodeFromName(const std::string& name) {
  for (Code c : {Code::kInvalid, Code::kNotFound, Code::kConflict, Code::kUnavailable, Code::kIo}) {
    if (name == CodeName(c)) return c;
  }
  return Code::kInternal;
}

}  // namespace

bool Client::DaemonRunning() const {
  Result<HttpResponse> r = HttpCall(paths_.socket, "GET", "/v1/status", "", 2000);
  return r.ok() && r->status == 200;
}

Status Client::EnsureDaemon() {
  if (DaemonRunning()) return Status::Ok();
  // A config the daemon would refuse: say why now, not after the start timeout.
  if (Result<Config> config = LoadConfig(paths_.config); !config.ok()) return config.status();
  TRAINQ_RETURN_IF_ERROR(MakeDirs(paths_.state_dir));
  Result<std::string> self = SelfExecutable();
  if (!self.ok()) return self.status();
  TRAINQ_RETURN_IF_ERROR(StartDetached(
      {*self, "daemon", "--foreground", "--state-dir", paths_.state_dir}, paths_.log));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (DaemonRunning()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Unavailable("the trainq daemon did not start; see " + paths_.log);
}

Result<json> Client::Call(const std::string& method, const std::string& target,
                          const std::string& body) {
  Result<HttpResponse> r = HttpCall(paths_.socket, method, target, body);
  if (!r.ok()) return r.status();
  json doc = json::parse(r->body, nullptr, false);
  if (doc.is_discarded()) return Status::Internal("the daemon sent a malformed answer: " + r->body);
  if (r->status >= 200 && r->status < 300) return doc;
  if (doc.is_object() && doc.contains("error") && doc["error"].is_object()) {
    const json& e = doc["error"];
    return Status(CodeFromName(e.value("code", "internal")), e.value("message", "unknown error"));
  }
  return Status::Internal("the daemon answered HTTP " + std::to_string(r->status));
}

}  // namespace trainq
