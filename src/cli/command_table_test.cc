// The command table is the one list of commands: each row parses to itself, completion offers
// job ids where the table says, "did you mean" and a group's help name the table's commands,
// and README's CLI reference lists every command and no other.
#include "src/cli/command_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "src/cli/cli.h"
#include "src/cli/completion.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Words(std::string_view path) {
  std::vector<std::string> out;
  std::istringstream in{std::string(path)};
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// The names of the rows directly below `group` ("" for the top).
std::vector<std::string> Children(std::string_view group) {
  std::vector<std::string> out;
  for (const CommandRow& row : CommandTable()) {
    std::vector<std::string> words = Words(row.path);
    std::string parent;
    for (size_t i = 0; i + 1 < words.size(); ++i) parent += (i ? " " : "") + words[i];
    if (parent == group) out.push_back(words.back());
  }
  return out;
}

// The words that reach `row`, with a value for each required argument and option.
std::vector<std::string> MinimalArgs(CommandLine& cli, const CommandRow& row) {
  std::vector<std::string> args = {"trainq"};
  CLI::App* cmd = &cli.app();
  for (const std::string& word : Words(row.path)) {
    cmd = cmd->get_subcommand(word);
    args.push_back(word);
  }
  for (const CLI::Option* option : cmd->get_options()) {
    if (!option->get_required()) continue;
    if (option->nonpositional()) args.push_back("--" + option->get_lnames().front());
    args.push_back("1");
  }
  return args;
}

std::optional<int> Parse(CommandLine& cli, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return cli.Parse(static_cast<int>(argv.size()), argv.data());
}

TEST(CommandTableTest, EveryCommandParsesToItsRow) {
  for (const CommandRow& row : CommandTable()) {
    if (row.setup == nullptr) continue;
    CommandLine cli;
    std::vector<std::string> args = MinimalArgs(cli, row);
    EXPECT_EQ(Parse(cli, args), std::nullopt) << row.path;
    ASSERT_NE(cli.Chosen(), nullptr) << row.path;
    EXPECT_EQ(cli.Chosen()->path, row.path);
  }
}

// The README promises --json on every command that prints data: each row takes it unless the
// table says it prints none (kNoData), and no kNoData row takes it.
TEST(CommandTableTest, EveryCommandThatPrintsDataTakesJson) {
  for (const CommandRow& row : CommandTable()) {
    if (row.setup == nullptr) continue;
    CommandLine cli;
    CLI::App* cmd = &cli.app();
    for (const std::string& word : Words(row.path)) cmd = cmd->get_subcommand(word);
    bool takes = false;
    for (const CLI::Option* option : cmd->get_options()) {
      for (const std::string& name : option->get_lnames()) takes = takes || name == "json";
    }
    EXPECT_EQ(takes, !row.Has(kNoData)) << row.path;
  }
}

// What RunCli does: the parser holds only the rows the line needs.
std::optional<int> ParseWithRowsFor(std::vector<std::string> args, std::string* chosen) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  std::vector<CommandRow> rows =
      RowsFor(CommandTable(), static_cast<int>(argv.size()), argv.data());
  CommandLine cli(rows);
  std::optional<int> out = cli.Parse(static_cast<int>(argv.size()), argv.data());
  if (cli.Chosen() != nullptr) *chosen = cli.Chosen()->path;
  return out;
}

TEST(CommandTableTest, EveryCommandParsesWithOnlyTheRowsItsLineNeeds) {
  for (const CommandRow& row : CommandTable()) {
    if (row.setup == nullptr) continue;
    CommandLine full;
    std::vector<std::string> args = MinimalArgs(full, row);
    args.insert(args.begin() + 1, {"--state-dir", "/s"});
    std::string chosen;
    EXPECT_EQ(ParseWithRowsFor(args, &chosen), std::nullopt) << row.path;
    EXPECT_EQ(chosen, row.path);
  }
}

