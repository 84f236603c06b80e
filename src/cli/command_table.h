// The CLI's commands, one row each. Parsing (CLI11), dispatch, shell completion, "did you
// mean", `trainq --help` and trainq(1) (src/man, from the parser) all come from this table, so
// a new command is one row and the function its action calls.
#pragma once

#include <functional>
#include <set>
#include <span>
#include <string>
#include <string_view>

namespace CLI {
class App;
}

namespace trainq {

class Client;

// What a command's action gets when it runs.
struct Invocation {
  CLI::App& root;                          // the whole command line, parsed
  Client* client = nullptr;                // null for a row that runs without a daemon
  std::span<const std::string> raw_words;  // a raw-words row's words, unparsed
};

using Action = std::function<int(Invocation&)>;
// Adds a command's options and arguments to `cmd`, bound to storage the returned action owns
// and reads; the action runs when this command is the one given.
using Setup = Action (*)(CLI::App& cmd);

enum CommandFlag : unsigned {
  kJobIds = 1,    // its positional words are job ids (completion offers them)
  kLocal = 2,     // runs in the client alone: no daemon is asked or started
  kRawWords = 4,  // its words are handed over unparsed: they look like ours but are another
                  // program's options (sbatch's)
  kNoData = 8,    // prints no data, so takes no --json: a job's own output (run), an id as
                  // sbatch prints it (--parsable is its form for scripts), a shell script, or
                  // one line saying what an action did
};

struct CommandRow {
  std::string_view path;  // "config set": a command below the row "config", listed before it
  std::string_view help;
  Setup setup = nullptr;  // null: a group, which requires one of its commands
  unsigned flags = 0;     // CommandFlags

  bool Has(CommandFlag flag) const { return (flags & flag) != 0; }
};

// Every command, a group before the commands below it, in the order `--help` lists them.
std::span<const CommandRow> CommandTable();

// The paths of the rows whose words are job ids ("show", "logs", ...).
std::set<std::string> JobIdCommands(std::span<const CommandRow> rows = CommandTable());

// Options given before the command, which every command reads.
struct GlobalOptions {
  std::string state_dir;
  std::string server;
};

struct GlobalOptionRow {
  std::string_view name;  // "--state-dir"; each takes one value
  std::string_view help;
  std::string GlobalOptions::*field;
};

std::span<const GlobalOptionRow> GlobalOptionTable();

}  // namespace trainq
