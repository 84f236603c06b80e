#include "src/cli/completion.h"

#include <cstdio>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace trainq {

namespace {

struct Command {
  std::string path;  // "config set"
  std::string help;
  std::vector<std::string> words;   // subcommands and options that complete here
  std::vector<std::string> valued;  // options that take a value (no completion after them)
  std::vector<std::pair<std::string, std::string>> options;  // name, help (fish)
  std::vector<std::pair<std::string, std::string>> subs;     // name, help (fish)
};

void Collect(CLI::App* app, const std::string& path, std::vector<Command>& out) {
  Command c{path, app->get_description(), {}, {}, {}, {}};
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    c.words.push_back(sub->get_name());
    c.subs.emplace_back(sub->get_name(), sub->get_description());
  }
  for (const CLI::Option* o : app->get_options()) {
    if (!o->nonpositional()) continue;
    for (const std::string& n : o->get_lnames()) {
      c.words.push_back("--" + n);
      c.options.emplace_back("--" + n, o->get_description());
      if (o->get_type_size() != 0) c.valued.push_back("--" + n);
    }
    for (const std::string& n : o->get_snames()) {
      c.words.push_back("-" + n);
      if (o->get_type_size() != 0) c.valued.push_back("-" + n);
    }
  }
  out.push_back(c);
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    Collect(sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
  }
}

std::string Joined(const std::vector<std::string>& words) {
  return fmt::format("{}", fmt::join(words, " "));
}

// Quoted for a fish double-quoted string.
std::string FishText(std::string text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\' || ch == '$') out += '\\';
    out += ch;
  }
  return out;
}

std::string Bash(const std::vector<Command>& commands, const std::set<std::string>& takes_ids) {
  std::string groups;
  std::set<std::string> valued;  // of every command: the word after one is its value
  for (const Command& c : commands) {
    if (!c.path.empty() && !c.subs.empty()) groups += " " + c.path;
    valued.insert(c.valued.begin(), c.valued.end());
  }
  std::string out =
      "# trainq completion for bash (zsh: through bashcompinit); "
      "source <(trainq completion bash)\n"
      "_trainq() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
      "  local cmd=\"\" w i skip=\"\"\n"
      "  local anyvalued=\" " +
      fmt::format("{}", fmt::join(valued, " ")) +
      " \"\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    if [[ -n \"$skip\" ]]; then skip=\"\"; continue; fi\n"
      "    case \"$w\" in\n"
      "      --) return 0 ;;\n"
      "      -*) [[ \"$anyvalued\" == *\" $w \"* ]] && skip=1 ;;\n"
      "      *) if [[ -z \"$cmd\" ]]; then cmd=\"$w\"\n"
      "         elif [[ \" " +
      groups +
      " \" == *\" $cmd \"* && \"$cmd\" != *\" \"* ]]; then "
      "cmd=\"$cmd $w\"; fi ;;\n"
      "    esac\n"
      "  done\n"
      "  local words=\"\" valued=\"\" ids=\"\"\n"
      "  case \"$cmd\" in\n";
  for (const Command& c : commands) {
    bool ids = takes_ids.count(c.path) > 0;
    out += fmt::format("    \"{}\") words=\"{}\"; valued=\"{}\"{} ;;\n", c.path, Joined(c.words),
                       Joined(c.valued), ids ? "; ids=1" : "");
  }
  out +=
      "  esac\n"
      "  # A value of an option that takes one: nothing to offer but files.\n"
      "  if [[ \" $valued \" == *\" $prev \"* ]]; then COMPREPLY=($(compgen -f -- \"$cur\")); "
      "return 0; fi\n"
      "  if [[ -n \"$ids\" && \"$cur\" != -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"$(trainq ls --all --quiet 2>/dev/null)\" -- \"$cur\"))\n"
      "    return 0\n"
      "  fi\n"
      "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "}\n"
      "complete -o default -F _trainq trainq\n";
  return out;
}

std::string Fish(const std::vector<Command>& commands, const std::set<std::string>& takes_ids) {
  std::string out = "# trainq completion for fish: trainq completion fish | source\n";
  out += "complete -c trainq -f\n";
  for (const Command& c : commands) {
    // The condition: exactly this command path has been typed.
    std::string cond;
    if (c.path.empty()) {
      cond = "__fish_use_subcommand";
    } else {
      std::string last = c.path.substr(c.path.rfind(' ') + 1);
      cond = "__fish_seen_subcommand_from " + last;
      if (c.path.find(' ') != std::string::npos) {
        cond =
            "__fish_seen_subcommand_from " + c.path.substr(0, c.path.find(' ')) + "; and " + cond;
      }
    }
    for (const auto& [name, help] : c.subs) {
      std::string guard = cond;
      if (!c.path.empty()) {
        std::vector<std::string> names;
        for (const auto& s : c.subs) names.push_back(s.first);
        guard += "; and not __fish_seen_subcommand_from " + Joined(names);
      }
      out += fmt::format("complete -c trainq -n \"{}\" -a {} -d \"{}\"\n", guard, name,
                         FishText(help));
    }
    for (const auto& [name, help] : c.options) {
      if (c.path.empty()) continue;  // global options: written once below
      out += fmt::format("complete -c trainq -n \"{}\" -l {} -d \"{}\"\n", cond, name.substr(2),
                         FishText(help));
    }
    if (takes_ids.count(c.path)) {
      out += fmt::format(
          "complete -c trainq -n \"{}\" -a \"(trainq ls --all --quiet 2>/dev/null)\"\n", cond);
    }
  }
  for (const auto& [name, help] : commands.front().options) {
    out += fmt::format("complete -c trainq -l {} -d \"{}\"\n", name.substr(2), FishText(help));
  }
  return out;
}

}  // namespace

int CmdCompletion(CLI::App& app, const std::set<std::string>& job_id_commands,
                  const std::string& shell) {
  std::vector<Command> commands;
  Collect(&app, "", commands);
  if (shell == "bash") {
    std::fputs(Bash(commands, job_id_commands).c_str(), stdout);
  } else if (shell == "zsh") {
    // Sourced (`source <(trainq completion zsh)`), or autoloaded as _trainq from a folder of
    // $fpath, where the package installs it: zsh then runs the file as _trainq's body the
    // first time trainq is completed, and that call completes too.
    std::fputs("#compdef trainq\nautoload -U +X bashcompinit && bashcompinit\n", stdout);
    std::fputs(Bash(commands, job_id_commands).c_str(), stdout);
    std::fputs(
        "if [[ ${funcstack[1]-} == _trainq ]]; then _bash_complete -o default -F _trainq; fi\n",
        stdout);
  } else if (shell == "fish") {
    std::fputs(Fish(commands, job_id_commands).c_str(), stdout);
  } else {
    std::fprintf(stderr,
                 "trainq: completion: '%s' is not a shell trainq completes; use bash, "
                 "zsh or fish\n",
                 shell.c_str());
    return 2;
  }
  return 0;
}

}  // namespace trainq
