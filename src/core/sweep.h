// Sweeps and arrays (docs/workflow.md, "Sweeps and arrays"): one submit that expands into
// many jobs of one group. Pure parsing and expansion; the CLI sends the result as a batch.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq {

// --sweep NAME=V1,V2,...: `{NAME}` in the command takes each value in turn.
struct SweepAxis {
  std::string name;
  std::vector<std::string> values;
};

// --array as Slurm's sbatch takes it: "0-15", "1,3,5", "0-15:4" (a step), any of them
// joined by commas, then "%N" for at most N running at once.
struct ArraySpec {
  std::vector<int> indices;  // ascending, each once
  int limit = 0;             // %N; 0: no limit
};

constexpr int kMaxArrayIndexValue = 1000000;
constexpr size_t kMaxExpandedJobs = 100000;

// "lr=1e-3,3e-4": kInvalid naming --sweep and the accepted form otherwise. A name is
// letters, digits and '_'; values are split on commas, none empty.
Result<SweepAxis> ParseSweep(std::string_view text);
// kInvalid naming `field` (--array, #SBATCH --array) and the accepted form.
Result<ArraySpec> ParseArray(std::string_view text, std::string_view field = "--array");

// One job of an expansion: its command, a suffix for its name ("lr=1e-3 bs=32"), its
// array index (-1 without --array).
struct ExpandedJob {
  std::vector<std::string> command;
  std::string label;
  int array_index = -1;
};

// The cross product of `axes` (the first axis varies slowest), each combination once per
// array index when `array` is given. `{NAME}` is replaced in every argument, and `{index}`
// by the array index. kInvalid when an axis is named twice, when `{NAME}` of an axis appears
// in no argument (a sweep that would run the same command several times), or when the
// product exceeds kMaxExpandedJobs.
Result<std::vector<ExpandedJob>> ExpandJobs(const std::vector<std::string>& command,
                                            const std::vector<SweepAxis>& axes,
                                            const ArraySpec* array);

}  // namespace trainq
