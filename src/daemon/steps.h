// The steps of `trainq sbatch` jobs whose batch script runs on this node (docs/workflow.md,
// "srun and scontrol"): srun adds a step here; the job's parts on its other nodes take the
// steps that give their node tasks, through their own daemon, and report how they ended;
// srun reads those ends. The parts also send their tasks' output here, and srun reads it to
// write it as its own, as Slurm's srun does. Held in memory: a step lives as long as the srun
// that made it, and a daemon that restarts under it makes srun and the parts give up the step,
// not the job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

// A piece of one task's output on another node: whole lines of one stream, or the stream's
// last bytes without a newline, or a piece of a longer line.
struct StepOutput {
  int task = 0;  // the task's rank in the step
  int fd = 1;    // 1: stdout, 2: stderr
  std::string text;
};

class StepBoard {
 public:
  // The output a step holds that srun has not read, in bytes of text: past it a part's pieces
  // wait on its node (and its tasks, once that node's own bound is reached, wait to write).
  static constexpr size_t kStepWindowBytes = 1 << 20;
  // The same, over all the steps of one attempt (srun killed before it read its step's).
  static constexpr size_t kAttemptWindowBytes = 8 << 20;
  // The most text one read of srun's returns.
  static constexpr size_t kReadBytes = 1 << 20;
  // The longest piece a part may send: it cuts its tasks' lines at 64 KiB, and a byte that is
  // not UTF-8 arrives as U+FFFD, three bytes.
  static constexpr size_t kMaxPieceBytes = 256 << 10;

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
  // Takes output of part `rank`'s tasks, the JSON body {"output": [{"task", "fd", "text"}]},
  // whose first piece is the part's piece number `at` (a part numbers its pieces of a step from
  // 0). Pieces taken before are skipped, so a request sent again adds nothing twice. Takes what
  // the windows hold (always one piece when the step holds none); the part keeps the rest for
  // later. Returns {"taken": N (the part's next piece number), "cancelled": bool}; kNotFound
  // for an unknown step; kInvalid naming the field for a piece that is not one of the part's
  // tasks' or an `at` past what was taken.
  Result<nlohmann::json> Append(JobId job, int n, int step, int rank, int64_t at,
                                const std::string& body);
  // srun's read of a step's output from its piece number `from` on, those before it dropped
  // (srun wrote them): {"pieces": [{"task", "fd", "text"}], "next": N, "end": M}, at most
  // kReadBytes of text (next < end: more is held). A read that reaches the end once every
  // other part ended is the last: the step holds no output after it.
  Result<nlohmann::json> ReadOutput(JobId job, int n, int step, int64_t from);
  // Forgets every job but those in `live` (the attempts whose batch script runs here).
  void Keep(const std::map<JobId, int>& live);

 private:
  struct Step;
  struct Attempt;
  const Step* Find(JobId job, int n, int step) const;
  Step* Find(JobId job, int n, int step);
  size_t Held(JobId job) const;
  std::map<JobId, Attempt> jobs_;
};

}  // namespace trainq
