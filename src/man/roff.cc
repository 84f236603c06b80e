#include "src/man/roff.h"

#include <cstdint>

#include <fmt/format.h>

namespace trainq {

namespace {

// The code point that starts at text[i] and how many bytes it takes; U+FFFD for bytes that
// are not UTF-8, one at a time.
std::pair<uint32_t, size_t> RoffCodePoint(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  if (length == 1 || i + length > text.size()) return {0xFFFD, 1};
  uint32_t code = lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {0xFFFD, 1};
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  return {code, length};
}

// A word this long may not fit a terminal's line beside anything else.
constexpr size_t kRoffLongWord = 40;

// Whether a line may break after text[i] though no space follows: after a comma or a slash
// inside a long word, so a list or path (a CSV header, a URL) wraps where the page is narrow
// instead of running past the margin. The page is never hyphenated, and a shorter word moves
// to the next line whole.
bool RoffBreakAfter(std::string_view text, size_t i) {
  if (text[i] != ',' && text[i] != '/') return false;
  const auto space = [](char c) { return c == ' ' || c == '\n'; };
  size_t start = i;
  while (start > 0 && !space(text[start - 1])) --start;
  size_t end = i + 1;
  while (end < text.size() && !space(text[end])) ++end;
  return i > start && i + 1 < end && end - start > kRoffLongWord;
}

// `text` as roff, appended to `out`; `line_start`: whether text[0] starts a line.
void AppendRoffText(std::string& out, std::string_view text, bool line_start) {
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if ((i == 0 ? line_start : text[i - 1] == '\n') && (c == '.' || c == '\'')) out += "\\&";
    if (static_cast<unsigned char>(c) >= 0x80) {
      auto [code, length] = RoffCodePoint(text, i);
      out += fmt::format("\\[u{:04X}]", code);
      i += length;
      continue;
    }
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    ++i;
    if (RoffBreakAfter(text, i - 1)) out += "\\:";
  }
}

void AppendRoffMarkdown(std::string& out, std::string_view markdown, bool line_start) {
  size_t plain = 0;  // where the text not yet written starts
  const auto flush = [&](size_t to) {
    AppendRoffText(out, markdown.substr(plain, to - plain),
                   plain == 0 ? line_start : markdown[plain - 1] == '\n');
  };
  for (size_t i = 0; i < markdown.size(); ++i) {
    size_t end = std::string_view::npos;
    if (markdown[i] == '`') {
      end = markdown.find('`', i + 1);
      if (end == std::string_view::npos) continue;
      flush(i);
      out += RoffBold(markdown.substr(i + 1, end - i - 1));
    } else if (markdown[i] == '[') {
      size_t close = markdown.find(']', i + 1);
      if (close == std::string_view::npos || close + 1 >= markdown.size() ||
          markdown[close + 1] != '(') {
        continue;
      }
      end = markdown.find(')', close + 2);
      if (end == std::string_view::npos) continue;
      flush(i);
      AppendRoffMarkdown(out, markdown.substr(i + 1, close - i - 1),
                         i == 0 ? line_start : markdown[i - 1] == '\n');
    } else {
      continue;
    }
    i = end;
    plain = end + 1;
  }
  flush(markdown.size());
}

}  // namespace

std::string RoffText(std::string_view text) {
  std::string out;
  AppendRoffText(out, text, true);
  return out;
}

std::string RoffBold(std::string_view text) {
  std::string out = "\\fB";
  AppendRoffText(out, text, false);
  return out + "\\fR";
}

std::string RoffItalic(std::string_view text) {
  std::string out = "\\fI";
  AppendRoffText(out, text, false);
  return out + "\\fR";
}

std::string RoffMarkdown(std::string_view markdown) {
  std::string out;
  AppendRoffMarkdown(out, markdown, true);
  return out;
}

ManPage::ManPage(std::string_view title, std::string_view section, std::string_view source,
                 std::string_view manual) {
  out_ = ".\\\" Made by trainq-man (src/man) from trainq's own tables; do not edit.\n";
  out_ += fmt::format(".TH \"{}\" \"{}\" \"\" \"{}\" \"{}\"\n", RoffText(title), RoffText(section),
                      RoffText(source), RoffText(manual));
  // Left-aligned and never hyphenated: a reader copies option values, paths and lists from the
  // page, and a long one must neither be split by a hyphen nor stretch the spaces of its line.
  Request("ad l");
  Request("nh");
}

void ManPage::Section(std::string_view title) { Request("SH", RoffText(title)); }

void ManPage::Subsection(std::string_view title) { Request("SS", RoffText(title)); }

void ManPage::Paragraph(std::string_view roff) {
  Request("PP");
  TextLine(roff);
}

void ManPage::LineBreak() { Request("br"); }

void ManPage::Text(std::string_view roff) { TextLine(roff); }

void ManPage::Item(std::string_view tag_roff, std::string_view body_roff) {
  Request("TP");
  TextLine(tag_roff);
  TextLine(body_roff);
}

void ManPage::Verbatim(std::span<const std::string_view> lines) {
  Request("RS", "4");
  Request("nf");
  for (std::string_view line : lines) TextLine(RoffText(line));
  Request("fi");
  Request("RE");
}

// A macro's argument is quoted, so one with spaces stays one; a quote inside is \(dq.
void ManPage::Request(std::string_view name, std::string_view argument) {
  out_ += '.';
  out_ += name;
  if (!argument.empty()) {
    out_ += " \"";
    for (char c : argument) {
      if (c == '"') {
        out_ += "\\(dq";
      } else {
        out_ += c;
      }
    }
    out_ += '"';
  }
  out_ += '\n';
}

// Roff made elsewhere starts with a request's dot only by mistake: \& keeps it text.
void ManPage::TextLine(std::string_view roff) {
  if (roff.starts_with('.') || roff.starts_with('\'')) out_ += "\\&";
  out_ += roff;
  out_ += '\n';
}

}  // namespace trainq
