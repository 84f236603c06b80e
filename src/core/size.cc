#include "trainq/size.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace trainq {

namespace {

constexpr uint64_t kKiB = 1024;

struct Unit {
  std::string_view suffix;  // lower case
  double factor;
};

// Single letters are binary, as in Slurm and nvidia-smi; "GB" is SI.
constexpr Unit kUnits[] = {
    {"", static_cast<double>(kKiB * kKiB)},  // bare number: MiB
    {"b", 1.0},
    {"k", 1024.0},       {"kib", 1024.0},       {"kb", 1e3},
    {"m", 1048576.0},    {"mib", 1048576.0},    {"mb", 1e6},
    {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
    {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12},
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

}  // namespace

Result<uint64_t> ParseSize(std::string_view text, std::string_view field) {
  std::string_view s = Trim(text);
  if (s.empty()) return BadSize(field, text, "is empty");
  if (s.front() == '-') return BadSize(field, text, "is negative");
  size_t end = NumberEnd(s);
  std::optional<double> number = ParseNumber(s.substr(0, end));
  if (!number) return BadSize(field, text, "is not a size");
  std::string suffix = Lower(Trim(s.substr(end)));
  for (const Unit& unit : kUnits) {
    if (unit.suffix != suffix) continue;
    double bytes = std::round(*number * unit.factor);
    if (!(bytes >= 1.0)) return BadSize(field, text, "must be more than zero");
    if (bytes > 9.0e18) return BadSize(field, text, "is too large");
    return static_cast<uint64_t>(bytes);
  }
  return BadSize(field, text, fmt::format("has an unknown unit '{}'", s.substr(end)));
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
  while (v >= 1024.0 && i + 1 < std::size(kNames)) {
    v /= 1024.0;
    ++i;
  }
  return fmt::format("{:.1f} {}", v, kNames[i]);
}

}  // namespace trainq
