// `trainq acct` (Slurm's sacct): what each job took — waited, ran, GPUs, GPU-hours held, peak
// memory, attempts, how it ended — and each user's totals. Pure; the daemon computes a row
// from a job the store holds, and the store keeps the row of a job `trainq clean` forgets.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

struct AcctRow {
  JobId id = 0;
  std::string user, name, state;
  UnixMs submitted_at = 0;
  UnixMs started_at = 0;   // the first attempt's start; 0: never started
  UnixMs ended_at = 0;     // the last attempt's end (or, never started, 0)
  int64_t wait_ms = 0;     // submit to first start (to `now` while it waits)
  int64_t elapsed_ms = 0;  // every attempt's run time, added (a running one's to `now`)
  int gpus = 0;            // GPUs of the last attempt, all of a gang's nodes together
  double gpu_hours = 0;    // each attempt's GPUs x its run time, added
  // Of those, as its node measured them (Attempt::usage): weighted by the GPUs' utilisation,
  // and the mean utilisation over the time it was known (-1: never known).
  double gpu_hours_used = 0;
  double utilization = -1;
  uint64_t peak_bytes_per_gpu = 0;  // the highest any attempt reached
  int attempts = 0;
  std::string end;  // how it ended: the last attempt's end reason, or the job's reason
};

// The row of `job` as of `now`.
AcctRow AcctOf(const Job& job, UnixMs now);

nlohmann::json AcctToJson(const AcctRow& row);
// kInvalid for a text that is no row (a store's record damaged).
Result<AcctRow> AcctFromJson(const std::string& text);

// Per user: jobs, how many ended each way, GPU-hours and run time added.
struct AcctTotal {
  int jobs = 0, succeeded = 0, failed = 0, cancelled = 0, active = 0;
  double gpu_hours = 0;
  double gpu_hours_used = 0;
  int64_t elapsed_ms = 0;
};
std::map<std::string, AcctTotal> AcctTotals(const std::vector<AcctRow>& rows);

}  // namespace trainq
