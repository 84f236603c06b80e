#include "trainq/size.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace trainq {

namespace {

constexpr uint64_t kKiB = 1024;
// Stored sizes must fit a signed 64-bit column (SQLite, Redis), with room to spare.
constexpr uint64_t kMaxBytes = 9'000'000'000'000'000'000ull;

struct Unit {
  std::string_view suffix;  // lower case
  uint64_t factor;
};

// Single letters are binary, as in Slurm and nvidia-smi; "GB" is SI.
constexpr Unit kUnits[] = {
    {"", kKiB* kKiB},  // bare number: MiB
    {"b", 1},
    {"k", kKiB},
    {"kib", kKiB},
    {"kb", 1'000},
    {"m", kKiB* kKiB},
    {"mib", kKiB* kKiB},
    {"mb", 1'000'000},
    {"g", kKiB* kKiB* kKiB},
    {"gib", kKiB* kKiB* kKiB},
    {"gb", 1'000'000'000},
    {"t", kKiB* kKiB* kKiB* kKiB},
    {"tib", kKiB* kKiB* kKiB* kKiB},
    {"tb", 1'000'000'000'000},
};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Status BadSize(std::string_view field, std::string_view text, std::string_view why) {
  return Status::Invalid(fmt::format(
      "{}: '{}' {}; use a size like 20GiB, 20G, 512MiB, 1.5TiB, 20GB (SI) or a bare number "
      "of MiB",
      field, text, why));
}

// Splits "1.5GiB" into the number "1.5" and the suffix "GiB".
size_t NumberEnd(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  return i;
}

std::optional<double> ParseNumber(std::string_view s) {
  if (s.empty() || s.front() == '.' || s.back() == '.') return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

const Unit* FindUnit(std::string_view suffix) {
  for (const Unit& unit : kUnits) {
    if (unit.suffix == suffix) return &unit;
  }
  return nullptr;
}

// Whole numbers are multiplied exactly, so "9007199254740993B" keeps every byte; only
// decimals go through floating point.
Result<uint64_t> Scale(std::string_view number, const Unit& unit, std::string_view field,
                       std::string_view text, bool zero_ok) {
  uint64_t bytes = 0;
  if (number.find('.') == std::string_view::npos) {
    uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec == std::errc::result_out_of_range) return BadSize(field, text, "is too large");
    if (ec != std::errc() || ptr != number.data() + number.size()) {
      return BadSize(field, text, "is not a size");
    }
    if (__builtin_mul_overflow(n, unit.factor, &bytes)) return BadSize(field, text, "is too large");
  } else {
    std::optional<double> v = ParseNumber(number);
    if (!v) return BadSize(field, text, "is not a size");
    double d = std::round(*v * static_cast<double>(unit.factor));
    if (d > static_cast<double>(kMaxBytes)) return BadSize(field, text, "is too large");
    bytes = static_cast<uint64_t>(d);
  }
  if (bytes == 0 && !zero_ok) return BadSize(field, text, "must be more than zero");
  if (bytes > kMaxBytes) return BadSize(field, text, "is too large");
  return bytes;
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text, std::string_view field, bool zero_ok) {
  std::string_view s = Trim(text);
  if (s.empty()) return BadSize(field, text, "is empty");
  if (s.front() == '-') return BadSize(field, text, "is negative");
  size_t end = NumberEnd(s);
  if (end == 0) return BadSize(field, text, "is not a size");
  const Unit* unit = FindUnit(Lower(Trim(s.substr(end))));
  if (unit == nullptr) {
    return BadSize(field, text, fmt::format("has an unknown unit '{}'", Trim(s.substr(end))));
  }
  return Scale(s.substr(0, end), *unit, field, text, zero_ok);
}

Result<MemRequest> ParseMemRequest(std::string_view text, std::string_view field) {
  std::string_view s = Trim(text);
  if (s.empty() || s.back() != '%') {
    Result<uint64_t> bytes = ParseSize(text, field);
    if (!bytes.ok()) {
      return Status::Invalid(bytes.status().message() + ", or a percentage of the GPU like 40%");
    }
    return MemRequest{*bytes, std::nullopt};
  }
  std::optional<double> pct = ParseNumber(Trim(s.substr(0, s.size() - 1)));
  if (!pct || !(*pct > 0.0) || *pct > 100.0) {
    return Status::Invalid(fmt::format(
        "{}: '{}' is not a percentage of the GPU; use a number above 0 and at most 100, like 40%",
        field, text));
  }
  return MemRequest{std::nullopt, *pct};
}

std::string FormatBytes(uint64_t bytes) {
  constexpr std::string_view kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < kKiB) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  size_t i = 0;
  // 1023.96 KiB would print as "1024.0 KiB": move up a unit first.
  while (v >= 1023.95 && i + 1 < std::size(kNames)) {
    v /= 1024.0;
    ++i;
  }
  return fmt::format("{:.1f} {}", v, kNames[i]);
}

}  // namespace trainq
