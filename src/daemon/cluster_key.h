// The cluster key: a secret every node of a cluster holds in a file and Redis never sees
// (docs/cluster.md, "The cluster key"), as Slurm's nodes share munge's key. With it a node
// signs what it writes that decides who runs what (a job's identity-bearing fields, a token's
// role and user) and its requests to its peers, and checks the same of every other node:
// write access to Redis alone yields no user's account.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

struct TokenRecord;

class ClusterKey {
 public:
  ClusterKey() = default;
  explicit ClusterKey(std::string secret) : secret_(std::move(secret)) {}
  bool empty() const { return secret_.empty(); }

  // Reads the key file: at least kMinBytes after trimming trailing whitespace, owned by this
  // process's user and not readable by group or others (munge's rule: a key others can read
  // is no key). kInvalid naming `option` and the fix.
  static Result<ClusterKey> Load(const std::string& path, std::string_view option);
  // Writes a new random key (256 bits as hex) to `path`, mode 0600; never replaces a file.
  static Status Create(const std::string& path);
  static constexpr size_t kMinBytes = 32;

  // Signs `spec` as submitted on `node`: sets signed_by and signature.
  void Sign(JobSpec& spec, const std::string& node) const;
  // Ok when `spec`'s signature is this key's over its fields as they are now; kPermission
  // naming the job otherwise.
  Status Verify(JobId id, const JobSpec& spec) const;

  std::string SignToken(const TokenRecord& t) const;
  bool VerifyToken(const TokenRecord& t) const;

  // A peer's request (GET of a log): "TrainqNode NODE MS HEX" for the Authorization header,
  // the HMAC over the node, the time and the request's method and target.
  std::string PeerAuthorization(const std::string& node, int64_t now_ms, std::string_view method,
                                std::string_view target) const;
  // The node that signed `header` for this request, when the signature holds and its time
  // is within kPeerSkewMs of now; kUnauthenticated otherwise. `target` is the path and the
  // query as the receiver rebuilt it (CanonicalTarget).
  Result<std::string> VerifyPeer(std::string_view header, int64_t now_ms, std::string_view method,
                                 std::string_view target) const;
  // A step of a `trainq sbatch` job (its JSON text) as the job's first node gives it to the
  // node of part `rank`, which checks it before its part runs it: the step's command runs as
  // the job's user, so it must come from a node, not from whoever answers at a node's address.
  std::string SignStep(JobId job, int attempt, int rank, std::string_view text) const;
  bool VerifyStep(JobId job, int attempt, int rank, std::string_view text,
                  std::string_view signature) const;
  static constexpr int64_t kPeerSkewMs = 5 * 60 * 1000;
  static constexpr std::string_view kPeerScheme = "TrainqNode ";

 private:
  std::string secret_;
};

// "PATH?K=V&K=V" with the keys in order, as both ends of a peer's request write its target:
// the sender sends it so, the receiver rebuilds it from the request it parsed.
std::string CanonicalTarget(const std::string& path,
                            const std::map<std::string, std::string>& query);

// The text a job's signature covers: the signing node and every field kJobFields signs
// (src/core/job_fields.h: all but those `trainq update` changes in place, the group id the
// store gives and the signature itself), each named and length-prefixed so no two different
// specs read the same.
std::string SignedJobText(const JobSpec& spec, const std::string& node);
// What an earlier trainq signed (user, command, environment, cwd, notify, mail, slurm, gate,
// host limits, transfers, collect, stop): still accepted for a job without a container.
std::string SignedJobTextV1(const JobSpec& spec, const std::string& node);

}  // namespace trainq
