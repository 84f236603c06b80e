// Table text reaches a page as text, never as a roff request or escape.
#include "src/man/roff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string_view>

namespace trainq {
namespace {

using ::testing::HasSubstr;

TEST(RoffTest, HyphensBecomeMinusSoOptionsCopyAsTyped) {
  EXPECT_EQ(RoffText("--gpus"), "\\-\\-gpus");
  EXPECT_EQ(RoffBold("-f"), "\\fB\\-f\\fR");
  EXPECT_EQ(RoffText("10-20"), "10\\-20");
}

TEST(RoffTest, BackslashesPrintAsThemselves) {
  // \e, not \\: a macro's argument is read in copy mode, where \\ is an escape again.
  EXPECT_EQ(RoffText("C:\\dir \\fB"), "C:\\edir \\efB");
  EXPECT_EQ(RoffText("\\uXXXX"), "\\euXXXX");
}

TEST(RoffTest, ALineStartingWithADotOrQuoteStaysText) {
  EXPECT_EQ(RoffText(".local"), "\\&.local");
  EXPECT_EQ(RoffText("'quoted'"), "\\&'quoted'");
  EXPECT_EQ(RoffText("one\n.two\n'three"), "one\n\\&.two\n\\&'three");
  EXPECT_EQ(RoffText("a.b 'c'"), "a.b 'c'");
}

TEST(RoffTest, ALongListOrPathMayBreakAfterACommaOrSlashInside) {
  EXPECT_EQ(RoffText("job_id,submit_s,duration_s,gpus,gpu_fraction x,y"),
            "job_id,\\:submit_s,\\:duration_s,\\:gpus,\\:gpu_fraction x,y");
  EXPECT_EQ(RoffText("/srv/a-long-directory-name/another/and-a-file.txt, /a/b"),
            "/srv/\\:a\\-long\\-directory\\-name/\\:another/\\:and\\-a\\-file.txt, /a/b");
}

TEST(RoffTest, CharactersOutsideAsciiAreNamedByCodePoint) {
  EXPECT_EQ(RoffText("\xC3\xA9t\xC3\xA9"), "\\[u00E9]t\\[u00E9]");
  EXPECT_EQ(RoffText("\xE2\x89\xA4"), "\\[u2264]");
  EXPECT_EQ(RoffText("\xF0\x9F\x98\x80"), "\\[u1F600]");
  EXPECT_EQ(RoffText("a\xFF"), "a\\[uFFFD]");
  EXPECT_EQ(RoffText("\xC3"), "\\[uFFFD]");  // cut short
}

TEST(RoffTest, MarkdownCodeIsBoldAndLinksKeepTheirText) {
  EXPECT_EQ(RoffMarkdown("as `trainq nodes` names it"), "as \\fBtrainq nodes\\fR names it");
  EXPECT_EQ(RoffMarkdown("see [simulated-gpus.md](simulated-gpus.md)."),
            "see simulated\\-gpus.md.");
  EXPECT_EQ(RoffMarkdown("[`--x`](a.md#b) and `y`"), "\\fB\\-\\-x\\fR and \\fBy\\fR");
  // Not Markdown: brackets without a target, an unpaired backquote.
  EXPECT_EQ(RoffMarkdown("[B:]SIG[@T]"), "[B:]SIG[@T]");
  EXPECT_EQ(RoffMarkdown("a ` b"), "a ` b");
  EXPECT_EQ(RoffMarkdown("[text](unclosed"), "[text](unclosed");
  EXPECT_EQ(RoffMarkdown(".`a`"), "\\&.\\fBa\\fR");
}

TEST(RoffTest, APageQuotesMacroArgumentsAndGuardsTextLines) {
  ManPage page("T", "1", "t 1.0", "User Commands");
  page.Section("NAME");
  page.Subsection("say \"hi\"");
  page.Paragraph(".not a request");
  page.Item(RoffBold("--x"), RoffText("body"));
  constexpr std::string_view kLines[] = {"a -b", ".c"};
  page.Verbatim(kLines);
  const std::string& text = page.text();
  EXPECT_THAT(text, HasSubstr(".TH \"T\" \"1\" \"\" \"t 1.0\" \"User Commands\"\n"));
  EXPECT_THAT(text, HasSubstr(".SH \"NAME\"\n"));
  EXPECT_THAT(text, HasSubstr(".SS \"say \\(dqhi\\(dq\"\n"));
  EXPECT_THAT(text, HasSubstr(".PP\n\\&.not a request\n"));
  EXPECT_THAT(text, HasSubstr(".TP\n\\fB\\-\\-x\\fR\nbody\n"));
  EXPECT_THAT(text, HasSubstr(".nf\na \\-b\n\\&.c\n.fi\n"));
}

}  // namespace
}  // namespace trainq
