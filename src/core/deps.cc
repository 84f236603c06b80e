#include "src/core/deps.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "src/core/placement.h"

namespace trainq {

namespace {

const DepState* Find(std::span<const DepState> deps, JobId id) {
  auto it = std::find_if(deps.begin(), deps.end(), [id](const DepState& d) { return d.id == id; });
  return it == deps.end() ? nullptr : &*it;
}

// "dependency 12 failed" stays as it is down a chain: the root cause, not every link.
std::string RootCause(const DepState& d) {
  const std::string& r = d.reason;
  if (!r.starts_with("dependency ")) return "";
  size_t open = r.find(" (");
  if (open != std::string::npos && r.ends_with(")")) return r.substr(open + 2, r.size() - open - 3);
  return r;
}

std::string FailureReason(const DepState& d) {
  if (!d.found) return fmt::format("dependency {} does not exist", d.id);
  if (d.state == JobState::kFailed) return fmt::format("dependency {} failed", d.id);
  std::string root = RootCause(d);
  if (root.empty()) return fmt::format("dependency {} was cancelled", d.id);
  return fmt::format("dependency {} was cancelled ({})", d.id, root);
}

bool Ended(const DepState* d) { return d && (!d->found || IsDone(d->state)); }

}  // namespace

DepDecision DecideDeps(const JobSpec& spec, std::span<const DepState> deps) {
  for (JobId id : spec.after) {
    const DepState* d = Find(deps, id);
    if (Ended(d) && (!d->found || d->state != JobState::kSucceeded)) {
      return {JobState::kCancelled, FailureReason(*d)};
    }
  }
  std::vector<std::string> open;
  auto note_open = [&](JobId id) {
    const DepState* d = Find(deps, id);
    if (Ended(d)) return;
    std::string entry = fmt::format("{} ({})", id, d ? StateName(d->state) : "unknown");
    if (std::find(open.begin(), open.end(), entry) == open.end()) open.push_back(entry);
  };
  for (JobId id : spec.after) note_open(id);
  for (JobId id : spec.after_any) note_open(id);
  if (open.empty()) return {JobState::kQueued, ""};
  return {JobState::kBlocked, fmt::format("waiting for job {}", fmt::join(open, ", "))};
}

DepDecision SubmitStart(const JobSpec& spec, DepDecision deps) {
  if (!spec.hold || deps.state == JobState::kCancelled) return deps;
  deps.not_before = kHeldNotBefore;
  if (deps.state == JobState::kQueued) deps.reason = HeldReason(0, spec.user);
  return deps;
}

}  // namespace trainq
