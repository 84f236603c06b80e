// The man pages list what the programs take: every command of the table with every argument
// and option its parser has, trainqd's options but not its hidden shim, every config option;
// and groff reads them without a warning.
#include "src/man/man_pages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <CLI/CLI.hpp>

#include "src/cli/cli.h"
#include "src/daemon/command_line.h"
#include "src/man/app_roff.h"
#include "src/man/roff.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string PageNamed(const std::string& name) {
  for (ManFile& file : TrainqManFiles()) {
    if (file.name == name) return file.text;
  }
  ADD_FAILURE() << "no page " << name;
  return "";
}

// The text from the line `heading` to the next section or subsection.
std::string PartOf(const std::string& page, const std::string& heading) {
  size_t start = page.find(heading + "\n");
  if (start == std::string::npos) return "";
  size_t end = std::min(page.find("\n.SS ", start + 1), page.find("\n.SH ", start + 1));
  return page.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string CommandPart(const std::string& page, std::string_view path) {
  return PartOf(page, ".SS \"" + RoffText(path) + "\"");
}

TEST(ManPagesTest, TrainqListsEveryCommandInTableOrder) {
  std::string page = PageNamed("trainq.1");
  size_t last = 0;
  for (const CommandRow& row : CommandTable()) {
    size_t at = page.find(".SS \"" + RoffText(row.path) + "\"\n");
    ASSERT_NE(at, std::string::npos) << row.path;
    EXPECT_GT(at, last) << row.path << " is out of the table's order";
    last = at;
    EXPECT_THAT(CommandPart(page, row.path),
                HasSubstr(RoffBold("trainq " + std::string(row.path))));
  }
}

// Every argument and option the parser gives a command is in its section, with its help.
TEST(ManPagesTest, TrainqListsEveryOptionOfACommandAsItsParserHasIt) {
  std::string page = PageNamed("trainq.1");
  CommandLine cli;
  for (std::string_view path : {"submit", "logs", "ls", "sim replay", "config set"}) {
    const CLI::App* cmd = FindCommand(cli.app(), path);
    ASSERT_NE(cmd, nullptr) << path;
    std::string part = CommandPart(page, path);
    int options = 0;
    for (const CLI::Option* option : cmd->get_options()) {
      if (option == cmd->get_help_ptr()) continue;
      ++options;
      for (const std::string& name : option->get_lnames()) {
        EXPECT_THAT(part, HasSubstr(RoffBold("--" + name))) << path;
      }
      for (const std::string& name : option->get_snames()) {
        EXPECT_THAT(part, HasSubstr(RoffBold("-" + name))) << path;
      }
      if (option->get_positional()) {
        EXPECT_THAT(part, HasSubstr(RoffItalic(option->get_name(true, false)))) << path;
      }
      EXPECT_THAT(part, HasSubstr(RoffMarkdown(option->get_description()))) << path;
    }
    EXPECT_GT(options, 0) << path;
  }
  std::string submit = CommandPart(page, "submit");
  EXPECT_THAT(submit, HasSubstr(".TP\n\\fB\\-\\-gpus\\fR \\fIN|MIN:MAX\\fR\n"));
  EXPECT_THAT(submit, HasSubstr(".TP\n\\fB\\-\\-mem\\fR \\fITEXT\\fR\nGPU memory per GPU"));
  EXPECT_THAT(submit, HasSubstr("Also \\fBtrainq add\\fR."));
  EXPECT_THAT(CommandPart(page, "logs"), HasSubstr("\\fB\\-f\\fR, \\fB\\-\\-follow\\fR"));
  EXPECT_THAT(CommandPart(page, "sim replay"),
              HasSubstr("\\fB\\-\\-trace\\fR \\fITEXT\\fR (required)"));
}

TEST(ManPagesTest, TrainqGroupsNameTheirCommands) {
  std::string page = PageNamed("trainq.1");
  EXPECT_THAT(CommandPart(page, "config"),
              HasSubstr("Give one of its commands: \\fBshow\\fR, \\fBget\\fR, \\fBset\\fR"));
  EXPECT_THAT(CommandPart(page, "config"), HasSubstr("\\fBtrainq config\\fR \\fICOMMAND\\fR"));
  EXPECT_THAT(CommandPart(page, "daemon"), HasSubstr("Its commands: \\fBstart\\fR"));
  EXPECT_THAT(CommandPart(page, "sbatch"), HasSubstr("\\fBtrainq sbatch\\fR \\fIWORDS\\fR..."));
}

TEST(ManPagesTest, TrainqHasTheGlobalOptionsAndTheSectionsAroundTheCommands) {
  std::string page = PageNamed("trainq.1");
  std::string global = PartOf(page, ".SH \"GLOBAL OPTIONS\"");
  for (const GlobalOptionRow& row : GlobalOptionTable()) {
    EXPECT_THAT(global, HasSubstr(RoffBold(row.name))) << row.name;
    EXPECT_THAT(global, HasSubstr(RoffText(row.help))) << row.name;
  }
  for (std::string_view name : {"--help", "--version", "--json"}) {
    EXPECT_THAT(global, HasSubstr(RoffBold(name))) << name;
  }
  for (std::string_view section : {"NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXAMPLES",
                                   "ENVIRONMENT", "FILES", "EXIT STATUS", "SEE ALSO"}) {
    EXPECT_THAT(page, HasSubstr(".SH \"" + std::string(section) + "\"\n")) << section;
  }
  EXPECT_THAT(page, HasSubstr("source <(trainq completion bash)"));
  EXPECT_THAT(PartOf(page, ".SH \"ENVIRONMENT\""), HasSubstr("TRAINQ_SERVER"));
  EXPECT_THAT(PartOf(page, ".SH \"SEE ALSO\""), HasSubstr("\\fBtrainqd\\fR(8)"));
}

TEST(ManPagesTest, TrainqdHasItsOptionsButNotTheHiddenShim) {
  std::string page = PageNamed("trainqd.8");
  CLI::App app;
  TrainqdArgs args;
  DescribeTrainqd(app, args);
  std::string options = PartOf(page, ".SH \"OPTIONS\"");
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      EXPECT_THAT(options, HasSubstr(RoffBold("--" + name)));
    }
  }
  EXPECT_THAT(options, HasSubstr(RoffBold("--shared")));
  EXPECT_THAT(options, HasSubstr(RoffBold("--check-config")));
  EXPECT_THAT(options, HasSubstr("\\fB\\-\\-new\\-cluster\\-key\\fR \\fIFILE\\fR"));
  // The hidden `trainqd shim RUN_DIR`: no command, item or argument of it.
  EXPECT_THAT(page, Not(HasSubstr(RoffBold("shim"))));
  EXPECT_THAT(page, Not(HasSubstr("COMMAND")));
  EXPECT_THAT(page, Not(HasSubstr("run_dir")));
  EXPECT_THAT(page, HasSubstr(".SH \"SIGNALS\""));
  std::string synopsis = PartOf(page, ".SH \"SYNOPSIS\"");
  EXPECT_THAT(synopsis, HasSubstr("\\fBtrainqd\\fR [\\fIOPTIONS\\fR]"));
  EXPECT_THAT(synopsis, Not(HasSubstr("COMMAND")));
}

