// Tiresias's two-dimensional least-attained-service scheduler (2D-LAS; Gu et al., "Tiresias:
// A GPU Cluster Manager for Distributed Deep Learning", NSDI '19) as the replay's published
// anchor (docs/scheduling.md, "Preemption in the simulator"). Pure: one scheduling decision
// from the jobs in LAS order and what holds each GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace trainq::sim {

// Where a job runs: GPU positions on each of its nodes (several for a gang job).
using Placement = std::vector<std::pair<size_t, std::vector<int>>>;

// The discretised queue of a job that has attained `attained_gpu_ms` of service (GPUs x run
// time, over all its attempts): 0 below `threshold_gpu_ms`, else 1 (K = 2 queues).
int LasQueue(double attained_gpu_ms, double threshold_gpu_ms);

// The order of service: the higher queue first; within a queue running jobs before waiting ones
// (a queue is not preemptive within itself, as in the authors' simulator), then by when the job
// entered the queue (its submit time in queue 0, the moment its service crossed the threshold in
// queue 1), then row.
struct LasRank {
  int queue = 0;
  bool running = false;
  int64_t entered_ms = 0;
  size_t row = 0;
  bool operator<(const LasRank& o) const;
};

struct LasJob {
  size_t row = 0;
  int gpus = 0;  // whole GPUs
  bool running = false;
  Placement where;  // its GPUs, while running
};

// What holds one GPU now.
struct LasGpu {
  enum class Use { kFree, kStopping, kRunning };
  Use use = Use::kFree;
  size_t holder = 0;  // the running job's row
};

struct LasPlan {
  std::vector<size_t> preempt;                      // running jobs to stop, in LAS order
  std::vector<std::pair<size_t, Placement>> start;  // waiting jobs that start now
};

// Serves `order` (LAS order; stopping jobs left out) from an empty slate: a running job keeps its
// GPUs unless a job served before it claimed one of them, and is then preempted; a waiting job
// claims GPUs on one node (a job wider than the largest node: whole nodes until its GPUs are
// covered), preferring free GPUs, then those of stopping jobs, then those of running jobs served
// after it (the smallest such jobs first), the node needing the fewest GPUs of running jobs
// first, then the first node (first fit, consolidated). A waiting job starts now only where all
// its GPUs are free now; one that must wait for a stop keeps its claim in this decision only.
LasPlan PlanLas(std::span<const LasJob> order, std::span<const std::vector<LasGpu>> nodes);

}  // namespace trainq::sim
