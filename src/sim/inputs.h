// The simulator's inputs (docs/scheduling.md, "Simulator"): a job trace and a node list,
// parsed from text. Pure: the caller reads the files and passes their text and name, which
// only appears in error messages. Every error is kInvalid and names the file, the line, the
// field and the accepted form; up to kMaxErrors problems are reported at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq::sim {

inline constexpr int kMaxErrors = 10;
inline constexpr uint64_t kGiB = 1ull << 30;
inline constexpr uint64_t kMiB = 1ull << 20;
// GPU memory of a node whose gpu_mem_gib is empty (openb's P100, G2, G3): the smallest
// size any of its GPUs is sold with, so a simulated job never gets more than it could.
inline constexpr double kDefaultGpuMemGib = 16.0;

// One row of a trace in the common layout of the shared traces.
struct TraceJob {
  std::string id;
  int64_t submit_ms = 0;
  std::optional<int64_t> duration_ms;  // nullopt: never ran in the trace
  int gpus = 0;
  int gpu_milli = 1000;                   // share of each GPU, in thousandths; 1000 whole GPUs
  std::optional<uint64_t> gpu_mem_bytes;  // per GPU, when the trace gives it
  std::string user;                       // `user`, else `vc`, else ""
  std::optional<int> cpu_milli;
  std::optional<uint64_t> host_mem_bytes;
  // `submit_time` as written ("2017-11-01 00:02:12"), in ms from 1970-01-01 00:00 of the same
  // clock, no time zone applied: what a window given in dates is compared with.
  std::optional<int64_t> submit_wall_ms;
};

// Columns by name from the header line: job_id, submit_s, duration_s, gpus, gpu_fraction
// required; gpu_mem_gib, user, vc, cpu_milli, memory_mib, submit_time optional; others ignored.
// Rows come back in file order.
Result<std::vector<TraceJob>> ParseTrace(std::string_view text, std::string_view file);

struct NodeSpec {
  std::string name;
  int gpus = 0;
  uint64_t gpu_mem_bytes = 0;
  int cpu_milli = 0;            // 0: not enforced
  uint64_t host_mem_bytes = 0;  // 0: not enforced
};

// CSV with node_id, gpus required and gpu_mem_gib, cpu_milli, memory_mib optional (an empty
// gpu_mem_gib is `default_gpu_mem_gib`).
Result<std::vector<NodeSpec>> ParseNodesCsv(std::string_view text, std::string_view file,
                                            double default_gpu_mem_gib = kDefaultGpuMemGib);
// {"nodes": [{"name": "a", "gpus": 8, "gpu_mem_gib": 32, "cpu_milli": 96000,
//             "memory_mib": 786432, "count": 4}]}; `count` nodes named a-0..a-3 (default 1,
// then named a).
Result<std::vector<NodeSpec>> ParseNodesJson(std::string_view text, std::string_view file,
                                             double default_gpu_mem_gib = kDefaultGpuMemGib);
// "8x8:32GiB" = 8 nodes of 8 GPUs with 32 GiB each; groups joined by '+' ("4x8:32GiB+2x4");
// memory defaults to `default_gpu_mem_gib`. Nodes are named n0, n1, ...
Result<std::vector<NodeSpec>> ParseNodesShorthand(std::string_view text,
                                                  double default_gpu_mem_gib = kDefaultGpuMemGib);
// Whether `text` is written as a shorthand rather than a file name.
bool LooksLikeShorthand(std::string_view text);

// "2017-11-01", "2017-11-01 06:30[:15]" or "2017-11-01T06:30[:15]" as ms from 1970-01-01
// 00:00 of the same clock (no time zone); nullopt for anything else or an impossible date.
std::optional<int64_t> ParseWallTimeMs(std::string_view text);

// "42", "42-51", "1,5,9": each seed once, in the order given.
Result<std::vector<uint64_t>> ParseSeeds(std::string_view text);

}  // namespace trainq::sim
