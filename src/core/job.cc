#include "trainq/job.h"

#include <ctime>

#include <fmt/format.h>

namespace trainq {

namespace {
constexpr std::string_view kStateNames[] = {"queued",    "blocked", "starting", "running",
                                            "succeeded", "failed",  "cancelled"};
}  // namespace

std::string_view StateName(JobState s) { return kStateNames[static_cast<int>(s)]; }

std::optional<JobState> ParseState(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kStateNames)); ++i) {
    if (kStateNames[i] == name) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

bool IsWaiting(JobState s) { return s == JobState::kQueued || s == JobState::kBlocked; }
bool IsActive(JobState s) { return s == JobState::kStarting || s == JobState::kRunning; }
bool IsDone(JobState s) { return !IsWaiting(s) && !IsActive(s); }

std::string FormatTime(UnixMs t) {
  time_t secs = static_cast<time_t>(t / 1000);
  int ms = static_cast<int>(t % 1000);
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  struct tm tm {};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

std::optional<AttemptPart> Attempt::PartOn(const std::string& on, int* rank) const {
  if (parts.empty()) {
    if (node != on) return std::nullopt;
    if (rank != nullptr) *rank = 0;
    return AttemptPart{node, gpu_indices, gpu_uuids, run_dir, log_path};
  }
  for (size_t r = 0; r < parts.size(); ++r) {
    if (parts[r].node != on) continue;
    if (rank != nullptr) *rank = static_cast<int>(r);
    return parts[r];
  }
  return std::nullopt;
}

}  // namespace trainq
