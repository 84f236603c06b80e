// trainqd's command line: the daemon in the foreground (what `trainq` and a service manager
// start), `--check-config` and the hidden `shim` subcommand. Returns the process exit code:
// 0 success, 2 invalid input (a bad config), 1 anything else.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace trainq {

// What trainqd's command line says, as DescribeTrainqd's options fill it in.
struct TrainqdArgs {
  std::string state_dir;
  bool check_config = false;
  bool shared = false;
  std::string socket;
  std::string new_cluster_key;  // a file to write a new key to
  std::string shim_run_dir;     // set by the hidden `shim` subcommand
};

// Names `app` trainqd and declares its options and the hidden `shim` subcommand, bound to
// `args`, which must outlive the parse. RunTrainqd parses with it and trainqd(8) is made from
// it (src/man), so the page lists exactly the options the daemon takes.
void DescribeTrainqd(CLI::App& app, TrainqdArgs& args);

int RunTrainqd(int argc, char** argv);

}  // namespace trainq
