// A CLI11 parser as a man page shows it: a command's usage line, and an item for each of its
// arguments and options with the names, value text, default and help the parser itself has,
// so a page cannot list an option the program does not take or miss one it does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace trainq {

class ManPage;

// The program's description without its leading "NAME: ", for a page's NAME line.
std::string Tagline(const CLI::App& app);

// The command `path` ("config set") names below `app`; null when there is none.
const CLI::App* FindCommand(const CLI::App& app, std::string_view path);

// "\fBtrainq logs\fR [\fIOPTIONS\fR] \fIid\fR": `path` is the words that reach `cmd`.
// [OPTIONS] only where it has options besides --help.
std::string UsageRoff(const CLI::App& cmd, std::string_view path);

// "\fB\-n\fR, \fB\-\-tail\fR \fIINT:NONNEGATIVE\fR": an option's names and what it takes.
std::string OptionTagRoff(const CLI::Option& option);

// An item for each argument of `cmd`, then each option, in the order they were added; hidden
// ones (an empty group) left out, and -h/--help too unless `with_help`.
void AddArgumentItems(ManPage& page, const CLI::App& cmd, bool with_help);

// The commands directly below `cmd` a user may give, in order: not hidden ones (an empty
// group, as trainqd's `shim`) nor CLI11's option groups (no name).
std::vector<const CLI::App*> VisibleCommands(const CLI::App& cmd);

}  // namespace trainq
