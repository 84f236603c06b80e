// What a node serves its peers of the code and data its jobs ship and of what their attempts
// leave (--stage, --collect; docs/cluster.md, "Code and data"), and forgets when a job is
// cleaned. A cluster node's Stager (stager.h) does it; one machine has no peer to serve.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

class Shipping {
 public:
  using Answer = std::function<void(Result<std::string>)>;
  virtual ~Shipping() = default;
  // Transfer `index`'s manifest text, or the bytes of the chunks named by `hashes`
  // (comma-separated), given to `done` on the loop. kNotFound / kConflict / kInvalid saying
  // why not.
  virtual Result<std::string> ServeManifest(const Job& job, size_t index) = 0;
  virtual void ServeChunks(const Job& job, size_t index, std::string hashes, Answer done) = 0;
  // The manifest of what attempt `n` of `job` left matching its --collect patterns in `cwd`,
  // then the bytes of its chunks.
  virtual void ServeOutputs(const Job& job, int n, const std::string& cwd, Answer done) = 0;
  virtual void ServeOutputChunks(JobId id, int n, std::string hashes, Answer done) = 0;
  // `trainq clean` forgot `job`: its copies on this node go.
  virtual void Forget(const Job& job) = 0;
};

// One machine's: nothing was shipped here, and every request is refused (kConflict). Holds
// nothing.
Shipping& NoShipping();

}  // namespace trainq
