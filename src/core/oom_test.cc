#include "src/core/oom.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::Contains;

constexpr const char* kRequired[] = {
    "CUDA out of memory",           "torch.OutOfMemoryError",
    "torch.cuda.OutOfMemoryError",  "CUDA error: out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",   "CUDNN_STATUS_ALLOC_FAILED",
    "Cuda failure 'out of memory'", "RESOURCE_EXHAUSTED: Out of memory",
    "OOM when allocating tensor",
};

TEST(OomPatternsTest, DefaultsHoldEveryFrameworksMessageExactly) {
  for (const char* p : kRequired) EXPECT_THAT(DefaultOomPatterns(), Contains(p));
  for (const std::string& p : DefaultOomPatterns()) EXPECT_FALSE(p.empty());
}

struct LogCase {
  const char* what;
  const char* tail;
  const char* pattern;  // "" when it is not a GPU OOM
};

const LogCase kLogs[] = {
    {"PyTorch 2.5",
     R"(Traceback (most recent call last):
  File "/home/ada/proj/train.py", line 88, in <module>
    loss = model(batch).loss
  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1736, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 3.19 MiB is free. Including non-PyTorch memory, this process has 79.09 GiB memory in use.
)",
     "CUDA out of memory"},
    {"PyTorch 2.5 class name alone", "torch.OutOfMemoryError: boom\n", "torch.OutOfMemoryError"},
    {"PyTorch 1.13", "torch.cuda.OutOfMemoryError: allocator gave up\n",
     "torch.cuda.OutOfMemoryError"},
    {"CUDA runtime via PyTorch",
     "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously "
     "reported at some other API call, so the stacktrace below might be incorrect.\n",
     "CUDA error: out of memory"},
    {"cuBLAS",
     "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n",
     "CUBLAS_STATUS_ALLOC_FAILED"},
    {"cuDNN", "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED\n",
     "CUDNN_STATUS_ALLOC_FAILED"},
    {"NCCL",
     "gpu3:1234:1290 [3] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'\n"
     "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
     "unhandled cuda error\n",
     "Cuda failure 'out of memory'"},
    {"JAX/XLA",
     "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
     "allocate 42949672960 bytes.\n",
     "RESOURCE_EXHAUSTED: Out of memory"},
    {"TensorFlow",
     "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
     "tensor with shape[8192,8192] and type float on /job:localhost/replica:0/task:0/device:GPU:0 "
     "by allocator GPU_0_bfc\n",
     "OOM when allocating tensor"},
    {"CUDA driver API",
     "jax: E external/xla/xla/stream_executor/cuda/cuda_driver.cc:628] failed to alloc: "
     "CUDA_ERROR_OUT_OF_MEMORY: out of memory\n",
     "CUDA_ERROR_OUT_OF_MEMORY"},
    {"Linux OOM killer (host memory)",
     "[12345.678901] Out of memory: Killed process 4242 (python) total-vm:81234567kB, "
     "anon-rss:65432100kB\nhost out of memory\nKilled\n",
     ""},
    {"Python MemoryError",
     "Traceback (most recent call last):\n  File \"prep.py\", line 3, in <module>\n"
     "    x = [0] * (10 ** 12)\nMemoryError\n",
     ""},
    {"numpy host allocation",
     "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 74.5 GiB for an array with "
     "shape (100000, 100000) and data type float64\n",
     ""},
    {"an ordinary failure",
     "Traceback (most recent call last):\n  File \"train.py\", line 1\nValueError: bad lr\n", ""},
    {"different case is not the message", "cuda out of memory\n", ""},
    {"empty tail", "", ""},
};

TEST(MatchOomTest, RecognisesRealLogTailsAndNothingElse) {
  for (const LogCase& c : kLogs) {
    EXPECT_EQ(MatchOom(c.tail, DefaultOomPatterns()), c.pattern) << c.what;
  }
}

TEST(MatchOomTest, ConfiguredPatternsAndBlankLines) {
  const std::vector<std::string> patterns = {"", "my allocator gave up"};
  EXPECT_EQ(MatchOom("ValueError: bad lr\n", patterns), "");  // "" must not match everything
  EXPECT_EQ(MatchOom("x\nmy allocator gave up\n", patterns), "my allocator gave up");
  EXPECT_EQ(MatchOom("CUDA out of memory", {}), "");
}

TEST(OomBackoffTest, DoublesFromTheBaseUpToTheCap) {
  constexpr int64_t kBase = 30'000;
  constexpr int64_t kMax = 600'000;
  const std::pair<int, int64_t> cases[] = {
      {1, 30'000},  {2, 60'000},    {3, 120'000},         {4, 240'000}, {5, 480'000}, {6, 600'000},
      {7, 600'000}, {100, 600'000}, {1'000'000, 600'000}, {0, 30'000},  {-3, 30'000},
  };
  for (const auto& [retry, ms] : cases) EXPECT_EQ(OomBackoffMs(retry, kBase, kMax), ms) << retry;
}

TEST(OomBackoffTest, DegenerateConfigurations) {
  EXPECT_EQ(OomBackoffMs(3, 0, 600'000), 0);
  EXPECT_EQ(OomBackoffMs(3, 30'000, 0), 0);
  EXPECT_EQ(OomBackoffMs(1, 90'000, 60'000), 60'000);  // base above the cap
  constexpr int64_t kHuge = INT64_MAX / 2 + 1;
  EXPECT_EQ(OomBackoffMs(5, kHuge, INT64_MAX), INT64_MAX);  // no overflow
}

}  // namespace
}  // namespace trainq
