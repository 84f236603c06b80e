// The steps of `trainq sbatch` jobs whose batch script runs on this node (docs/workflow.md,
// "srun and scontrol"): srun adds a step here; the job's parts on its other nodes take the
// steps that give their node tasks, through their own daemon, and report how they ended;
// srun reads those ends. Held in memory: a step lives as long as the srun that made it, and a
// daemon that restarts under it makes srun and the parts give up the step, not the job.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

class StepBoard {
 public:
  StepBoard();
  ~StepBoard();
  StepBoard(const StepBoard&) = delete;
  StepBoard& operator=(const StepBoard&) = delete;

  // Adds srun's step (its JSON body) for attempt `n` of `job`, which has `nodes` parts.
  // kInvalid naming the field for a body that cannot be one; kConflict for a step number
  // already used.
  Status Add(JobId job, int n, int nodes, const std::string& body);
  // The first step after `after` that gives part `rank` tasks, as its JSON text; "" when
  // there is none yet.
  std::string Next(JobId job, int n, int rank, int after) const;
  // {"results": {"RANK": {"exit", "failures"}}, "cancelled": bool} of one step.
  Result<nlohmann::json> State(JobId job, int n, int step) const;
  // Part `rank` ended its tasks of `step` with `exit` (the worst of them) and `failures`
  // (srun's lines for each failed task).
  Status Finish(JobId job, int n, int step, int rank, int exit,
                const std::vector<std::string>& failures);
  Status Cancel(JobId job, int n, int step);
  // Forgets every job but those in `live` (the attempts whose batch script runs here).
  void Keep(const std::map<JobId, int>& live);

 private:
  struct Step;
  struct Attempt;
  const Step* Find(JobId job, int n, int step) const;
  std::map<JobId, Attempt> jobs_;
};

}  // namespace trainq
