// What trainq says when a job ends (--notify URL, --mail ADDR; docs/workflow.md,
// "Notifications"): the bodies, built from the job as stored. Pure.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "trainq/job.h"

namespace trainq {

// At most this much of the end of the log goes into a notification.
constexpr size_t kNotifyLogTailBytes = 2048;

// {"event": "job_ended", "id", "name", "user", "state", "reason", "exit_code", "signal",
//  "attempts", "group", "node", "submitted_at", "started_at", "ended_at", "duration_ms",
//  "log_tail"}: times RFC 3339 (null when unknown), exit_code and signal those of the last
// attempt (null when none ran).
nlohmann::json NotificationJson(const Job& job, std::string_view log_tail);

// A Slack-compatible incoming-webhook body: {"text": "..."} with the same facts in words.
nlohmann::json SlackJson(const Job& job, std::string_view log_tail);

// "job 12 (train.py) failed: exit code 1, after 2h03m on gpu1": one line for a subject.
std::string EndSummary(const Job& job);

// A mail message for `sendmail -t`: To, Subject and the summary with the log's tail.
std::string MailMessage(const Job& job, std::string_view log_tail, std::string_view to);

}  // namespace trainq
