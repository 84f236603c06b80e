#include "src/cli/cli.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "src/cli/commands.h"
#include "src/cli/suggest.h"
#include "src/core/version.h"

namespace trainq {

namespace {

// `--state-dir DIR`: the next word is this option's value, not a command.
bool GlobalOptionTakesNext(std::string_view arg) {
  for (const GlobalOptionRow& option : GlobalOptionTable()) {
    if (arg == option.name) return true;
  }
  return false;
}

// `--state-dir=DIR`.
bool GlobalOptionWithValue(std::string_view arg) {
  for (const GlobalOptionRow& option : GlobalOptionTable()) {
    if (arg.starts_with(option.name) && arg.substr(option.name.size()).starts_with('=')) {
      return true;
    }
  }
  return false;
}

// The index of the first argument that is not a global option or its value (the command
// word, or an option of the top level's such as --help); argc when there is none.
int FirstWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (GlobalOptionTakesNext(arg)) {
      ++i;
      continue;
    }
    if (!GlobalOptionWithValue(arg)) return i;
  }
  return argc;
}

// An argument CLI11 did not expect, given to a command that runs one (`submit`, `run`...):
// most often the command's own option without the `--` before the command. The hint says so.
std::optional<std::string> CommandOptionHint(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() != static_cast<int>(CLI::ExitCodes::ExtrasError)) return std::nullopt;
  CLI::App* level = &app;
  std::string path;
  while (!level->get_subcommands().empty()) {
    level = level->get_subcommands().front();
    path += (path.empty() ? "" : " ") + level->get_name();
  }
  if (level == &app || level->get_option_no_throw("command") == nullptr) return std::nullopt;
  return fmt::format(
      "{}; an option of the command goes after -- (trainq {} [OPTIONS] -- COMMAND [ARGS...])",
      e.what(), path);
}

// A command word that names no command, at the top or inside a group of commands (`config`,
// `token`, `daemon`...): "unknown command 'submt'; did you mean 'submit'?", which CLI11 would
// have put as "A subcommand is required" or an unexpected argument.
std::optional<std::string> UnknownCommand(CLI::App& app, int argc, char** argv) {
  CLI::App* level = &app;
  std::string path = "";
  bool options = false;  // inside a command, CLI11's complaint about them is the one to show
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (level == &app && GlobalOptionTakesNext(arg)) {
      ++i;
      continue;
    }
    if (arg.starts_with("-")) {
      options = true;
      continue;
    }
    std::vector<CLI::App*> subs = level->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return std::nullopt;  // a command's own arguments
    CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (CLI::App* sub : subs) {
      if (sub->get_name().empty()) continue;  // an option group, not a command
      names.push_back(sub->get_name());
      if (sub->check_name(std::string(arg))) next = sub;
    }
    if (next == nullptr) {
      std::string text = fmt::format("unknown command '{}{}'", path, arg);
      if (std::optional<std::string> near = ClosestWord(arg, names)) {
        text += fmt::format("; did you mean '{}{}'?", path, *near);
      } else {
        text += fmt::format("; the commands are: {}", fmt::join(names, ", "));
      }
      return text;
    }
    level = next;
    path += next->get_name() + " ";
  }
  // A group of commands given none of them.
  std::vector<std::string> names;
  for (CLI::App* sub : level->get_subcommands([](CLI::App*) { return true; })) {
    if (!sub->get_name().empty()) names.push_back(sub->get_name());
  }
  if (names.empty() || (level != &app && (options || !level->get_require_subcommand_min()))) {
    return std::nullopt;
  }
  return fmt::format("give a command{}: {}; see 'trainq {}--help'",
                     path.empty() ? "" : " after '" + path.substr(0, path.size() - 1) + "'",
                     fmt::join(names, ", "), path);
}

}  // namespace

CommandLine::CommandLine(std::span<const CommandRow> rows)
    : rows_(rows),
      app_(std::make_unique<CLI::App>("trainq: a GPU-aware queue for deep-learning training jobs",
                                      "trainq")) {
  app_->set_version_flag("--version", fmt::format("trainq {}", kVersion));
  app_->require_subcommand(1, 1);
  app_->fallthrough();
  for (const GlobalOptionRow& option : GlobalOptionTable()) {
    app_->add_option(std::string(option.name), global_.*option.field, std::string(option.help));
  }
  std::map<std::string_view, CLI::App*> by_path;
  for (const CommandRow& row : rows_) Add(row, by_path);
}

CommandLine::~CommandLine() = default;

