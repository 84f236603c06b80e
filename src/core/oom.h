// Recognising an out-of-memory death from the tail of a job's log; the patterns are listed in
// docs/config.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace trainq {

// PyTorch, cuBLAS, cuDNN, NCCL, JAX/XLA and TensorFlow messages; config may add more.
const std::vector<std::string>& DefaultOomPatterns();

// The first pattern found in `log_tail` (plain substring, case-sensitive), or "" if none.
std::string MatchOom(std::string_view log_tail, const std::vector<std::string>& patterns);

// Backoff before retry `retry` (1-based): base * 2^(retry-1), capped at max.
int64_t OomBackoffMs(int retry, int64_t base_ms, int64_t max_ms);

}  // namespace trainq
