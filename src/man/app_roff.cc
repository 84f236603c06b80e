#include "src/man/app_roff.h"

#include <algorithm>

#include <CLI/CLI.hpp>

#include "src/man/roff.h"

namespace trainq {

namespace {

// CLI11 leaves an option of the empty group out of its help.
bool HiddenOption(const CLI::Option& option) { return option.get_group().empty(); }

// Takes any number of values (a vector), as CLI11's help marks with "...".
bool TakesMany(const CLI::Option& option) {
  return option.get_expected_max() >= CLI::detail::expected_max_vector_size;
}

// What follows an option's names, as CLI11's own help writes it (Formatter::make_option_opts):
// its option_text, else its type name, default, "..." for many values and whether it is
// required.
std::string OptionValueRoff(const CLI::Option& option) {
  std::string out;
  if (!option.get_option_text().empty()) {
    out += " " + RoffItalic(option.get_option_text());
  } else if (option.get_type_size() != 0) {
    if (!option.get_type_name().empty()) out += " " + RoffItalic(option.get_type_name());
    if (!option.get_default_str().empty()) out += "=" + RoffText(option.get_default_str());
    if (TakesMany(option)) {
      out += " ...";
    } else if (option.get_expected_min() > 1) {
      out += " x " + std::to_string(option.get_expected());
    }
  }
  if (option.get_required()) out += " (required)";
  return out;
}

std::string ArgumentTagRoff(const CLI::Option& argument) {
  return RoffItalic(argument.get_name(true, false)) + (TakesMany(argument) ? " ..." : "");
}

}  // namespace

std::string Tagline(const CLI::App& app) {
  std::string text = app.get_description();
  std::string prefix = app.get_name() + ": ";
  return text.starts_with(prefix) ? text.substr(prefix.size()) : text;
}

const CLI::App* FindCommand(const CLI::App& app, std::string_view path) {
  const CLI::App* level = &app;
  while (level != nullptr && !path.empty()) {
    std::string_view word = path.substr(0, path.find(' '));
    path.remove_prefix(std::min(path.size(), word.size() + 1));
    std::vector<const CLI::App*> found =
        level->get_subcommands([word](const CLI::App* sub) { return sub->get_name() == word; });
    level = found.empty() ? nullptr : found.front();
  }
  return level;
}

std::string UsageRoff(const CLI::App& cmd, std::string_view path) {
  std::string out = RoffBold(path);
  std::vector<const CLI::Option*> options = cmd.get_options([&cmd](const CLI::Option* o) {
    return o->nonpositional() && !HiddenOption(*o) && o != cmd.get_help_ptr();
  });
  if (!options.empty()) out += " [" + RoffItalic("OPTIONS") + "]";
  for (const CLI::Option* argument : cmd.get_options(
           [](const CLI::Option* o) { return o->get_positional() && !HiddenOption(*o); })) {
    std::string word =
        RoffItalic(argument->get_name(true, false)) + (TakesMany(*argument) ? "..." : "");
    out += " " + (argument->get_required() ? word : "[" + word + "]");
  }
  if (!VisibleCommands(cmd).empty()) {
    std::string word = RoffItalic("COMMAND");
    out += " " + (cmd.get_require_subcommand_min() > 0 ? word : "[" + word + "]");
  }
  return out;
}

std::string OptionTagRoff(const CLI::Option& option) {
  std::string names;
  const auto add = [&names](const std::string& name) {
    names += (names.empty() ? "" : ", ") + RoffBold(name);
  };
  for (const std::string& name : option.get_snames()) add("-" + name);
  for (const std::string& name : option.get_lnames()) add("--" + name);
  return names + OptionValueRoff(option);
}

void AddArgumentItems(ManPage& page, const CLI::App& cmd, bool with_help) {
  for (const CLI::Option* argument : cmd.get_options(
           [](const CLI::Option* o) { return o->get_positional() && !HiddenOption(*o); })) {
    page.Item(ArgumentTagRoff(*argument), RoffMarkdown(argument->get_description()));
  }
  for (const CLI::Option* option : cmd.get_options([&](const CLI::Option* o) {
         return o->nonpositional() && !HiddenOption(*o) && (with_help || o != cmd.get_help_ptr());
       })) {
    page.Item(OptionTagRoff(*option), RoffMarkdown(option->get_description()));
  }
}

std::vector<const CLI::App*> VisibleCommands(const CLI::App& cmd) {
  return cmd.get_subcommands([](const CLI::App* sub) {
    return !sub->get_name().empty() && !sub->get_group().empty() && !sub->get_disabled();
  });
}

}  // namespace trainq
