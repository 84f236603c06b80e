// trainqd's options are declared once (DescribeTrainqd): what a parse fills in, and the shim
// kept out of sight.
#include "src/daemon/command_line.h"

#include <gtest/gtest.h>

#include <vector>

#include <CLI/CLI.hpp>

namespace trainq {
namespace {

TrainqdArgs ParseTrainqd(std::vector<const char*> words) {
  CLI::App app;
  TrainqdArgs args;
  DescribeTrainqd(app, args);
  words.insert(words.begin(), "trainqd");
  app.parse(static_cast<int>(words.size()), const_cast<char**>(words.data()));
  return args;
}

TEST(CommandLineTest, DescribeTrainqdBindsEachOption) {
  TrainqdArgs args =
      ParseTrainqd({"--state-dir", "/s", "--shared", "--check-config", "--socket", "/x.sock"});
  EXPECT_EQ(args.state_dir, "/s");
  EXPECT_TRUE(args.shared);
  EXPECT_TRUE(args.check_config);
  EXPECT_EQ(args.socket, "/x.sock");
  EXPECT_EQ(ParseTrainqd({"--new-cluster-key", "k"}).new_cluster_key, "k");
  EXPECT_EQ(ParseTrainqd({"shim", "/run/1"}).shim_run_dir, "/run/1");
}

TEST(CommandLineTest, TheShimIsHiddenFromHelp) {
  CLI::App app;
  TrainqdArgs args;
  DescribeTrainqd(app, args);
  EXPECT_EQ(app.get_name(), "trainqd");
  std::string help = app.help();
  EXPECT_NE(help.find("--check-config"), std::string::npos);
  EXPECT_EQ(help.find("shim"), std::string::npos) << help;
}

}  // namespace
}  // namespace trainq
