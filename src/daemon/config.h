// The daemon's options: one table (STYLE.md rule 14) read from a TOML file; the table also
// gives the defaults and the help text in docs/config.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainq/status.h"

namespace trainq {

struct Config {
  uint64_t headroom_bytes = 256ull << 20;
  int64_t oom_backoff_ms = 30000;
  int64_t oom_backoff_max_ms = 3600000;
  int64_t grace_ms = 10000;
  int64_t sample_interval_ms = 1000;
  int64_t ramp_up_ms = 60000;
  int cpu_slots = 0;  // 0: the machine's cores
  std::string fake_gpus;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::vector<std::string> oom_patterns;  // added to the built-in list
  uint64_t log_tail_bytes = 64 * 1024;
  std::string node_name;  // empty: the host name
  uint64_t max_request_bytes = 64ull << 20;
  // Scheduling (docs/scheduling.md).
  int64_t aging_ms = 2 * 3600 * 1000;                  // aging_limit
  int64_t fair_share_half_life_ms = 7 * 24 * 3600 * 1000ll;
  int master_port_first = 29500;                       // master_port_range
  int master_port_last = 29999;
  // Limits `trainq config set` changes at run time; the daemon persists them.
  std::vector<int> devices;  // GPU indices jobs may use; empty: all
  int max_jobs_per_gpu = 0;  // 0: no limit
};

struct OptionDoc {
  std::string name;
  std::string type;
  std::string default_value;
  std::string help;
};
// Every option, in the order of the table.
std::vector<OptionDoc> ConfigOptions();

// Reads `path` (TOML, one table of options). A missing file gives the defaults. Unknown
// options and wrong types are kInvalid naming the option and the accepted form.
Result<Config> LoadConfig(const std::string& path);
Result<Config> ParseConfig(const std::string& toml_text, const std::string& origin);

}  // namespace trainq
