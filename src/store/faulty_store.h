// A store that passes every call to another one, except those a test told it to fail:
// a busy database, a full disk or a dropped connection at exactly the call where it hurts.
// FaultyStore wraps a Store, FaultyClusterStore a cluster's store (the daemon then runs in
// cluster mode, as with the store it wraps).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "src/store/cluster.h"
#include "src/store/store.h"

namespace trainq {

template <class Base>
class Faulty : public Base {
 public:
  explicit Faulty(std::unique_ptr<Base> inner) : inner_(std::move(inner)) {}

  // The next `times` calls of `method` ("MarkRunning", "Submit", ...) return `st` and change
  // nothing (a full disk stays full for a while).
  void FailNext(const std::string& method, Status st, int times = 1) {
    faults_[method] = {std::move(st), times};
  }
  // Rows passed to SetReasons so far, failed calls excluded: what a pass wrote.
  size_t reasons_written() const { return reasons_written_; }

  Result<std::vector<JobId>> Submit(std::span<const JobSpec> specs, UnixMs now) override {
    if (Status st = Take("Submit"); !st.ok()) return st;
    return inner_->Submit(specs, now);
  }
  Status Backup(const std::string& dest) override {
    if (Status st = Take("Backup"); !st.ok()) return st;
    return inner_->Backup(dest);
  }
  Result<std::vector<JobId>> IdsForSubmitKey(const std::string& user,
                                             const std::string& key) override {
    if (Status st = Take("IdsForSubmitKey"); !st.ok()) return st;
    return inner_->IdsForSubmitKey(user, key);
  }
  Result<Job> Get(JobId id) override {
    if (Status st = Take("Get"); !st.ok()) return st;
    return inner_->Get(id);
  }
  Status AddUsage(JobId id, int attempt, const AttemptUsage& add) override {
    if (Status st = Take("AddUsage"); !st.ok()) return st;
    return inner_->AddUsage(id, attempt, add);
  }
  Result<JobId> LastId() override {
    if (Status st = Take("LastId"); !st.ok()) return st;
    return inner_->LastId();
  }
  Result<std::vector<Job>> List(const ListQuery& query) override {
    if (Status st = Take("List"); !st.ok()) return st;
    return inner_->List(query);
  }
  Status StartAttempt(JobId id, int expected, const Placement& p, UnixMs now) override {
    if (Status st = Take("StartAttempt"); !st.ok()) return st;
    return inner_->StartAttempt(id, expected, p, now);
  }
  Status MarkRunning(JobId id, int attempt, int64_t pid, uint64_t ticks, UnixMs now) override {
    if (Status st = Take("MarkRunning"); !st.ok()) return st;
    return inner_->MarkRunning(id, attempt, pid, ticks, now);
  }
  Status FinishAttempt(JobId id, int attempt, const AttemptEnd& end) override {
    if (Status st = Take("FinishAttempt"); !st.ok()) return st;
    return inner_->FinishAttempt(id, attempt, end);
  }
  Status RecordPeak(JobId id, int attempt, uint64_t bytes) override {
    if (Status st = Take("RecordPeak"); !st.ok()) return st;
    return inner_->RecordPeak(id, attempt, bytes);
  }
  Status CancelWaiting(JobId id, const std::string& reason) override {
    if (Status st = Take("CancelWaiting"); !st.ok()) return st;
    return inner_->CancelWaiting(id, reason);
  }
  Result<std::vector<Status>> CancelWaitingMany(
      std::span<const std::pair<JobId, std::string>> cancels) override {
    if (Status st = Take("CancelWaitingMany"); !st.ok()) return st;
    return inner_->CancelWaitingMany(cancels);
  }
  Status Requeue(JobId id, const std::string& reason, UnixMs now) override {
    if (Status st = Take("Requeue"); !st.ok()) return st;
    return inner_->Requeue(id, reason, now);
  }
  Result<std::vector<Job>> Dependents(JobId id) override {
    if (Status st = Take("Dependents"); !st.ok()) return st;
    return inner_->Dependents(id);
  }
  Result<std::vector<JobId>> Forget(std::span<const JobId> ids,
                                    std::span<const AcctRow> summaries) override {
    if (Status st = Take("Forget"); !st.ok()) return st;
    return inner_->Forget(ids, summaries);
  }
  Result<std::vector<AcctRow>> AcctRecords(const std::string& user, UnixMs since) override {
    return inner_->AcctRecords(user, since);
  }
  Result<UserFootprint> Footprint(const std::string& user) override {
    if (Status st = Take("Footprint"); !st.ok()) return st;
    return inner_->Footprint(user);
  }
  Status UpdateJob(JobId id, const JobSpec& spec, UnixMs not_before, const std::string& reason,
                   bool running) override {
    if (Status st = Take("UpdateJob"); !st.ok()) return st;
    return inner_->UpdateJob(id, spec, not_before, reason, running);
  }
  Status MoveWaiting(JobId id, JobState from, JobState to, const std::string& reason,
                     UnixMs now) override {
    if (Status st = Take("MoveWaiting"); !st.ok()) return st;
    return inner_->MoveWaiting(id, from, to, reason, now);
  }
  Status SetReasons(std::span<const std::pair<JobId, std::string>> reasons) override {
    if (Status st = Take("SetReasons"); !st.ok()) return st;
    reasons_written_ += reasons.size();
    return inner_->SetReasons(reasons);
  }

