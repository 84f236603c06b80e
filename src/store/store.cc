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

uint64_t RecordBytes(const JobSpec& spec, size_t env_bytes) {
  // Ids, numbers, states and the attempt records' fixed fields, with each store's overhead.
  constexpr uint64_t kFixed = 256;
  uint64_t bytes = kFixed + env_bytes + spec.name.size() + spec.cwd.size() + spec.record.size() +
                   spec.notify_url.size() + spec.mail.size() + spec.submit_key.size() +
                   spec.signature.size() + spec.signed_by.size() + spec.gpu_type.size();
  for (const std::string& arg : spec.command) bytes += arg.size() + 3;
  for (const std::string& node : spec.nodes_allowed) bytes += node.size() + 3;
  for (const std::string& node : spec.nodes_excluded) bytes += node.size() + 3;
  for (const std::string& c : spec.constraints) bytes += c.size() + 3;
  bytes += spec.container.image.size() + spec.container.workdir.size();
  for (const std::string& m : spec.container.mounts) bytes += m.size() + 3;
  bytes += spec.collect_to.size() + spec.stop.checkpoint.size();
  for (const std::string& g : spec.collect) bytes += g.size() + 3;
  for (const Transfer& t : spec.transfers) {
    bytes += t.src.size() + t.dst.size() + t.manifest.size() + t.manifest_path.size() + 100;
  }
  return bytes + 8 * (spec.after.size() + spec.after_any.size());
}

bool IsTokenDigest(const std::string& hash) {
  return hash.size() == 64 && hash.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace trainq
