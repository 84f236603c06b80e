#include "src/man/man_pages.h"

#include <CLI/CLI.hpp>

#include "src/cli/cli.h"
#include "src/daemon/command_line.h"

namespace trainq {

std::vector<ManFile> TrainqManFiles() {
  CommandLine trainq(CommandTable());
  CLI::App trainqd;
  TrainqdArgs trainqd_args;
  DescribeTrainqd(trainqd, trainqd_args);
  return {
      {"trainq.1", TrainqManPage(trainq.app(), CommandTable())},
      {"trainqd.8", TrainqdManPage(trainqd)},
      {"trainq.toml.5", ConfigManPage(ConfigOptions())},
  };
}

}  // namespace trainq
