// trainq's man pages, made from the tables the programs run on: trainq(1) from the CLI's
// parser (built from the command table), trainqd(8) from trainqd's parser (DescribeTrainqd)
// and trainq.toml(5) from the daemon's option table. `trainq-man OUTDIR` writes them at
// build time (CMakeLists.txt, target `man`).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "src/cli/command_table.h"
#include "src/daemon/config.h"

namespace CLI {
class App;
}

namespace trainq {

// trainq(1): `app` is the CLI's whole parser (CommandLine over `rows`), each row a section.
std::string TrainqManPage(const CLI::App& app, std::span<const CommandRow> rows);
// trainqd(8): `app` is the parser DescribeTrainqd made.
std::string TrainqdManPage(const CLI::App& app);
// trainq.toml(5): the config file, one item per option in table order.
std::string ConfigManPage(std::span<const OptionInfo> options);

struct ManFile {
  std::string name;  // "trainq.1"
  std::string text;  // the page, in roff
};
// The three pages, from the real tables: trainq.1, trainqd.8, trainq.toml.5.
std::vector<ManFile> TrainqManFiles();

}  // namespace trainq
