#include "src/core/oom.h"

#include <algorithm>

namespace trainq {

const std::vector<std::string>& DefaultOomPatterns() {
  // Exact text as the frameworks print it; each is specific to device memory, so a host
  // OOM kill or a Python MemoryError never matches.
  static const std::vector<std::string> kPatterns = {
      "CUDA out of memory",                 // PyTorch (all versions)
      "torch.OutOfMemoryError",             // PyTorch >= 2.5
      "torch.cuda.OutOfMemoryError",        // PyTorch 1.13 - 2.4
      "CUDA error: out of memory",          // PyTorch/CUDA runtime
      "CUBLAS_STATUS_ALLOC_FAILED",         // cuBLAS
      "CUDNN_STATUS_ALLOC_FAILED",          // cuDNN
      "Cuda failure 'out of memory'",       // NCCL
      "RESOURCE_EXHAUSTED: Out of memory",  // JAX/XLA
      "OOM when allocating tensor",         // TensorFlow
      "CUDA_ERROR_OUT_OF_MEMORY",           // CUDA driver API (JAX, TensorFlow, Numba)
  };
  return kPatterns;
}

std::string MatchOom(std::string_view log_tail, const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    // An empty pattern (a blank config line) would match every failure.
    if (!p.empty() && log_tail.find(p) != std::string_view::npos) return p;
  }
  return "";
}

int64_t OomBackoffMs(int retry, int64_t base_ms, int64_t max_ms) {
  if (base_ms <= 0 || max_ms <= 0) return 0;
  int64_t delay = std::min(base_ms, max_ms);
  for (int i = 1; i < retry && delay < max_ms; ++i) {
    delay = delay > max_ms / 2 ? max_ms : delay * 2;
  }
  return std::min(delay, max_ms);
}

}  // namespace trainq
