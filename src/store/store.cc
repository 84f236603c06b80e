#include "src/store/store.h"

#include <string>

#include "src/core/state_machine.h"

namespace trainq {

Status CheckAttemptEnd(const AttemptEnd& end) {
  if (!IsDone(end.attempt_state)) {
    return Status::Invalid("an attempt cannot end as " + std::string(StateName(end.attempt_state)));
  }
  if (!MoveAllowed(Move::kFinish, JobState::kRunning, end.job_state)) {
    return Status::Invalid("a job cannot go from its attempt's end to " +
                           std::string(StateName(end.job_state)));
  }
  return Status::Ok();
}

bool IsTokenDigest(const std::string& hash) {
  return hash.size() == 64 && hash.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace trainq
