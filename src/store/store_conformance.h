// The Store conformance suite: the behaviour store.h promises, written once and run
// against every backend. The tests live in store_conformance_test.cc,
// which is linked once into the test binary; a backend joins by instantiating the suite
// in its own test file with a factory that makes a fresh, empty store on each call:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance,
//                            ::testing::Values(StoreBackend{"sqlite", &MakeSqliteStore,
//                            &JobFieldInfo::sql}), StoreBackendName);
//
// The factory reports its own failures (ADD_FAILURE) and returns null; the test then
// stops. Times in the suite are fixed values, never the clock.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "src/core/job_fields.h"
#include "src/store/store.h"

namespace trainq {

struct StoreBackend {
  std::string name;  // test name suffix: letters, digits and '_' only
  std::function<std::unique_ptr<Store>()> make;
  // Where kJobFields names this store's place for a field ("": it keeps none).
  std::string_view JobFieldInfo::*column = nullptr;
};

inline void PrintTo(const StoreBackend& backend, std::ostream* os) { *os << backend.name; }

inline std::string StoreBackendName(const ::testing::TestParamInfo<StoreBackend>& info) {
  return info.param.name;
}

// Success, or the Status as the failure message: ASSERT_TRUE(IsOk(store.Get(id))).
inline ::testing::AssertionResult IsOk(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.ToString();
}
template <class T>
::testing::AssertionResult IsOk(const Result<T>& result) {
  return IsOk(result.status());
}

// The failure unless `status` has `code`, with the actual status in the message.
inline ::testing::AssertionResult HasCode(const Status& status, Code code) {
  if (status.code() == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected " << CodeName(code) << ", got " << status.ToString();
}
template <class T>
::testing::AssertionResult HasCode(const Result<T>& result, Code code) {
  return HasCode(result.status(), code);
}

class StoreConformance : public ::testing::TestWithParam<StoreBackend> {
 protected:
  static constexpr UnixMs kT0 = 1'790'000'000'000;  // a fixed "now" for the suite

  void SetUp() override {
    store_ = GetParam().make();
    ASSERT_NE(store_, nullptr) << "backend " << GetParam().name << " made no store";
  }

  Store& store() { return *store_; }

  static JobSpec Spec(std::string name) {
    JobSpec spec;
    spec.name = std::move(name);
    spec.command = {"python", "train.py"};
    spec.cwd = "/home/alice/proj";
    spec.user = "alice";
    return spec;
  }

  static Placement PlacementOn(std::string node, std::vector<int> gpus) {
    Placement p;
    p.node = std::move(node);
    for (int gpu : gpus) p.gpu_uuids.push_back("GPU-uuid-" + std::to_string(gpu));
    p.gpu_indices = std::move(gpus);
    p.reserved_bytes = uint64_t{20} << 30;
    p.cpus = 2;
    p.run_dir = "/state/runs/x";
    p.log_path = "/state/runs/x/output.log";
    return p;
  }

  static AttemptEnd Ended(JobState attempt_state, JobState job_state, std::string reason) {
    AttemptEnd end;
    end.attempt_state = attempt_state;
    end.job_state = job_state;
    end.ended_at = kT0 + 60'000;
    end.end_reason = reason;
    end.job_reason = std::move(reason);
    return end;
  }

  // One queued job; 0 (and a test failure) if the store refused it.
  JobId SubmitOne(const JobSpec& spec) {
    Result<std::vector<JobId>> ids = store().Submit(std::span(&spec, 1), kT0);
    EXPECT_TRUE(IsOk(ids));
    if (!ids.ok() || ids->size() != 1) return 0;
    return ids->front();
  }
  JobId SubmitOne() { return SubmitOne(Spec("train")); }

  // queued -> starting -> running for attempt expected_attempt + 1.
  Status StartRunning(JobId id, int expected_attempt) {
    int n = expected_attempt + 1;
    TRAINQ_RETURN_IF_ERROR(
        store().StartAttempt(id, expected_attempt, PlacementOn("node-a", {0}), kT0 + n));
    return store().MarkRunning(id, n, 1000 + n, 5000 + n, kT0 + n);
  }

  // A spec waiting on other jobs (--after, --after-any).
  static JobSpec After(std::vector<JobId> after, std::vector<JobId> after_any = {}) {
    JobSpec spec = Spec("dependent");
    spec.after = std::move(after);
    spec.after_any = std::move(after_any);
    return spec;
  }

  // A job that ran one attempt and ended in `state` (succeeded, failed or cancelled).
  JobId EndedJob(JobState state) {
    JobId id = SubmitOne();
    EXPECT_TRUE(IsOk(StartRunning(id, 0)));
    std::string reason(StateName(state));
    EXPECT_TRUE(IsOk(store().FinishAttempt(id, 1, Ended(state, state, reason))));
    return id;
  }

  // The ids of Dependents(id); a test failure if the call fails.
  std::vector<JobId> DependentIds(JobId id) {
    Result<std::vector<Job>> jobs = store().Dependents(id);
    EXPECT_TRUE(IsOk(jobs));
    std::vector<JobId> ids;
    if (jobs.ok()) {
      for (const Job& job : *jobs) ids.push_back(job.id);
    }
    return ids;
  }

  // The job as stored; a default Job (id 0) and a test failure if Get fails.
  Job Fetch(JobId id) {
    Result<Job> job = store().Get(id);
    EXPECT_TRUE(IsOk(job)) << "job " << id;
    return job.ok() ? *job : Job{};
  }

  std::unique_ptr<Store> store_;
};

}  // namespace trainq
