#include "src/daemon/command_line.h"

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "src/daemon/cluster_key.h"
#include "src/daemon/daemon.h"
#include "src/os/process.h"
#include "src/os/state_paths.h"

namespace trainq {

int RunTrainqd(int argc, char** argv) {
  CLI::App app{"trainqd: the trainq daemon; runs in the foreground and logs to stderr", "trainqd"};
  app.set_version_flag("--version", "trainqd " TRAINQ_VERSION);
  std::string state_dir, shim_dir;
  bool check_config = false, shared = false;
  std::string socket, new_key;
  app.add_option("--state-dir", state_dir,
                 "instance directory (default: $TRAINQ_STATE_DIR or ~/.local/state/trainq)");
  app.add_flag("--check-config", check_config,
               "read the state dir's config.toml, print every problem and exit: 0 valid, 2 not");
  app.add_flag("--shared", shared,
               "one daemon for every user of this machine (as root): state in /var/lib/trainq, "
               "socket /run/trainq/trainq.sock, jobs run as their submitters");
  app.add_option("--socket", socket,
                 "the API's Unix socket (default: trainq.sock in the state "
                 "dir; /run/trainq/trainq.sock with --shared)");
  app.add_option("--new-cluster-key", new_key,
                 "write a new cluster key (256 random bits, mode 0600) to FILE and exit; copy it "
                 "to every node of the cluster (docs/cluster.md)")
      ->option_text("FILE");
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
  if (!new_key.empty()) {
    Status st = ClusterKey::Create(new_key);
    if (!st.ok()) {
      std::fprintf(stderr, "trainqd: --new-cluster-key: %s\n", st.message().c_str());
      return st.code() == Code::kConflict ? 1 : 2;
    }
    std::printf("%s: a new cluster key; copy it to every node's state dir (mode 0600)\n",
                new_key.c_str());
    return 0;
  }
  if (shared && state_dir.empty()) state_dir = kSharedStateDir;
  DaemonOptions options;
  options.paths = ResolveStatePaths(state_dir);
  options.shared = shared;
  options.socket = socket;
  if (check_config) return CheckDaemonConfig(options);
  return RunDaemon(options);
}

}  // namespace trainq
