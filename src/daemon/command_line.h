// trainqd's command line: the daemon in the foreground (what `trainq` and a service manager
// start), `--check-config` and the hidden `shim` subcommand. Returns the process exit code:
// 0 success, 2 invalid input (a bad config), 1 anything else.
#pragma once

namespace trainq {

int RunTrainqd(int argc, char** argv);

}  // namespace trainq
