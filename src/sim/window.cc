#include "src/sim/window.h"

#include <charconv>
#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace trainq::sim {

namespace {

constexpr std::string_view kForm =
    "START..END, each seconds on the trace's clock (e.g. 4973359) or a date and time "
    "(2017-11-01 or 2017-11-01 06:00:00), END after START";

Status Bad(std::string_view text, std::string_view why) {
  return Status::Invalid(
      fmt::format("--window: '{}' is not valid: {}; expected {}", text, why, kForm));
}

std::optional<int64_t> SecondsMs(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0 ||
      v > 1e12) {
    return std::nullopt;
  }
  return static_cast<int64_t>(std::llround(v * 1000.0));
}

// The trace's clock origin on the wall clock: first row with a submit_time.
std::optional<int64_t> OriginMs(std::span<const TraceJob> trace) {
  for (const TraceJob& j : trace) {
    if (j.submit_wall_ms) return *j.submit_wall_ms - j.submit_ms;
  }
  return std::nullopt;
}

Result<int64_t> Bound(std::string_view whole, std::string_view part,
                      std::span<const TraceJob> trace) {
  if (std::optional<int64_t> ms = SecondsMs(part)) return *ms;
  std::optional<int64_t> wall = ParseWallTimeMs(part);
  if (!wall) return Bad(whole, fmt::format("'{}' is neither seconds nor a date", part));
  std::optional<int64_t> origin = OriginMs(trace);
  if (!origin) {
    return Bad(whole,
               "a date needs the trace's submit_time column, and this trace has none; give "
               "seconds");
  }
  return *wall - *origin;
}

}  // namespace

Result<TraceWindow> ParseWindow(std::string_view text, std::span<const TraceJob> trace) {
  size_t dots = text.find("..");
  if (dots == std::string_view::npos) return Bad(text, "no '..' between START and END");
  Result<int64_t> start = Bound(text, text.substr(0, dots), trace);
  if (!start.ok()) return start.status();
  Result<int64_t> end = Bound(text, text.substr(dots + 2), trace);
  if (!end.ok()) return end.status();
  if (*end <= *start) return Bad(text, "END is not after START");
  return TraceWindow{std::string(text), *start, *end};
}

std::vector<TraceJob> SelectWindow(std::span<const TraceJob> trace, const TraceWindow& window) {
  std::vector<TraceJob> out;
  for (const TraceJob& j : trace) {
    if (j.submit_ms < window.start_ms - window.warmup_ms || j.submit_ms >= window.end_ms) continue;
    out.push_back(j);
    out.back().submit_ms -= window.start_ms - window.warmup_ms;
  }
  return out;
}

}  // namespace trainq::sim
