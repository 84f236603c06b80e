// `trainq completion bash|zsh|fish`: a completion script for the shell, made from the
// command-line parser itself (every command, its subcommands and options), so it cannot
// miss a command added later. Job ids come from `trainq ls --all --quiet` as one types.
#pragma once

#include <set>
#include <string>

namespace CLI {
class App;
}

namespace trainq {

// The script for `shell`, offering job ids after the commands of `job_id_commands` ("show",
// "config set": paths as in the command table); exit 2 with the shells named for any other.
int CmdCompletion(CLI::App& app, const std::set<std::string>& job_id_commands,
                  const std::string& shell);

}  // namespace trainq