TEST(CommandTableTest, RowsForTakesOneCommandsRowsNoneForVersionAndAllOtherwise) {
  auto paths = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    std::vector<std::string> out;
    for (const CommandRow& row :
         RowsFor(CommandTable(), static_cast<int>(argv.size()), argv.data())) {
      out.emplace_back(row.path);
    }
    return out;
  };
  EXPECT_THAT(paths({"trainq", "--server", "unix:/x", "ls", "--json"}), testing::ElementsAre("ls"));
  EXPECT_THAT(paths({"trainq", "daemon", "stop"}),
              testing::ElementsAre("daemon", "daemon start", "daemon stop", "daemon status",
                                   "daemon backup"));
  EXPECT_THAT(paths({"trainq", "--version"}), testing::IsEmpty());
  size_t all = CommandTable().size();
  EXPECT_EQ(paths({"trainq", "--help"}).size(), all);
  EXPECT_EQ(paths({"trainq", "xyzzy"}).size(), all);
  EXPECT_EQ(paths({"trainq", "completion", "bash"}).size(), all);
  EXPECT_EQ(paths({"trainq", "--version", "ls"}).size(), all);

  std::string chosen;
  testing::internal::CaptureStderr();
  EXPECT_EQ(ParseWithRowsFor({"trainq", "config", "sett", "a", "b"}, &chosen), 2);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("unknown command 'config sett'; did you mean 'config set'?"));
  testing::internal::CaptureStdout();
  EXPECT_EQ(ParseWithRowsFor({"trainq", "--version"}, &chosen), 0);
  EXPECT_THAT(testing::internal::GetCapturedStdout(), HasSubstr("trainq "));
}

TEST(CommandTableTest, AGroupAlonePointsAtItsCommands) {
  for (const CommandRow& row : CommandTable()) {
    if (row.setup != nullptr) continue;
    CommandLine cli;
    testing::internal::CaptureStderr();
    EXPECT_EQ(Parse(cli, {"trainq", std::string(row.path)}), 2);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_THAT(err, HasSubstr(fmt::format("give a command after '{}': {}", row.path,
                                           fmt::join(Children(row.path), ", "))));
  }
}

// `trainq submit python train.py --lr 3`: the command's option without the `--` before the
// command. The answer says where it goes; an option that is no command's stays the parser's.
TEST(CommandTableTest, ACommandsOptionWithoutDashDashGetsAHint) {
  for (const char* verb : {"submit", "run"}) {
    CommandLine cli;
    testing::internal::CaptureStderr();
    EXPECT_EQ(Parse(cli, {"trainq", verb, "python3", "train.py", "--lr", "3"}), 2);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_THAT(err, HasSubstr("--lr"));
    EXPECT_THAT(err, HasSubstr(fmt::format("an option of the command goes after -- (trainq {} "
                                           "[OPTIONS] -- COMMAND [ARGS...])",
                                           verb)));
  }
  CommandLine ls;
  testing::internal::CaptureStderr();
  EXPECT_EQ(Parse(ls, {"trainq", "ls", "--bogus"}), 2);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), Not(HasSubstr("goes after --")));
}

TEST(CommandTableTest, AMistypedCommandGetsTheNearestRow) {
  CommandLine cli;
  testing::internal::CaptureStderr();
  EXPECT_EQ(Parse(cli, {"trainq", "config", "sett", "a", "b"}), 2);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("unknown command 'config sett'; did you mean 'config set'?"));
  CommandLine other;
  testing::internal::CaptureStderr();
  EXPECT_EQ(Parse(other, {"trainq", "xyzzy"}), 2);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr(fmt::format("the commands are: {}", fmt::join(Children(""), ", "))));
}

TEST(CommandTableTest, GlobalOptionsComeFromTheirTable) {
  CommandLine cli;
  EXPECT_EQ(Parse(cli, {"trainq", "--state-dir", "/s", "--server=unix:/x.sock", "ls"}),
            std::nullopt);
  EXPECT_EQ(cli.global().state_dir, "/s");
  EXPECT_EQ(cli.global().server, "unix:/x.sock");
  for (const GlobalOptionRow& option : GlobalOptionTable()) {
    EXPECT_NE(cli.app().get_option_no_throw(std::string(option.name)), nullptr) << option.name;
  }
}