TEST(ManPagesTest, TheConfigPageHasEveryOptionInTableOrder) {
  std::string page = PageNamed("trainq.toml.5");
  EXPECT_THAT(page, HasSubstr("config.toml"));
  size_t last = 0;
  for (const OptionInfo& option : ConfigOptions()) {
    std::string tag = ".TP\n" + RoffBold(option.name) + " (" + RoffItalic(option.type) + ")\n";
    size_t at = page.find(tag);
    ASSERT_NE(at, std::string::npos) << option.name;
    EXPECT_GT(at, last) << option.name;
    last = at;
    std::string item = page.substr(at, page.find("\n.TP", at + 1) - at);
    EXPECT_THAT(item, HasSubstr(RoffText(option.form))) << option.name;
    EXPECT_EQ(item.find("trainq config set") != std::string::npos, option.settable) << option.name;
  }
}

TEST(ManPagesTest, TheConfigPageTurnsMarkdownIntoRoff) {
  OptionInfo option{"fake_gpus",
                    "path",
                    "\"\"",
                    "a path",
                    false,
                    "simulated GPU file ([simulated-gpus.md](simulated-gpus.md)); also "
                    "`TRAINQ_FAKE_GPUS`"};
  std::string page = ConfigManPage({&option, 1});
  EXPECT_THAT(page, HasSubstr(".TP\n\\fBfake_gpus\\fR (\\fIpath\\fR)\nsimulated GPU file "
                              "(simulated\\-gpus.md); also \\fBTRAINQ_FAKE_GPUS\\fR. Default: "
                              "\"\". Accepted: a path.\n"));
}

// What `man` shows comes from groff: the pages must give it nothing to warn about (-ww: every
// warning; -z: no output but the warnings).
TEST(ManPagesTest, GroffReadsEveryPageWithoutAWarning) {
  Result<std::string> groff = FindOnPath("groff");
  if (!groff.ok()) GTEST_SKIP() << "groff is not installed";
  std::string dir = ::testing::TempDir() + "/man_pages_test." + std::to_string(SelfPid());
  ASSERT_TRUE(MakeDirs(dir).ok());
  for (const ManFile& file : TrainqManFiles()) {
    std::string path = dir + "/" + file.name;
    ASSERT_TRUE(WriteFileAtomic(path, file.text, Durability::kNoSync).ok());
    Result<CommandOutput> run = RunCommand({*groff, "-man", "-ww", "-z", "-Tutf8", path});
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(run->exit_code, 0) << file.name;
    EXPECT_EQ(run->output, "") << file.name;
    EXPECT_TRUE(RemoveFile(path).ok());
  }
}

}  // namespace
}  // namespace trainq
