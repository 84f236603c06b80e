// trainq.toml(5): the daemon's config file. Each option's item comes from the option table
// (src/daemon/config.h, ConfigOptions); the prose around them is docs/config.md's.
#include <fmt/format.h>

#include "src/core/version.h"
#include "src/man/man_pages.h"
#include "src/man/roff.h"

namespace trainq {

namespace {

void ConfigFileDescription(ManPage& page) {
  page.Section("DESCRIPTION");
  page.Paragraph(RoffText("trainqd(8) reads its options from a file named ") +
                 RoffBold("config.toml") +
                 RoffText(" in its state dir (~/.local/state/trainq/config.toml, "
                          "$TRAINQ_STATE_DIR/config.toml, or /var/lib/trainq/config.toml for "
                          "trainqd --shared) when it starts. A missing file means every default."));
  page.Paragraph(RoffText(
      "The file is one TOML table of options; every one is optional. An unknown option or a "
      "value of the wrong form stops the daemon with a message naming the option and the "
      "accepted form; trainqd --check-config (or trainq config check) reports every problem "
      "at once. The file is ASCII, top-level options only: inside a string write a character "
      "outside ASCII as \\uXXXX."));
  page.Paragraph(RoffText(
      "Restart the daemon (trainq daemon stop, then any command) to apply a change; running "
      "jobs keep running. The options marked so below also change while it runs, with trainq "
      "config set, and keep that value across restarts until trainq config unset."));
  page.Paragraph(RoffText(
      "Sizes take the forms of --mem (256MiB, 1G, 2GB) or an integer of bytes; durations are "
      "500ms, 30s, 2m, 1h, 1h30m, 7d, at most 36500d. A GPU list is an array of NVML indices "
      "([0, 1, 3]), the same as text (\"0,1,3\"), or \"all\"."));
}

void ConfigFileExample(ManPage& page) {
  page.Section("EXAMPLE");
  constexpr std::string_view kLines[] = {
      "headroom = \"512MiB\"",
      "oom_backoff = \"30s\"",
      "cpu_slots = 32",
      "oom_patterns = [\"my_framework: device allocation failed\"]",
  };
  page.Verbatim(kLines);
}

// "\fBheadroom\fR (\fIsize\fR)", then its help and what it takes.
void ConfigFileOption(ManPage& page, const OptionInfo& option) {
  std::string body = RoffMarkdown(option.help);
  if (!body.empty() && body.back() != '.') body += '.';
  body += RoffText(fmt::format(" Default: {}. Accepted: {}.", option.default_text, option.form));
  if (option.settable) {
    body += RoffText(" Changes at run time with ") + RoffBold("trainq config set") + ".";
  }
  page.Item(RoffBold(option.name) + " (" + RoffItalic(option.type) + ")", body);
}

}  // namespace

std::string ConfigManPage(std::span<const OptionInfo> options) {
  ManPage page("TRAINQ.TOML", "5", fmt::format("trainq {}", kVersion), "File Formats");
  page.Section("NAME");
  page.Text(
      RoffText("trainq.toml - the trainq daemon's config file, config.toml in its state dir"));
  page.Section("SYNOPSIS");
  page.Paragraph(RoffText("~/.local/state/trainq/config.toml"));
  page.LineBreak();
  page.Text(RoffText("$TRAINQ_STATE_DIR/config.toml"));
  page.LineBreak();
  page.Text(RoffText("/var/lib/trainq/config.toml"));
  ConfigFileDescription(page);
  ConfigFileExample(page);
  page.Section("OPTIONS");
  page.Paragraph(RoffText("In the order of the daemon's option table."));
  for (const OptionInfo& option : options) ConfigFileOption(page, option);
  page.Section("SEE ALSO");
  page.Paragraph(RoffBold("trainqd") + "(8), " + RoffBold("trainq") +
                 "(1); docs/config.md in share/doc/trainq.");
  return page.text();
}

}  // namespace trainq
