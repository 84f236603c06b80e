// Which GPUs and nodes a job may use beyond counts and memory: a GPU type (--gpu-type, Slurm's
// --gres=gpu:TYPE:N) and node features (--constraint, Slurm's -C). Pure.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainq/status.h"

namespace trainq {

inline constexpr size_t kMaxGpuTypeBytes = 64;
inline constexpr size_t kMaxFeatureBytes = 64;
inline constexpr size_t kMaxConstraints = 32;  // clauses, and features in one clause

// The accepted forms, for error messages.
inline constexpr std::string_view kGpuTypeForm =
    "a GPU model or label of 1 to 64 letters, digits, spaces, '.', '_' or '-', like a100, h100, "
    "\"rtx 4090\"";
inline constexpr std::string_view kConstraintForm =
    "features of 1 to 64 letters, digits, '.', '_' or '-', joined by & (all of them) or | (any "
    "of them), like ib, ib&nvlink, a100|h100";

// Whether a GPU is of `type`: every word of `type` is a word of the GPU's model name or of its
// node's label (config gpu_type), ignoring case, words being split at spaces and '-'. So a100
// matches "NVIDIA A100-SXM4-80GB" and "a100 80gb" does too, but a10 does not: a substring
// test would send an A10 job to an A100. An empty type matches every GPU.
bool GpuTypeMatches(std::string_view type, std::string_view model, std::string_view label);

// `type` as reasons show it: "A100", "RTX 4090".
std::string GpuTypeShown(std::string_view type);

// kInvalid naming `field` when `type` is not kGpuTypeForm.
Status CheckGpuType(std::string_view type, std::string_view field);

// One --constraint expression as clauses that must all hold, each "a" or "a|b" (any of
// them): "ib&nvlink" -> {"ib", "nvlink"}, "a100|h100" -> {"a100|h100"}. & and | are not mixed
// in one expression (Slurm's brackets are not read): repeat --constraint to AND alternatives.
// Slurm's counts (a*2) and brackets are refused naming the form. kInvalid names `field`.
Result<std::vector<std::string>> ParseConstraint(std::string_view text, std::string_view field);

// Whether a node with `features` meets every clause (names compared ignoring case).
bool MeetsConstraints(const std::vector<std::string>& features,
                      const std::vector<std::string>& constraints);

// The clauses a node with `features` fails, for reasons: {"ib", "a100|h100"}.
std::vector<std::string> UnmetConstraints(const std::vector<std::string>& features,
                                          const std::vector<std::string>& constraints);

// GPUs counted by model (and label), in the order first seen, for messages that say what there
// is: "2 NVIDIA A100-SXM4-80GB, 1 Tesla T4 (label small)".
class GpuCensus {
 public:
  void Add(std::string_view model, std::string_view label);
  // At most `max_listed` models, then "N more"; "none" when no GPU was added.
  std::string Text(size_t max_listed = 64) const;

 private:
  std::vector<std::pair<std::string, int>> models_;
};

// Whether `name` may be a feature (config node_features): kConstraintForm's names.
bool ValidFeature(std::string_view name);

}  // namespace trainq
