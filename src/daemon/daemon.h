// `trainq daemon --foreground`: one process per node with one event loop that owns all
// state (DESIGN.md section 5).
#pragma once

#include <string>

#include "src/daemon/paths.h"
#include "trainq/status.h"

namespace trainq {

struct DaemonOptions {
  StatePaths paths;
  bool log_to_stderr = true;
};

// Runs until stopped (SIGTERM, SIGINT or `trainq daemon stop`). Running jobs keep running
// after it returns. Returns the process exit code.
int RunDaemon(const DaemonOptions& options);

}  // namespace trainq
