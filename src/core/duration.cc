#include "src/core/duration.h"

#include <cctype>

#include <fmt/format.h>

namespace trainq {

namespace {

int64_t UnitMs(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60 * 1000;
  if (unit == "h") return 3600 * 1000;
  if (unit == "d") return 24 * 3600 * 1000;
  return 0;
}

Status BadDuration(std::string_view field, std::string_view text) {
  return Status::Invalid(fmt::format(
      "{}: '{}' is not a duration; use forms like 500ms, 30s, 2m, 1h, 2h30m", field, text));
}

Status TooLong(std::string_view field, std::string_view text) {
  return Status::Invalid(fmt::format("{}: '{}' is too long; a duration is at most {}d", field, text,
                                     kMaxDurationDays));
}

}  // namespace

Result<int64_t> ParseDurationMs(std::string_view text, std::string_view field) {
  if (text.empty()) return BadDuration(field, text);
  int64_t total = 0;
  bool too_long = false;
  size_t i = 0;
  while (i < text.size()) {
    int64_t number = 0;
    size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      // Saturate instead of wrapping; the unit is still checked before "too long" is said.
      number = number > kMaxDurationMs ? kMaxDurationMs + 1 : number * 10 + (text[i] - '0');
      ++i;
    }
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    int64_t unit = UnitMs(text.substr(unit_start, i - unit_start));
    if (i == start || unit_start == start || unit == 0) return BadDuration(field, text);
    // Range first, product second: the product of two in-range factors may not fit.
    if (number > (kMaxDurationMs - total) / unit) {
      too_long = true;
    } else {
      total += number * unit;
    }
  }
  if (too_long) return TooLong(field, text);
  return total;
}

std::string FormatDuration(int64_t ms) {
  if (ms < 1000) return fmt::format("{}ms", ms);
  int64_t s = (ms + 999) / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

}  // namespace trainq
