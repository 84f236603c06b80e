// What the agent's and the scheduler's unit tests build an agent from: a real SQLite store in
// a temporary dir (behind FaultyStore, to refuse writes), fake shims, a fake clock and two
// fake 80 GiB GPUs, sampled once.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "src/daemon/agent.h"
#include "src/daemon/fake_shim_launcher.h"
#include "src/os/fake_clock.h"
#include "src/os/gpu/fake_gpu_probe.h"
#include "src/os/state_paths.h"
#include "src/os/system.h"
#include "src/store/faulty_store.h"
#include "src/store/sqlite/sqlite_store.h"
#include "src/store/sqlite/sqlite_test_util.h"

namespace trainq {

class AgentRig {
 public:
  static constexpr UnixMs kT0 = 1'800'000'000'000;
  static constexpr uint64_t kGiB = 1ull << 30;

  // The state dir, the store and the GPUs; call from the fixture's SetUp.
  void SetUpRig() {
    paths_ = ResolveStatePaths(dir_.path());
    ASSERT_TRUE(MakeDirs(paths_.runs).ok());
    options_.paths = paths_;
    Result<std::unique_ptr<Store>> sqlite = OpenSqliteStore(paths_.db);
    ASSERT_TRUE(sqlite.ok()) << sqlite.status().ToString();
    store_ = std::make_unique<FaultyStore>(std::move(*sqlite));
    for (int i = 0; i < 2; ++i) {
      GpuInfo g;
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i);
      g.total_bytes = g.free_bytes = 80 * kGiB;
      g.processes_known = true;
      snapshot_->gpus.push_back(g);
    }
    sampler_.Sample();
  }

  // An agent on node-a over the rig's parts; every MASTER_PORT counts as free.
  std::unique_ptr<Agent> MakeAgent(Agent::Hooks hooks, const Trust& trust = OneMachineTrust()) {
    Agent::Parts parts;
    parts.store = store_.get();
    parts.clock = &clock_;
    parts.config = &config_;
    parts.options = &options_;
    parts.sampler = &sampler_;
    parts.launcher = shims_.Launcher();
    parts.node = "node-a";
    parts.trust = &trust;
    parts.port_free = [](int) { return true; };
    auto agent = std::make_unique<Agent>(std::move(parts));
    agent->SetHooks(std::move(hooks));
    return agent;
  }

  sqlite::TempDir dir_;  // removed after the store closes
  StatePaths paths_;
  DaemonOptions options_;
  Config config_;
  FakeClock clock_{kT0};
  std::shared_ptr<GpuSnapshot> snapshot_ = std::make_shared<GpuSnapshot>();
  GpuSampler sampler_{ProbeChoice{std::make_unique<FakeGpuProbe>(snapshot_), ""}, clock_};
  FakeShims shims_;
  std::unique_ptr<FaultyStore> store_;
};

}  // namespace trainq
