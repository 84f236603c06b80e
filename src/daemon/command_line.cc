#include "src/daemon/command_line.h"

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "src/daemon/daemon.h"
#include "src/os/process.h"
#include "src/os/state_paths.h"

namespace trainq {

int RunTrainqd(int argc, char** argv) {
  CLI::App app{"trainqd: the trainq daemon; runs in the foreground and logs to stderr", "trainqd"};
  app.set_version_flag("--version", "trainqd " TRAINQ_VERSION);
  std::string state_dir, shim_dir;
  bool check_config = false;
  app.add_option("--state-dir", state_dir,
                 "instance directory (default: $TRAINQ_STATE_DIR or ~/.local/state/trainq)");
  app.add_flag("--check-config", check_config,
               "read the state dir's config.toml, print every problem and exit: 0 valid, 2 not");
  app.require_subcommand(0, 1);
  CLI::App* shim = app.add_subcommand("shim", "");  // internal: supervises one attempt
  shim->group("");
  shim->add_option("run_dir", shim_dir)->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "trainqd: %s; see 'trainqd --help'\n", e.what());
    return 2;
  }
  if (shim->parsed()) return RunShim(shim_dir);
  StatePaths paths = ResolveStatePaths(state_dir);
  if (check_config) return CheckDaemonConfig(paths);
  return RunDaemon({std::move(paths), true});
}

}  // namespace trainq
