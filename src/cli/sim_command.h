// `trainq sim replay|placement`: the scheduling simulator (docs/scheduling.md). Runs in the
// CLI process, no daemon. Exit codes: 0 done, 2 bad input (file, line, field named).
#pragma once

#include <string>

#include "src/cli/command_table.h"

namespace CLI {
class App;
}

namespace trainq {

struct SimArgs {
  std::string trace, nodes, policy = "trainq";
  std::string aging = "2h", half_life = "7d";
  int max_holds = 1;
  std::string window;  // "": the whole trace
  std::string warmup;  // "": none
  // Preemption (replay). Empty strings and 0: not given, the defaults of sim::ReplayOptions.
  bool preempt = false, preempt_fair_share = false, preempt_aging = false;
  int preempt_priority_gap = -1;  // -1: not given
  std::string min_runtime, preempt_spare, stop_time, ckpt_interval, restart_cost;
  double las_threshold = 0;
  std::string attained_service;  // "": off
  bool preempt_attained_service = false;
  // Elastic jobs (replay). -1: not given.
  double elastic_fraction = -1, scaling_exponent = -1;
  int64_t seed = -1;
  std::string seeds = "42-51";
  double inflate = 1.3;
  double default_gpu_mem_gib = 16.0;
  bool json = false;
};

// `sim replay` and `sim placement` (rows of src/cli/command_table.cc).
Action SetupSimReplay(CLI::App& cmd);
Action SetupSimPlacement(CLI::App& cmd);

}  // namespace trainq
