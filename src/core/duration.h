// Durations as users write them: 500ms, 30s, 2m, 1h, 2h30m, 1d (and combinations).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trainq/status.h"

namespace trainq {

// The longest duration any option takes: 100 years, far from int64 milliseconds' limit so
// sums and products of durations (backoffs, deadlines) cannot wrap.
inline constexpr int64_t kMaxDurationDays = 36500;
inline constexpr int64_t kMaxDurationMs = kMaxDurationDays * 24 * 3600 * 1000;

// kInvalid naming `field` for empty, negative, unknown units or more than kMaxDurationMs.
// Zero is allowed.
Result<int64_t> ParseDurationMs(std::string_view text, std::string_view field);
// "25s", "2m05s", "1h30m", "850ms".
std::string FormatDuration(int64_t ms);

}  // namespace trainq