// Settings CLI11 copies from a parent when a command is made (how many commands it takes)
// are set on a group before the commands below it are added.
void CommandLine::Add(const CommandRow& row, std::map<std::string_view, CLI::App*>& by_path) {
  size_t space = row.path.rfind(' ');
  CLI::App* parent = app_.get();
  if (space != std::string_view::npos) {
    auto found = by_path.find(row.path.substr(0, space));
    if (found == by_path.end()) {
      std::fprintf(stderr, "trainq: command '%.*s' is listed before its group\n",
                   static_cast<int>(row.path.size()), row.path.data());
      std::abort();
    }
    parent = found->second;
  }
  std::string_view name = space == std::string_view::npos ? row.path : row.path.substr(space + 1);
  CLI::App* cmd = parent->add_subcommand(std::string(name), std::string(row.help));
  by_path[row.path] = cmd;
  if (row.setup == nullptr) cmd->require_subcommand(1, 1);
  entries_[cmd] = {&row, row.setup == nullptr ? Action() : row.setup(*cmd)};
}

// `trainq [GLOBAL OPTIONS] sbatch WORDS...`: the words after a raw-words command are another
// program's (its options look like ours but are not), so they are taken off before CLI11
// parses the rest. Returns how many arguments CLI11 should see.
int CommandLine::SplitRawWords(int argc, char** argv) {
  int i = FirstWord(argc, argv);
  if (i == argc) return argc;
  for (const CommandRow& row : rows_) {
    if (row.path == argv[i] && row.Has(kRawWords)) {
      raw_words_.assign(argv + i + 1, argv + argc);
      return i + 1;
    }
  }
  return argc;
}

std::optional<int> CommandLine::Parse(int argc, char** argv) {
  argc = SplitRawWords(argc, argv);
  try {
    app_->parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app_->exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app_->exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app_->exit(e);
  } catch (const CLI::ParseError& e) {
    if (std::optional<std::string> unknown = UnknownCommand(*app_, argc, argv)) {
      std::fprintf(stderr, "trainq: %s\n", unknown->c_str());
      return 2;
    }
    if (std::optional<std::string> hint = CommandOptionHint(*app_, e)) {
      std::fprintf(stderr, "trainq: %s\n", hint->c_str());
      return 2;
    }
    std::fprintf(stderr, "trainq: %s; see 'trainq --help'\n", e.what());
    return 2;
  }
  return std::nullopt;
}

const CommandLine::Entry* CommandLine::ChosenEntry() const {
  const CLI::App* level = app_.get();
  while (!level->get_subcommands().empty()) level = level->get_subcommands().front();
  auto found = entries_.find(level);
  return found == entries_.end() ? nullptr : &found->second;
}

const CommandRow* CommandLine::Chosen() const {
  const Entry* entry = ChosenEntry();
  return entry == nullptr ? nullptr : entry->row;
}

int CommandLine::Run() {
  const Entry* entry = ChosenEntry();
  if (entry == nullptr || !entry->action) {
    // CLI11 accepted no command, or a group without one of its commands.
    std::fprintf(stderr, "trainq: no command to run\n");
    std::abort();
  }
  Invocation invocation{*app_, nullptr, raw_words_};
  if (entry->row->Has(kLocal)) return entry->action(invocation);
  Result<ServerChoice> server = ChooseServer(global_.state_dir, global_.server);
  if (!server.ok()) {
    std::fprintf(stderr, "trainq: %s\n", server.status().message().c_str());
    return ExitCodeFor(server.status().code());
  }
  Client client(std::move(*server));
  invocation.client = &client;
  return entry->action(invocation);
}

std::vector<CommandRow> RowsFor(std::span<const CommandRow> rows, int argc, char** argv) {
  std::vector<CommandRow> all(rows.begin(), rows.end());
  int i = FirstWord(argc, argv);
  if (i == argc) return all;
  std::string_view arg = argv[i];
  if (arg == "--version" && i + 1 == argc) return {};
  std::vector<CommandRow> named;
  for (const CommandRow& row : rows) {
    std::string_view path = row.path;
    if (path == arg ||
        (path.size() > arg.size() && path.starts_with(arg) && path[arg.size()] == ' ')) {
      named.push_back(row);
    }
  }
  // `completion` describes every command.
  if (named.empty() || arg == "completion") return all;
  return named;
}

int RunCli(int argc, char** argv) {
  std::vector<CommandRow> rows = RowsFor(CommandTable(), argc, argv);
  CommandLine command_line(rows);
  if (std::optional<int> exit_code = command_line.Parse(argc, argv)) return *exit_code;
  return command_line.Run();
}

}  // namespace trainq
