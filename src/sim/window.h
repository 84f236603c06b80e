// A window of a trace: the rows submitted from START up to, not including, END, replayed as a
// trace of their own (submit times from START). Pure: the caller parses the trace.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/sim/inputs.h"
#include "trainq/status.h"

namespace trainq::sim {

struct TraceWindow {
  std::string text;  // as given, for the report
  // On the trace's own clock (submit_s), in ms; end exclusive.
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  // Rows submitted this long before START are replayed too, so the cluster is not empty at
  // START; they are not measured (ReplayOptions::measure_from_ms).
  int64_t warmup_ms = 0;
};

// "START..END", each either seconds on the trace's clock ("4973359", "12.5") or a date and
// time as ParseWallTimeMs reads them ("2017-11-01", "2017-11-01 06:00"). Dates need the
// trace's `submit_time` column: the clock's origin is the first row's submit_time minus its
// submit_s. Errors name --window and the accepted form.
Result<TraceWindow> ParseWindow(std::string_view text, std::span<const TraceJob> trace);

// The rows of `trace` submitted in the window or its warm-up, in trace order, with submit_ms
// moved so that the warm-up starts at 0 and the window at warmup_ms (times stay >= 0, as the
// placement policy's clock is; submit_wall_ms stays the date it is).
std::vector<TraceJob> SelectWindow(std::span<const TraceJob> trace, const TraceWindow& window);

}  // namespace trainq::sim