TEST(CommandTableTest, RawWordsAreNotParsed) {
  CommandLine cli;
  EXPECT_EQ(Parse(cli, {"trainq", "--state-dir", "/s", "sbatch", "--gpus=2", "job.sh", "-x"}),
            std::nullopt);
  EXPECT_EQ(cli.Chosen()->path, "sbatch");
  EXPECT_EQ(cli.global().state_dir, "/s");
}

TEST(CommandTableTest, CompletionOffersJobIdsWhereTheTableSays) {
  CommandLine cli;
  testing::internal::CaptureStdout();
  ASSERT_EQ(CmdCompletion(cli.app(), JobIdCommands(), "bash"), 0);
  std::string bash = testing::internal::GetCapturedStdout();
  for (const CommandRow& row : CommandTable()) {
    size_t at = bash.find(fmt::format("    \"{}\") words=", row.path));
    ASSERT_NE(at, std::string::npos) << row.path << " is not completed";
    std::string line = bash.substr(at, bash.find('\n', at) - at);
    EXPECT_EQ(line.ends_with("; ids=1 ;;"), row.Has(kJobIds)) << line;
  }
  EXPECT_THAT(JobIdCommands(), ::testing::Contains("logs"));
}

// The command paths a README line such as "trainq node drain|resume NAME" or
// "trainq daemon [start]" documents: words while they name the table's commands.
std::set<std::string> DocumentedPaths(const std::string& line) {
  std::set<std::string> out;
  std::vector<std::string> paths = {""};
  for (std::string word : Words(line.substr(std::string("trainq ").size()))) {
    bool optional = word.starts_with('[') && word.ends_with(']');
    if (optional) word = word.substr(1, word.size() - 2);
    std::vector<std::string> next;
    for (const std::string& path : paths) {
      std::vector<std::string> children = Children(path);
      std::istringstream alternatives(word);
      for (std::string name; std::getline(alternatives, name, '|');) {
        if (std::find(children.begin(), children.end(), name) == children.end()) continue;
        next.push_back(path.empty() ? name : path + " " + name);
      }
    }
    if (next.empty()) break;
    if (optional) next.insert(next.end(), paths.begin(), paths.end());
    paths = next;
    out.insert(next.begin(), next.end());
  }
  return out;
}

std::vector<std::string> ReferenceLines() {
  std::ifstream in(std::string(TRAINQ_SOURCE_DIR) + "/README.md");
  std::vector<std::string> out;
  bool section = false, block = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) section = line == "## CLI reference";
    if (section && line.starts_with("```")) block = !block;
    if (section && block && line.starts_with("trainq ")) out.push_back(line);
  }
  return out;
}

TEST(CommandTableTest, TheReadmeReferenceListsEveryCommandAndNoOther) {
  std::vector<std::string> lines = ReferenceLines();
  ASSERT_GT(lines.size(), 20u) << "README.md's CLI reference is missing";
  std::set<std::string> documented;
  for (const std::string& line : lines) {
    std::set<std::string> paths = DocumentedPaths(line);
    std::string first = Words(line)[1];
    bool global = false;
    for (const GlobalOptionRow& option : GlobalOptionTable()) global |= first == option.name;
    EXPECT_TRUE(!paths.empty() || global) << "README names no command of the table:\n" << line;
    documented.insert(paths.begin(), paths.end());
  }
  for (const CommandRow& row : CommandTable()) {
    if (row.setup == nullptr) continue;
    EXPECT_TRUE(documented.count(std::string(row.path)))
        << "README.md's CLI reference lacks 'trainq " << row.path << "'";
  }
}

TEST(CommandTableTest, GroupsComeBeforeTheirCommands) {
  std::set<std::string> seen;
  for (const CommandRow& row : CommandTable()) {
    std::vector<std::string> words = Words(row.path);
    if (words.size() > 1) {
      EXPECT_TRUE(seen.count(words.front())) << row.path;
    }
    seen.emplace(row.path);
  }
}

}  // namespace
}  // namespace trainq
