// trainqd(8): its options come from trainqd's own parser (DescribeTrainqd); the prose around
// them is written here.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "src/core/version.h"
#include "src/man/app_roff.h"
#include "src/man/man_pages.h"
#include "src/man/roff.h"

namespace trainq {

namespace {

void TrainqdDescription(ManPage& page) {
  page.Section("DESCRIPTION");
  page.Paragraph(RoffBold("trainqd") +
                 RoffText(" schedules and runs the jobs of trainq(1). It runs in the "
                          "foreground and logs to standard error; a service manager runs it so, "
                          "and trainq starts it detached, its output appended to daemon.log in "
                          "the state dir."));
  page.Paragraph(
      RoffText("A personal daemon serves one user and one state dir: any trainq "
               "command starts it when none answers. With --shared, one daemon, run "
               "as root, serves every user of the machine: its state is in "
               "/var/lib/trainq, its socket /run/trainq/trainq.sock, and each job runs "
               "as its submitter."));
  page.Paragraph(
      RoffText("Running jobs survive the daemon's restarts and crashes: each attempt "
               "runs under its own supervisor, trainq-shim, and a new daemon adopts "
               "the jobs that still run and records the end of those that ended "
               "meanwhile. Stop it with trainq daemon stop or SIGTERM; restart it "
               "after an upgrade or a config change."));
}

void TrainqdFiles(ManPage& page) {
  page.Section("FILES");
  page.Item(RoffText("~/.local/state/trainq (or $TRAINQ_STATE_DIR, or --state-dir)"),
            RoffText("A personal daemon's state dir ($XDG_STATE_HOME/trainq where that is "
                     "set): trainq.db, daemon.log, daemon.lock, settings.json, trainq.sock, "
                     "and runs/, each job's run directory."));
  page.Item(RoffText("/var/lib/trainq"), RoffText("The state dir with --shared."));
  page.Item(RoffText("/run/trainq/trainq.sock"), RoffText("The API's socket with --shared."));
  page.Item(RoffText("config.toml"),
            RoffText("The config file, in the state dir: ") + RoffBold("trainq.toml") +
                RoffText("(5). Read at start; trainqd --check-config checks it."));
}

void TrainqdSignals(ManPage& page) {
  page.Section("SIGNALS");
  page.Item(RoffBold("SIGTERM") + ", " + RoffBold("SIGINT"),
            RoffText("Stop the daemon; running jobs keep running."));
}

void TrainqdExitStatus(ManPage& page) {
  page.Section("EXIT STATUS");
  page.Item("0", RoffText("Stopped as asked; with --check-config, the config is valid."));
  page.Item("1", RoffText("Any other failure; with --new-cluster-key, the file exists."));
  page.Item("2", RoffText("Invalid input: a bad option, or a config the daemon does not accept."));
  page.Item("4", RoffText("Not allowed: a state dir or socket directory another user could read "
                          "or plant files in."));
}

void TrainqdEnvironment(ManPage& page) {
  page.Section("ENVIRONMENT");
  page.Item(RoffBold("TRAINQ_STATE_DIR"), RoffText("The state dir when --state-dir is not given."));
  page.Item(RoffBold("TRAINQ_FAKE_GPUS"),
            RoffText("A simulated GPU file, as the fake_gpus option; it wins over the file."));
  page.Item(RoffBold("TRAINQ_CA"),
            RoffText("CA certificates (PEM) for the other nodes of a cluster when tls_ca is "
                     "not set."));
}

}  // namespace

std::string TrainqdManPage(const CLI::App& app) {
  ManPage page("TRAINQD", "8", fmt::format("trainq {}", kVersion), "System Administration");
  page.Section("NAME");
  std::string tagline = Tagline(app);
  page.Text(RoffText("trainqd - " + tagline.substr(0, tagline.find(';'))));
  page.Section("SYNOPSIS");
  page.Paragraph(UsageRoff(app, "trainqd"));
  TrainqdDescription(page);
  page.Section("OPTIONS");
  AddArgumentItems(page, app, /*with_help=*/true);
  TrainqdFiles(page);
  TrainqdSignals(page);
  TrainqdExitStatus(page);
  TrainqdEnvironment(page);
  page.Section("SEE ALSO");
  page.Paragraph(RoffBold("trainq") + "(1), " + RoffBold("trainq.toml") +
                 "(5); docs/operations.md in share/doc/trainq.");
  return page.text();
}

}  // namespace trainq
