// Roff for man pages (man(7) macros): escaping table text, and a page put together from
// sections and items. Pure text; the pages themselves are made in man_pages.h.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace trainq {

// `text` as roff for running text or a macro's argument: a backslash becomes \e (a doubled
// one would turn into an escape again inside a macro's argument), every hyphen-minus \- (so
// what a reader copies from the page is what a shell takes, as help2man wrote them), a
// character outside ASCII \[uXXXX], and a line that would start with . or ' gets \& first,
// so no table text is read as a request. A comma or slash inside a word of over 40
// characters is followed by \: (a place the line may break, invisible otherwise), as the page
// is never hyphenated.
std::string RoffText(std::string_view text);
std::string RoffBold(std::string_view text);
std::string RoffItalic(std::string_view text);
// Markdown's inline forms, as the tables' help texts use them: `code` in bold, a link
// [text](target) as its text; everything else as RoffText.
std::string RoffMarkdown(std::string_view markdown);

// A man page being written. Parameters named `roff` take roff already (made with the
// functions above); the others take plain text.
class ManPage {
 public:
  // .TH: "TRAINQ", "1", "trainq 0.1.0", "User Commands". No date: the same tree gives the
  // same bytes.
  ManPage(std::string_view title, std::string_view section, std::string_view source,
          std::string_view manual);

  void Section(std::string_view title);     // .SH
  void Subsection(std::string_view title);  // .SS
  void Paragraph(std::string_view roff);    // .PP, then the text
  void LineBreak();                         // .br: the next text starts a line
  void Text(std::string_view roff);         // more text in the current paragraph or item
  // .TP: `tag_roff` on a line of its own, `body_roff` indented below it.
  void Item(std::string_view tag_roff, std::string_view body_roff);
  // Lines shown as they are (.nf), indented: examples, a file's contents.
  void Verbatim(std::span<const std::string_view> lines);

  const std::string& text() const { return out_; }

 private:
  void Request(std::string_view name, std::string_view argument = {});
  void TextLine(std::string_view roff);

  std::string out_;
};

}  // namespace trainq
