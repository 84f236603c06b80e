// The HTTP API (docs/api.md): one table of routes (routes.cc), each a handler that calls the
// daemon's roles through their public methods, and a rule saying who may call it (routes.h),
// judged before the handler runs. The daemon hands it the roles once; the API owns none of
// them and holds no state of its own.
#pragma once

#include "src/api/asio.h"

#include <functional>
#include <string>

#include "src/api/http.h"
#include "src/daemon/agent.h"
#include "src/daemon/authenticator.h"
#include "src/daemon/config.h"
#include "src/daemon/daemon.h"
#include "src/daemon/dependencies.h"
#include "src/daemon/gpu_sampler.h"
#include "src/daemon/mode.h"
#include "src/daemon/runtime_config.h"
#include "src/daemon/scheduler.h"
#include "src/daemon/step_routes.h"
#include "src/daemon/submit_batcher.h"
#include "src/daemon/token_routes.h"
#include "src/os/clock.h"
#include "src/store/store.h"

namespace trainq {

class Stager;
class Watch;

// The roles the API calls, and the few things only the daemon does.
struct ApiParts {
  boost::asio::io_context* io = nullptr;
  Store* store = nullptr;
  const Clock* clock = nullptr;
  const Config* config = nullptr;  // the settings in force
  const DaemonOptions* options = nullptr;
  RuntimeConfig* settings = nullptr;
  const GpuSampler* sampler = nullptr;
  Authenticator* auth = nullptr;
  Agent* agent = nullptr;
  Scheduler* scheduler = nullptr;
  Mode* mode = nullptr;
  Dependencies* deps = nullptr;
  SubmitBatcher* submits = nullptr;
  TokenRoutes* tokens = nullptr;
  StepRoutes* steps = nullptr;
  Watch* watch = nullptr;  // the GPU history, the event stream, /metrics
  std::string node;
  std::function<int()> cpu_slots;
  // Job `id` reached a done state: its notifications go out.
  std::function<void(JobId)> job_ended;
  // `trainq config set` changed the settings in force.
  std::function<void()> settings_changed;
  // `trainq daemon stop`.
  std::function<void()> stop;
};

class Api {
 public:
  explicit Api(ApiParts parts) : d_(std::move(parts)) {}
  // Answers through `respond`, now or later from the loop.
  void Handle(HttpRequest request, Responder respond);

 private:
  ApiParts d_;
};

}  // namespace trainq
