#include "src/daemon/command_line.h"

#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "src/core/version.h"
#include "src/daemon/cluster_key.h"
#include "src/daemon/daemon.h"
#include "src/os/process.h"
#include "src/os/state_paths.h"

namespace trainq {

void DescribeTrainqd(CLI::App& app, TrainqdArgs& args) {
  app.name("trainqd");
  app.description("trainqd: the trainq daemon; runs in the foreground and logs to stderr");
  app.set_version_flag("--version", fmt::format("trainqd {}", kVersion));
  app.add_option("--state-dir", args.state_dir,
                 "instance directory (default: $TRAINQ_STATE_DIR or ~/.local/state/trainq)");
  app.add_flag("--check-config", args.check_config,
               "read the state dir's config.toml, print every problem and exit: 0 valid, 2 not");
  app.add_flag("--shared", args.shared,
               "one daemon for every user of this machine (as root): state in /var/lib/trainq, "
               "socket /run/trainq/trainq.sock, jobs run as their submitters");
  app.add_option("--socket", args.socket,
                 "the API's Unix socket (default: trainq.sock in the state "
                 "dir; /run/trainq/trainq.sock with --shared)");
  app.add_option("--new-cluster-key", args.new_cluster_key,
                 "write a new cluster key (256 random bits, mode 0600) to FILE and exit; copy it "
                 "to every node of the cluster (docs/cluster.md)")
      ->option_text("FILE");
  app.require_subcommand(0, 1);
  CLI::App* shim = app.add_subcommand("shim", "");  // internal: supervises one attempt
  shim->group("");
  shim->add_option("run_dir", args.shim_run_dir)->required();
}

int RunTrainqd(int argc, char** argv) {
  CLI::App app;
  TrainqdArgs args;
  DescribeTrainqd(app, args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "trainqd: %s; see 'trainqd --help'\n", e.what());
    return 2;
  }
  if (app.got_subcommand("shim")) return RunShim(args.shim_run_dir);
  const std::string& new_key = args.new_cluster_key;
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
  if (args.shared && args.state_dir.empty()) args.state_dir = kSharedStateDir;
  DaemonOptions options;
  options.paths = ResolveStatePaths(args.state_dir);
  options.shared = args.shared;
  options.socket = args.socket;
  if (args.check_config) return CheckDaemonConfig(options);
  return RunDaemon(options);
}

}  // namespace trainq
