// The trainq command line (README's CLI reference), made from the command table
// (src/cli/command_table.h).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "src/cli/command_table.h"

namespace trainq {

// Returns the process exit code: 0 success, 2 invalid input, 3 no such job, 1 anything else.
int RunCli(int argc, char** argv);

// The rows a command line needs parsed: the command it names with the commands below it, none
// for a lone `--version`, and all of them otherwise (help, completion, a mistyped word's "did
// you mean"). Building CLI11's parser for every command was half of what `trainq --version`
// cost (docs/benchmarks.md, "Start-up").
std::vector<CommandRow> RowsFor(std::span<const CommandRow> rows, int argc, char** argv);

// CLI11's parser for a table of commands, and the action of each command it parsed. Options
// are bound to storage this object owns, so it is neither copied nor moved.
class CommandLine {
 public:
  explicit CommandLine(std::span<const CommandRow> rows = CommandTable());
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // Parses the arguments. nullopt: a command to run; otherwise the exit code, having printed
  // the help, the version or what was wrong ("did you mean" for a mistyped command word).
  std::optional<int> Parse(int argc, char** argv);
  // The row of the command parsed (the innermost command word given); null before a parse.
  const CommandRow* Chosen() const;
  // Runs the chosen command: with a client of the daemon the global options choose, unless
  // its row is kLocal.
  int Run();

  CLI::App& app() { return *app_; }
  const GlobalOptions& global() const { return global_; }

 private:
  struct Entry {
    const CommandRow* row;
    Action action;  // empty for a group
  };
  const Entry* ChosenEntry() const;
  void Add(const CommandRow& row, std::map<std::string_view, CLI::App*>& by_path);
  int SplitRawWords(int argc, char** argv);

  std::span<const CommandRow> rows_;
  std::unique_ptr<CLI::App> app_;
  GlobalOptions global_;
  std::map<const CLI::App*, Entry> entries_;
  std::vector<std::string> raw_words_;
};

}  // namespace trainq
