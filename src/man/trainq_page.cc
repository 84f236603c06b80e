// trainq(1): the sections around the commands are written here; every command, argument and
// option comes from the CLI's parser.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "src/core/version.h"
#include "src/man/app_roff.h"
#include "src/man/man_pages.h"
#include "src/man/roff.h"

namespace trainq {

namespace {

// "[\fB\-\-state\-dir\fR \fITEXT\fR] ...": the options every command reads.
std::string GlobalOptionsSynopsis(const CLI::App& app) {
  std::string out;
  for (const GlobalOptionRow& row : GlobalOptionTable()) {
    const CLI::Option* option = app.get_option_no_throw(std::string(row.name));
    if (option != nullptr) out += "[" + OptionTagRoff(*option) + "] ";
  }
  return out;
}

void TrainqSynopsis(ManPage& page, const CLI::App& app) {
  page.Section("SYNOPSIS");
  page.Paragraph(RoffBold("trainq") + " " + GlobalOptionsSynopsis(app) + RoffItalic("COMMAND") +
                 " [" + RoffItalic("OPTIONS") + "] [" + RoffItalic("ARGS") + "...]");
  page.LineBreak();
  page.Text(RoffBold("trainq") + " " + RoffItalic("COMMAND") + " " + RoffBold("--help"));
  page.LineBreak();
  page.Text(RoffBold("trainq --help") + " | " + RoffBold("--version"));
}

void TrainqDescription(ManPage& page) {
  page.Section("DESCRIPTION");
  page.Paragraph(RoffText(
      "trainq queues training commands and starts each one as soon as a GPU has the memory it "
      "needs, with CUDA_VISIBLE_DEVICES set. It keeps every job's output, exit status and peak "
      "GPU memory, and sends jobs that die of CUDA out-of-memory back to the queue."));
  page.Paragraph(RoffText("Every command is a request to the daemon, ") + RoffBold("trainqd") +
                 RoffText("(8). Without --server, trainq uses the shared daemon where one serves "
                          "this machine, else the personal daemon of its state dir, which it "
                          "starts when none answers."));
  page.Paragraph(
      RoffText("Each command has its own help: trainq submit --help. A command that "
               "prints data takes --json. Errors go to standard error, start with "
               "\"trainq:\" and say what to do."));
}

void TrainqGlobalOptions(ManPage& page, const CLI::App& app) {
  page.Section("GLOBAL OPTIONS");
  page.Paragraph(RoffText("Given before the command; every command reads them."));
  AddArgumentItems(page, app, /*with_help=*/true);
  page.Item(RoffBold("--json"),
            RoffText("Not an option of trainq itself: every command that prints data takes it, "
                     "to print JSON instead of a table (listed with each command below)."));
}

std::string CommandWords(const std::vector<const CLI::App*>& commands) {
  std::string out;
  for (const CLI::App* sub : commands) {
    out += (out.empty() ? "" : ", ") + RoffBold(sub->get_name());
  }
  return out;
}

// A row's section: its usage line, help, other names, commands below it, arguments, options.
void TrainqCommand(ManPage& page, const CLI::App& cmd, const CommandRow& row) {
  std::string path = "trainq " + std::string(row.path);
  page.Subsection(row.path);
  std::string usage = UsageRoff(cmd, path);
  if (row.Has(kRawWords)) usage += " " + RoffItalic("WORDS") + "...";
  page.Paragraph(usage);
  page.LineBreak();
  page.Text(RoffMarkdown(cmd.get_description()));
  std::string parent = path.substr(0, path.rfind(' ') + 1);
  for (const std::string& alias : cmd.get_aliases()) {
    page.LineBreak();
    page.Text(RoffText("Also ") + RoffBold(parent + alias) + ".");
  }
  if (row.Has(kRawWords)) {
    page.LineBreak();
    page.Text(
        RoffText("Its words are not parsed by trainq: they are another program's options "
                 "and arguments."));
  }
  if (std::vector<const CLI::App*> below = VisibleCommands(cmd); !below.empty()) {
    page.LineBreak();
    page.Text(RoffText(cmd.get_require_subcommand_min() > 0 ? "Give one of its commands: "
                                                            : "Its commands: ") +
              CommandWords(below) + ".");
  }
  AddArgumentItems(page, cmd, /*with_help=*/false);
}

void TrainqCommands(ManPage& page, const CLI::App& app, std::span<const CommandRow> rows) {
  page.Section("COMMANDS");
  page.Paragraph(RoffText("In the order trainq --help lists them; each also takes --help."));
  for (const CommandRow& row : rows) {
    const CLI::App* cmd = FindCommand(app, row.path);
    if (cmd == nullptr) {
      std::fprintf(stderr, "trainq-man: the parser has no command '%.*s'\n",
                   static_cast<int>(row.path.size()), row.path.data());
      std::abort();
    }
    TrainqCommand(page, *cmd, row);
  }
}

void TrainqExamples(ManPage& page) {
  page.Section("EXAMPLES");
  constexpr std::string_view kLines[] = {
      "trainq submit --gpus 1 --mem 20GiB -- python train.py --lr 3e-4",
      "trainq submit --gpus 2 -- torchrun train.py",
      "trainq ls",
      "trainq logs -f 1",
      "trainq cancel 10-20",
      "trainq pause; trainq resume",
      "source <(trainq completion bash)",
  };
  page.Verbatim(kLines);
}

void TrainqEnvironment(ManPage& page) {
  page.Section("ENVIRONMENT");
  page.Item(RoffBold("TRAINQ_STATE_DIR"),
            RoffText("The state dir when --state-dir is not given (default: $XDG_STATE_HOME/"
                     "trainq, else ~/.local/state/trainq)."));
  page.Item(RoffBold("TRAINQ_SERVER"),
            RoffText("The daemon to use when --server is not given: unix:/PATH.sock, "
                     "http://HOST:PORT or https://HOST:PORT."));
  page.Item(RoffBold("TRAINQ_TOKEN"),
            RoffText("The API token for a daemon reached over TCP; without it, trainq reads "
                     "$XDG_CONFIG_HOME/trainq/token (default ~/.config/trainq/token)."));
  page.Item(RoffBold("TRAINQ_CA"),
            RoffText("CA certificates (PEM) an https:// daemon's certificate is checked "
                     "against, in place of the system's."));
  page.Item(RoffBold("TRAINQ_JOB_ID"),
            RoffText("Set in every job; trainq requeue without ids requeues the job it runs in "
                     "(SLURM_JOB_ID too)."));
}

void TrainqFiles(ManPage& page) {
  page.Section("FILES");
  page.Item(RoffText("~/.local/state/trainq (or $TRAINQ_STATE_DIR)"),
            RoffText("The personal daemon's state: its database, config.toml, settings.json, "
                     "daemon.log and each job's run directory."));
  page.Item(RoffText("/run/trainq/trainq.sock"),
            RoffText("A shared daemon's socket: trainq uses it where it exists."));
  page.Item(RoffText("~/.config/trainq/token"),
            RoffText("The API token for a daemon reached over TCP (mode 0600)."));
}

void TrainqExitStatus(ManPage& page) {
  page.Section("EXIT STATUS");
  page.Item("0", RoffText("Success."));
  page.Item("1", RoffText("Any other failure (the daemon unreachable, a reply not understood)."));
  page.Item("2", RoffText("Invalid input: a bad option, argument or value."));
  page.Item("3", RoffText("No such job."));
  page.Item("4", RoffText("Not allowed: another user's socket, state dir or job; a missing, bad, "
                          "revoked or expired token, or a role that does not allow the request."));
  page.Paragraph(
      RoffText("trainq run exits with the job's exit code, trainq wait with the first "
               "failed job's; trainq daemon status exits 0 when the daemon answers, "
               "1 when it runs but is silent, 3 when none runs."));
}

void TrainqSeeAlso(ManPage& page) {
  page.Section("SEE ALSO");
  page.Paragraph(RoffBold("trainqd") + "(8), " + RoffBold("trainq.toml") + "(5)");
  page.Paragraph(
      RoffText("trainqd is the daemon the commands start on demand; trainq.toml its "
               "config file. The documentation is installed in share/doc/trainq: "
               "README.md, docs/workflow.md, docs/config.md, docs/operations.md."));
}

}  // namespace

std::string TrainqManPage(const CLI::App& app, std::span<const CommandRow> rows) {
  ManPage page("TRAINQ", "1", fmt::format("trainq {}", kVersion), "User Commands");
  page.Section("NAME");
  page.Text(RoffText("trainq - " + Tagline(app)));
  TrainqSynopsis(page, app);
  TrainqDescription(page);
  TrainqGlobalOptions(page, app);
  TrainqCommands(page, app, rows);
  TrainqExamples(page);
  TrainqEnvironment(page);
  TrainqFiles(page);
  TrainqExitStatus(page);
  TrainqSeeAlso(page);
  return page.text();
}

}  // namespace trainq
