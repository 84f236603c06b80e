#include "src/core/hostlist.h"

#include <charconv>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "src/core/words.h"

namespace trainq {

namespace {

constexpr std::string_view kForm =
    "NAME or PREFIX[RANGES]SUFFIX, e.g. node[1-3,5],gpu07 (ranges are N or N-M, N <= M)";

Status Bad(std::string_view item, std::string_view why) {
  return Status::Invalid(
      fmt::format("node list: '{}' {}; expected {}", TerminalSafe(item), why, kForm));
}

// The numbers in one [...]: "1-3,5" -> {"1","2","3","5"}; a range keeps its first number's
// width when that is zero-padded.
Result<std::vector<std::string>> BracketValues(std::string_view inside, std::string_view item) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= inside.size()) {
    size_t comma = inside.find(',', start);
    std::string_view part = inside.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t dash = part.find('-');
    std::string_view lo_text = part.substr(0, dash);
    std::string_view hi_text = dash == std::string_view::npos ? lo_text : part.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    auto number = [](std::string_view t, uint64_t& n) {
      if (t.empty() || t.size() > 18) return false;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
      return ec == std::errc() && end == t.data() + t.size();
    };
    if (!number(lo_text, lo) || !number(hi_text, hi)) {
      return Bad(item,
                 fmt::format("has '{}' in brackets, not a number or range", TerminalSafe(part)));
    }
    if (hi < lo) return Bad(item, fmt::format("has the reversed range {}", part));
    if (hi - lo >= kMaxHostlistNames || out.size() + (hi - lo) >= kMaxHostlistNames) {
      return Bad(item, fmt::format("expands past {} names", kMaxHostlistNames));
    }
    size_t width = lo_text.size() > 1 && lo_text[0] == '0' ? lo_text.size() : 0;
    for (uint64_t n = lo; n <= hi; ++n) out.push_back(fmt::format("{:0{}}", n, width));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

Status ExpandItem(std::string_view item, std::vector<std::string>& out) {
  std::vector<std::string> names = {""};
  size_t at = 0;
  while (at < item.size()) {
    size_t open = item.find('[', at);
    size_t close_early = item.find(']', at);
    if (close_early < open) return Bad(item, "has a ']' with no '[' before it");
    std::string_view text = item.substr(at, open == std::string_view::npos ? open : open - at);
    for (std::string& n : names) n += text;
    if (open == std::string_view::npos) break;
    size_t close = item.find(']', open);
    if (close == std::string_view::npos) return Bad(item, "has a '[' that is not closed");
    Result<std::vector<std::string>> values =
        BracketValues(item.substr(open + 1, close - open - 1), item);
    if (!values.ok()) return values.status();
    if (names.size() * values->size() + out.size() > kMaxHostlistNames) {
      return Bad(item, fmt::format("expands past {} names", kMaxHostlistNames));
    }
    std::vector<std::string> grown;
    grown.reserve(names.size() * values->size());
    for (const std::string& n : names) {
      for (const std::string& v : *values) grown.push_back(n + v);
    }
    names = std::move(grown);
    at = close + 1;
  }
  for (std::string& n : names) out.push_back(std::move(n));
  return Status::Ok();
}

struct Split {
  std::string_view prefix, digits;
};

Split SplitName(std::string_view name) {
  size_t end = name.size();
  while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
  // Past 18 digits a number does not fit: such a name stays whole.
  if (name.size() - end > 18) return {name, {}};
  return {name.substr(0, end), name.substr(end)};
}

// The width a trailing number pins: its length when zero-padded, else 0 (any width).
size_t PinnedWidth(std::string_view digits) {
  return digits.size() > 1 && digits[0] == '0' ? digits.size() : 0;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0, depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']' && depth > 0) --depth;
    if (c != ',' || (depth > 0 && i < list.size())) continue;
    std::string_view item = list.substr(start, i - start);
    start = i + 1;
    if (item.empty()) continue;
    if (item.find_first_of(" \t\n\r") != std::string_view::npos) {
      return Bad(item, "has a space in it");
    }
    TRAINQ_RETURN_IF_ERROR(ExpandItem(item, out));
  }
  return out;
}

std::string CompressHostlist(const std::vector<std::string>& names) {
  std::string out;
  size_t i = 0;
  while (i < names.size()) {
    Split first = SplitName(names[i]);
    if (!out.empty()) out += ',';
    if (first.digits.empty()) {
      out += names[i++];
      continue;
    }
    // The run of names after this one with the same prefix and a compatible width.
    size_t width = PinnedWidth(first.digits);
    std::vector<std::pair<uint64_t, size_t>> numbers;  // value, digits
    size_t j = i;
    for (; j < names.size(); ++j) {
      Split s = SplitName(names[j]);
      // A zero-padded run takes numbers of its width; an unpadded one, unpadded numbers.
      bool fits = width > 0 ? s.digits.size() == width : PinnedWidth(s.digits) == 0;
      if (s.digits.empty() || s.prefix != first.prefix || !fits) break;
      uint64_t n = 0;
      std::from_chars(s.digits.data(), s.digits.data() + s.digits.size(), n);
      numbers.emplace_back(n, s.digits.size());
    }
    if (j == i + 1) {
      out += names[i++];
      continue;
    }
    out += first.prefix;
    out += '[';
    for (size_t k = 0; k < numbers.size();) {
      size_t end = k;
      while (end + 1 < numbers.size() && numbers[end + 1].first == numbers[end].first + 1) ++end;
      if (k > 0) out += ',';
      out += fmt::format("{:0{}}", numbers[k].first, width);
      if (end > k) out += fmt::format("-{:0{}}", numbers[end].first, width);
      k = end + 1;
    }
    out += ']';
    i = j;
  }
  return out;
}

std::string CompressCounts(const std::vector<int>& counts) {
  std::string out;
  for (size_t i = 0; i < counts.size();) {
    size_t j = i;
    while (j < counts.size() && counts[j] == counts[i]) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(counts[i]);
    if (j - i > 1) out += fmt::format("(x{})", j - i);
    i = j;
  }
  return out;
}

}  // namespace trainq
