// `trainqd`: one daemon process per state dir, with one event loop that owns all
// state (docs/architecture.md, "The daemon and its seams").
#pragma once

#include <string>

#include "src/os/state_paths.h"
#include "trainq/status.h"

namespace trainq {

struct DaemonOptions {
  StatePaths paths;
  bool log_to_stderr = true;
};

// Runs until stopped (SIGTERM, SIGINT or `trainq daemon stop`). Running jobs keep running
// after it returns. Returns the process exit code.
int RunDaemon(const DaemonOptions& options);

// `trainqd --check-config`: reads the config as RunDaemon would and prints the problems on
// stderr, each naming its option. Returns 0 when the daemon would accept it, 2 when not.
int CheckDaemonConfig(const StatePaths& paths);

}  // namespace trainq
