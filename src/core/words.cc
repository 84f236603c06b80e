#include "src/core/words.h"

#include <fmt/format.h>

namespace trainq {

namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Inside double quotes a backslash escapes only these, as in sh.
bool EscapableInDouble(char c) { return c == '"' || c == '\\' || c == '$' || c == '`'; }

}  // namespace

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
