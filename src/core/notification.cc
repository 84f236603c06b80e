#include "src/core/notification.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/core/json_codec.h"

namespace trainq {

namespace {

using nlohmann::json;

json TimeOrNull(std::optional<UnixMs> t) {
  return t && *t > 0 ? json(FormatTime(*t)) : json(nullptr);
}

std::string Duration(int64_t ms) {
  int64_t s = ms / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string How(const Job& job) {
  const Attempt* a = job.current();
  if (job.state == JobState::kSucceeded) return "exit code 0";
  if (a && a->signal) return fmt::format("killed by signal {}", *a->signal);
  if (a && a->exit_code) return fmt::format("exit code {}", *a->exit_code);
  return job.reason.empty() ? std::string("never ran") : job.reason;
}

}  // namespace

std::string EndSummary(const Job& job) {
  std::string text =
      fmt::format("job {} ({}) {}: {}", job.id, job.spec.name, StateName(job.state), How(job));
  const Attempt* a = job.current();
  if (a && a->ended_at && a->started_at > 0) {
    text += fmt::format(", after {}", Duration(*a->ended_at - a->started_at));
    if (!a->node.empty()) text += " on " + a->node;
  }
  return text;
}

json NotificationJson(const Job& job, std::string_view log_tail) {
  const Attempt* a = job.current();
  json out = {
      {"event", "job_ended"},
      {"id", job.id},
      {"name", job.spec.name},
      {"user", job.spec.user},
      {"state", std::string(StateName(job.state))},
      {"reason", job.reason},
      {"exit_code", a && a->exit_code ? json(*a->exit_code) : json(nullptr)},
      {"signal", a && a->signal ? json(*a->signal) : json(nullptr)},
      {"attempts", job.attempt},
      {"group", job.spec.group > 0 ? json(job.spec.group) : json(nullptr)},
      {"node", a ? json(a->node) : json(nullptr)},
      {"submitted_at", FormatTime(job.submitted_at)},
      {"started_at", TimeOrNull(a ? std::optional(a->started_at) : std::nullopt)},
      {"ended_at", TimeOrNull(a ? a->ended_at : std::nullopt)},
      {"duration_ms",
       a && a->ended_at && a->started_at > 0 ? json(*a->ended_at - a->started_at) : json(nullptr)},
      {"log_tail", std::string(log_tail)}};
  return out;
}

json SlackJson(const Job& job, std::string_view log_tail) {
  std::string text = "trainq: " + EndSummary(job);
  if (!log_tail.empty()) text += fmt::format("\n```\n{}\n```", log_tail);
  return {{"text", text}};
}

std::string MailMessage(const Job& job, std::string_view log_tail, std::string_view to) {
  return fmt::format(
      "To: {}\nSubject: trainq: {}\nContent-Type: text/plain; charset=utf-8\n\n{}\n\n{}{}\n", to,
      EndSummary(job), EndSummary(job), log_tail.empty() ? "" : "The end of its output:\n\n",
      log_tail);
}

}  // namespace trainq
