#include "src/core/words.h"

#include <fmt/format.h>

namespace trainq {

namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Inside double quotes a backslash escapes only these, as in sh.
bool EscapableInDouble(char c) { return c == '"' || c == '\\' || c == '$' || c == '`'; }

}  // namespace

std::string TerminalSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F: C1 controls
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

namespace {

// The length of the UTF-8 sequence at `i`, or 0 when it is not one.
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
    return k < s.size() && b(k) >= lo && b(k) <= hi;
  };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return cont(i + 1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    unsigned char lo = c == 0xe0 ? 0xa0 : 0x80,
                  hi = c == 0xed ? 0x9f : 0xbf;  // overlong, surrogates
    return cont(i + 1, lo, hi) && cont(i + 2) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;  // past U+10FFFF
    return cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::optional<std::string> Utf8Problem(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t n = Utf8SequenceAt(text, i);
    if (n == 0) {
      return fmt::format("byte 0x{:02x} at offset {} is not UTF-8",
                         static_cast<unsigned char>(text[i]), i);
    }
    i += n;
  }
  return std::nullopt;
}

Result<std::vector<std::string>> SplitWords(std::string_view line, std::string_view field) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  size_t i = 0;
  while (i < line.size()) {
    char c = line[i];
    if (IsBlank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      ++i;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (i + 1 >= line.size())
        return Status::Invalid(fmt::format("{}: a line ends in a backslash", field));
      word += line[i + 1];
      i += 2;
    } else if (c == '\'') {
      size_t end = line.find('\'', i + 1);
      if (end == std::string_view::npos) {
        return Status::Invalid(fmt::format("{}: unterminated single quote", field));
      }
      word.append(line.substr(i + 1, end - i - 1));
      i = end + 1;
    } else if (c == '"') {
      ++i;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\' && i + 1 < line.size() && EscapableInDouble(line[i + 1])) ++i;
        word += line[i++];
      }
      if (i >= line.size())
        return Status::Invalid(fmt::format("{}: unterminated double quote", field));
      ++i;
    } else {
      word += c;
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace trainq
