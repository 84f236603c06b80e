// One machine's trust and a cluster's (trust.h).
#include "src/daemon/trust.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "src/daemon/cluster_key.h"

namespace trainq {

using json = nlohmann::json;

namespace {

// A step as the node of its batch script keeps it: its JSON text, parsed for the answer.
json StepAnswer(const std::string& text) {
  return json{{"step", json::parse(text, nullptr, false)}};
}

class OneMachine final : public Trust {
 public:
  void SignJob(JobSpec&, const std::string&) const override {}
  Status VerifyJob(JobId, const JobSpec&) const override { return Status::Ok(); }
  std::string SignToken(const TokenRecord&) const override { return ""; }
  bool MadeByANode(const TokenRecord&) const override { return true; }
  std::optional<Result<std::string>> PeerOf(const HttpRequest&, int64_t) const override {
    return std::nullopt;
  }
  json StepForPeer(JobId, int, int, const std::string& text) const override {
    return StepAnswer(text);
  }
  Result<json> StepFromPeer(JobId job, int, int, const json&,
                            const std::string& node) const override {
    return Status::Conflict(fmt::format(
        "job {}: its batch script runs on node {}; a single machine has no other node", job, node));
  }
};

class KeyTrust final : public Trust {
 public:
  explicit KeyTrust(const ClusterKey& key) : key_(key) {}
  void SignJob(JobSpec& spec, const std::string& node) const override { key_.Sign(spec, node); }
  Status VerifyJob(JobId id, const JobSpec& spec) const override { return key_.Verify(id, spec); }
  std::string SignToken(const TokenRecord& t) const override { return key_.SignToken(t); }
  bool MadeByANode(const TokenRecord& t) const override { return key_.VerifyToken(t); }
  std::optional<Result<std::string>> PeerOf(const HttpRequest& req, int64_t now_ms) const override {
    if (req.authorization.rfind(ClusterKey::kPeerScheme, 0) != 0) return std::nullopt;
    return key_.VerifyPeer(req.authorization, now_ms, req.method,
                           CanonicalTarget(req.path, req.query));
  }
  json StepForPeer(JobId job, int attempt, int rank, const std::string& text) const override {
    return json{{"step_text", text}, {"signature", key_.SignStep(job, attempt, rank, text)}};
  }
  // A step runs as the job's user on this node: only one the first node signed.
  Result<json> StepFromPeer(JobId job, int attempt, int rank, const json& answer,
                            const std::string& node) const override {
    if (!answer.is_object() || !answer.contains("step_text")) return answer;
    std::string text = answer.value("step_text", "");
    if (!key_.VerifyStep(job, attempt, rank, text, answer.value("signature", ""))) {
      spdlog::warn("job {}: a step from {} does not carry the cluster key's signature; refused",
                   job, node);
      return Status::Permission(fmt::format(
          "job {}: the step node {} gave is not signed with the cluster key; refused", job, node));
    }
    return StepAnswer(text);
  }

 private:
  const ClusterKey& key_;
};

}  // namespace

const Trust& OneMachineTrust() {
  static const OneMachine one;
  return one;
}

std::unique_ptr<Trust> ClusterTrust(const ClusterKey& key) {
  return std::make_unique<KeyTrust>(key);
}

}  // namespace trainq
