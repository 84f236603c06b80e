// Slurm's compressed node lists ("node[1-3,5],gpu07,a[01-02]b"): what SLURM_JOB_NODELIST holds
// and `scontrol show hostnames` expands. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq {

// The most names one list may expand to: a typo like n[1-999999999] is refused, not expanded.
inline constexpr size_t kMaxHostlistNames = 65536;

// Every name of `list`, in order, as Slurm expands it: items split on commas outside
// brackets; each [...] holds numbers and ranges (a range keeps the width of its zero-padded
// first number: [08-11] is 08 09 10 11); several bracket groups in one item multiply
// (x[1-2]-y[3-4] is x1-y3 x1-y4 x2-y3 x2-y4). kInvalid naming the item and the accepted form
// for an unclosed bracket, a reversed range or a list past kMaxHostlistNames.
Result<std::vector<std::string>> ExpandHostlist(std::string_view list);

// `names` in Slurm's compressed form, in their order: runs of names that differ only in a
// trailing number of the same width (or no leading zero) join as prefix[a-b,c]. Names with
// no trailing number stay as they are.
std::string CompressHostlist(const std::vector<std::string>& names);

// Slurm's count form of per-node numbers: {1,1,2} -> "1(x2),2".
std::string CompressCounts(const std::vector<int>& counts);

}  // namespace trainq