  Status AddToken(const TokenRecord& token) override {
    if (Status st = Take("AddToken"); !st.ok()) return st;
    return inner_->AddToken(token);
  }
  Result<std::vector<TokenRecord>> ListTokens() override {
    if (Status st = Take("ListTokens"); !st.ok()) return st;
    return inner_->ListTokens();
  }
  Status RevokeToken(const std::string& name, UnixMs now) override {
    if (Status st = Take("RevokeToken"); !st.ok()) return st;
    return inner_->RevokeToken(name, now);
  }
  Result<std::optional<TokenRecord>> FindTokenByHash(const std::string& hash) override {
    if (Status st = Take("FindTokenByHash"); !st.ok()) return st;
    return inner_->FindTokenByHash(hash);
  }

 protected:
  Status Take(const char* method) {
    auto it = faults_.find(method);
    if (it == faults_.end()) return Status::Ok();
    Status st = it->second.first;
    if (--it->second.second <= 0) faults_.erase(it);
    return st;
  }

  std::unique_ptr<Base> inner_;

 private:
  std::map<std::string, std::pair<Status, int>> faults_;  // by method: the error, calls left
  size_t reasons_written_ = 0;
};

class FaultyStore final : public Faulty<Store> {
 public:
  using Faulty::Faulty;
};

class FaultyClusterStore final : public Faulty<ClusterStore> {
 public:
  using Faulty::Faulty;

  Result<UnixMs> Heartbeat(const NodeRecord& node) override {
    if (Status st = Take("Heartbeat"); !st.ok()) return st;
    return inner_->Heartbeat(node);
  }
  Result<std::vector<NodeRecord>> Nodes() override {
    if (Status st = Take("Nodes"); !st.ok()) return st;
    return inner_->Nodes();
  }
  Status SetDrained(const std::string& node, bool drained) override {
    if (Status st = Take("SetDrained"); !st.ok()) return st;
    return inner_->SetDrained(node, drained);
  }
  Status RemoveNode(const std::string& node) override {
    if (Status st = Take("RemoveNode"); !st.ok()) return st;
    return inner_->RemoveNode(node);
  }
  Result<LeaderLease> AcquireLeader(const std::string& node, int64_t lease_ms) override {
    if (Status st = Take("AcquireLeader"); !st.ok()) return st;
    return inner_->AcquireLeader(node, lease_ms);
  }
  Status ResignLeader(const std::string& node, int64_t epoch) override {
    if (Status st = Take("ResignLeader"); !st.ok()) return st;
    return inner_->ResignLeader(node, epoch);
  }
  void SetLeaderFence(const std::string& node, int64_t epoch) override {
    inner_->SetLeaderFence(node, epoch);
  }
  Result<std::vector<JobId>> MarkNodeLost(const std::string& node, UnixMs lapsed_before,
                                          int max_node_failures, int64_t wait_ms) override {
    if (Status st = Take("MarkNodeLost"); !st.ok()) return st;
    return inner_->MarkNodeLost(node, lapsed_before, max_node_failures, wait_ms);
  }
  Result<std::vector<Job>> ActiveOn(const std::string& node) override {
    if (Status st = Take("ActiveOn"); !st.ok()) return st;
    return inner_->ActiveOn(node);
  }
  Status RequestCancel(JobId id, int attempt, const std::string& by) override {
    if (Status st = Take("RequestCancel"); !st.ok()) return st;
    return inner_->RequestCancel(id, attempt, by);
  }
  Result<std::optional<std::string>> CancelRequested(JobId id, int attempt) override {
    if (Status st = Take("CancelRequested"); !st.ok()) return st;
    return inner_->CancelRequested(id, attempt);
  }
  Status RequestStop(JobId id, int attempt, const std::string& stop) override {
    if (Status st = Take("RequestStop"); !st.ok()) return st;
    return inner_->RequestStop(id, attempt, stop);
  }
  Result<std::string> StopRequested(JobId id, int attempt) override {
    if (Status st = Take("StopRequested"); !st.ok()) return st;
    return inner_->StopRequested(id, attempt);
  }
  Status AddPart(JobId id, int attempt, std::span<const AttemptPart> before,
                 const AttemptPart& added) override {
    if (Status st = Take("AddPart"); !st.ok()) return st;
    return inner_->AddPart(id, attempt, before, added);
  }
  std::unique_ptr<EventSubscription> Subscribe(
      std::function<void(const std::string& event)> on_event) override {
    return inner_->Subscribe(std::move(on_event));
  }
  Status Publish(const std::string& event) override {
    if (Status st = Take("Publish"); !st.ok()) return st;
    return inner_->Publish(event);
  }
  std::unique_ptr<ClusterStore> Another() const override { return inner_->Another(); }
};

}  // namespace trainq
