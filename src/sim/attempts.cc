#include "src/sim/attempts.h"

#include <algorithm>
#include <cmath>

namespace trainq::sim {

AttemptCut CutAttempt(int64_t ran_ms, int64_t overhead_ms, const CheckpointModel& model) {
  ran_ms = std::max<int64_t>(ran_ms, 0);
  int64_t useful = std::max<int64_t>(ran_ms - std::max<int64_t>(overhead_ms, 0), 0);
  int64_t saved = model.interval_ms > 0 ? useful / model.interval_ms * model.interval_ms : 0;
  return {saved, ran_ms - saved};
}

int64_t JobWork::AttemptMs(double speed) const {
  if (speed == 1.0 || left_ms == 0) return overhead_ms + left_ms;
  return overhead_ms + std::max<int64_t>(1, int64_t(std::ceil(double(left_ms) / speed)));
}

AttemptCut JobWork::Cut(int64_t ran_ms, const CheckpointModel& model, double speed) {
  // Useful time never exceeds what was left, so neither does what is saved.
  AttemptCut cut = CutAttempt(std::min(ran_ms, AttemptMs(speed)), overhead_ms, model);
  left_ms -= std::min(left_ms, int64_t(std::llround(double(cut.saved_ms) * speed)));
  overhead_ms = std::max<int64_t>(model.restart_cost_ms, 0);
  return cut;
}

}  // namespace trainq::sim
