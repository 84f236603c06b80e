// One machine (mode.h): this node alone. The scheduler always places, on this node's GPUs as
// last sampled, and the agent starts what it decides.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/daemon/mode.h"
#include "src/os/clock.h"

namespace trainq {

class LocalMode final : public Mode, public Scheduler::Site {
 public:
  struct Parts {
    const Clock* clock = nullptr;
    Agent* agent = nullptr;
    Scheduler* scheduler = nullptr;  // the policy GET /v1/nodes judges usable memory by
    const GpuSampler* sampler = nullptr;
    std::string node;
    std::string address;  // node_address, or the host name
    std::function<int()> cpu_slots;
    NodeLabels labels;
  };
  explicit LocalMode(Parts parts) : p_(std::move(parts)) {}

  Scheduler::Site& site() override { return *this; }
  bool Places() const override { return true; }
  std::vector<NodeState> PassNodes() override { return {Node()}; }
  std::vector<NodeState> LastNodes() const override { return {Node()}; }
  RunningUses Running() override;
  Status Place(const Job& job, const StartDecision& decision) override {
    return p_.agent->StartLocal(job, decision);
  }
  Status Preempt(const Job& victim, const ShimControl& control) override {
    return p_.agent->Control(victim.id, control, nullptr);
  }
  bool ReadsLastAttempt() const override { return false; }

  Status CancelElsewhere(const Job& job, const std::string& by, std::string* message) override;
  Result<HttpResponse> AskNode(const std::string& node, const std::string& method,
                               const std::string& path,
                               const std::map<std::string, std::string>& query,
                               const std::string& body, std::string_view what) override;
  Result<nlohmann::json> Nodes() override;
  // This node, always up.
  Result<std::vector<std::pair<std::string, std::string>>> NodeStates() override {
    return std::vector<std::pair<std::string, std::string>>{{p_.node, "up"}};
  }
  Status Drain(const std::string& name, bool drain) override;
  Status RemoveNode(const std::string& name) override;
  Result<nlohmann::json> StoreSeen() override;
  Shipping& shipping() override { return NoShipping(); }

 private:
  NodeState Node() const {
    return ThisNode(p_.node, p_.cpu_slots(), *p_.agent, *p_.sampler, p_.labels);
  }

  Parts p_;
};

}  // namespace trainq
