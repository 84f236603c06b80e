// What this node believes of writing it did not do itself. A cluster's store is written by
// many hands: its nodes sign what decides who runs what (jobs, tokens, the steps of a batch
// job) and the requests they make of each other with the cluster key (cluster_key.h), and
// check the same of every other node. One machine's store is its own: nothing is signed or
// checked, and no node calls it. The daemon chooses one of the two with its mode (mode.h);
// the roles that sign or check hold a Trust and never ask which it is.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "src/api/http.h"
#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

class ClusterKey;
struct TokenRecord;

class Trust {
 public:
  virtual ~Trust() = default;
  // Submits about to be stored on `node`: signed so the node that runs them can check them.
  virtual void SignJob(JobSpec& spec, const std::string& node) const = 0;
  // Before a stored job runs here: kPermission naming the job when no node signed it so.
  virtual Status VerifyJob(JobId id, const JobSpec& spec) const = 0;
  // The signature a new token carries ("" where nothing is signed).
  virtual std::string SignToken(const TokenRecord& t) const = 0;
  // Whether a stored token was made by a node (one written into the store by another hand
  // acts as nobody).
  virtual bool MadeByANode(const TokenRecord& t) const = 0;
  // A request signed by a peer node (its Authorization in ClusterKey::kPeerScheme): the
  // node's name, or kUnauthenticated saying why not. nullopt: not a peer's request here (one
  // machine has no peer, and such a header is then judged as any other).
  virtual std::optional<Result<std::string>> PeerOf(const HttpRequest& req,
                                                    int64_t now_ms) const = 0;
  // A batch job's step (its JSON text) as the job's first node hands it to the node running
  // part `rank`: signed, so that node runs only what a node gave.
  virtual nlohmann::json StepForPeer(JobId job, int attempt, int rank,
                                     const std::string& text) const = 0;
  // What a peer node answered for such a step request: the step when its signature holds,
  // kPermission naming the job and `node` otherwise.
  virtual Result<nlohmann::json> StepFromPeer(JobId job, int attempt, int rank,
                                              const nlohmann::json& answer,
                                              const std::string& node) const = 0;
};

// One machine: nothing to sign or check. A static object: it holds nothing.
const Trust& OneMachineTrust();
// A cluster's nodes: `key` (which outlives the object) signs and checks.
std::unique_ptr<Trust> ClusterTrust(const ClusterKey& key);

}  // namespace trainq
