#include "src/core/acct.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace trainq {

using json = nlohmann::json;

AcctRow AcctOf(const Job& job, UnixMs now) {
  AcctRow r;
  r.id = job.id;
  r.user = job.spec.user;
  r.name = job.spec.name;
  r.state = std::string(StateName(job.state));
  r.submitted_at = job.submitted_at;
  r.attempts = static_cast<int>(job.attempts.size());
  AttemptUsage usage;
  for (const Attempt& a : job.attempts) usage += a.usage;
  r.gpu_hours_used = static_cast<double>(usage.busy_gpu_ms) / 3'600'000.0;
  if (usage.util_known_ms > 0) {
    r.utilization =
        static_cast<double>(usage.busy_gpu_ms) / static_cast<double>(usage.util_known_ms);
  }
  for (const Attempt& a : job.attempts) {
    if (a.started_at <= 0) continue;
    if (r.started_at == 0) r.started_at = a.started_at;
    UnixMs end = a.ended_at ? *a.ended_at : now;
    int64_t ms = std::max<int64_t>(0, end - a.started_at);
    int gpus = static_cast<int>(a.gpu_indices.size());
    if (!a.parts.empty()) {
      gpus = 0;
      for (const AttemptPart& p : a.parts) gpus += static_cast<int>(p.gpu_indices.size());
    }
    r.elapsed_ms += ms;
    r.gpu_hours += gpus * (static_cast<double>(ms) / 3'600'000.0);
    r.gpus = gpus;
    r.peak_bytes_per_gpu = std::max(r.peak_bytes_per_gpu, a.peak_mem_bytes);
    if (a.ended_at) r.ended_at = *a.ended_at;
  }
  r.wait_ms = std::max<int64_t>(0, (r.started_at ? r.started_at : now) - job.submitted_at);
  if (IsDone(job.state)) {
    // Cancelled before it ever ran: its end is not kept; it left the queue after this.
    if (r.ended_at == 0) r.ended_at = std::max(job.queued_at, job.submitted_at);
    const Attempt* last = job.current();
    r.end = last != nullptr && !last->end_reason.empty() ? last->end_reason : job.reason;
  }
  return r;
}

json AcctToJson(const AcctRow& r) {
  return {{"id", r.id},
          {"user", r.user},
          {"name", r.name},
          {"state", r.state},
          {"submitted_at", r.submitted_at},
          {"started_at", r.started_at},
          {"ended_at", r.ended_at},
          {"wait_ms", r.wait_ms},
          {"elapsed_ms", r.elapsed_ms},
          {"gpus", r.gpus},
          {"gpu_hours", r.gpu_hours},
          {"gpu_hours_used", r.gpu_hours_used},
          {"utilization", r.utilization < 0 ? json(nullptr) : json(r.utilization)},
          {"peak_bytes_per_gpu", r.peak_bytes_per_gpu},
          {"attempts", r.attempts},
          {"end", r.end}};
}

Result<AcctRow> AcctFromJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("id") || !j["id"].is_number_integer()) {
    return Status::Invalid("an accounting record that is no JSON row");
  }
  AcctRow r;
  r.id = j.value("id", JobId{0});
  r.user = j.value("user", "");
  r.name = j.value("name", "");
  r.state = j.value("state", "");
  r.submitted_at = j.value("submitted_at", UnixMs{0});
  r.started_at = j.value("started_at", UnixMs{0});
  r.ended_at = j.value("ended_at", UnixMs{0});
  r.wait_ms = j.value("wait_ms", int64_t{0});
  r.elapsed_ms = j.value("elapsed_ms", int64_t{0});
  r.gpus = j.value("gpus", 0);
  r.gpu_hours = j.value("gpu_hours", 0.0);
  r.gpu_hours_used = j.value("gpu_hours_used", 0.0);  // rows kept before it was measured: 0
  if (j.contains("utilization") && j["utilization"].is_number()) {
    r.utilization = j["utilization"].get<double>();
  }
  r.peak_bytes_per_gpu = j.value("peak_bytes_per_gpu", uint64_t{0});
  r.attempts = j.value("attempts", 0);
  r.end = j.value("end", "");
  return r;
}

std::map<std::string, AcctTotal> AcctTotals(const std::vector<AcctRow>& rows) {
  std::map<std::string, AcctTotal> out;
  for (const AcctRow& r : rows) {
    AcctTotal& t = out[r.user];
    ++t.jobs;
    t.succeeded += r.state == "succeeded";
    t.failed += r.state == "failed";
    t.cancelled += r.state == "cancelled";
    t.active += r.state == "starting" || r.state == "running";
    t.gpu_hours += r.gpu_hours;
    t.gpu_hours_used += r.gpu_hours_used;
    t.elapsed_ms += r.elapsed_ms;
  }
  return out;
}

}  // namespace trainq
