// What preemption does to a replayed job's work: the simulator's model of checkpoints and
// restarts (docs/scheduling.md, "Preemption in the simulator"). Pure arithmetic on ms.
#pragma once

#include <cstdint>

namespace trainq::sim {

// How a job's run is cut short, and what that costs.
struct CheckpointModel {
  // The job saves its progress every this much of its own useful run time (training steps,
  // not wall time since the attempt began); <= 0: never, a cut loses the whole attempt.
  int64_t interval_ms = 30 * 60 * 1000;
  // What every attempt after the first spends restoring the last checkpoint before it makes
  // progress again (reading the checkpoint, rebuilding the data loader, warm-up).
  int64_t restart_cost_ms = 60 * 1000;
};

// One attempt cut after running `ran_ms`, of which the first `overhead_ms` restored a
// checkpoint: `saved_ms` of progress kept (whole checkpoint intervals of the useful time),
// `lost_ms` = ran_ms - saved_ms of run time that bought nothing lasting.
struct AttemptCut {
  int64_t saved_ms = 0;
  int64_t lost_ms = 0;
};

AttemptCut CutAttempt(int64_t ran_ms, int64_t overhead_ms, const CheckpointModel& model);

// A job's work across its attempts: the trace's duration at first; each cut keeps the
// progress checkpointed, and every later attempt pays the restart cost first.
struct JobWork {
  int64_t left_ms = 0;      // useful work still to do, in run time at the job's request
  int64_t overhead_ms = 0;  // what the next (or current) attempt spends before progressing

  // How long an attempt started now runs if nothing stops it, at `speed` times the pace of
  // its request (an elastic job on other than its requested GPUs: ReplayOptions::scaling_exponent).
  int64_t AttemptMs(double speed = 1.0) const;
  // The attempt, run at `speed`, was cut after `ran_ms`: keeps what was checkpointed, and
  // from now on every attempt pays the restart cost. Returns the cut, in run time.
  AttemptCut Cut(int64_t ran_ms, const CheckpointModel& model, double speed = 1.0);
};

}  // namespace trainq::sim
