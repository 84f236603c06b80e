// /metrics in Prometheus's text format (docs/dashboard.md, "Prometheus"): what the daemon
// counts as it goes (DaemonCounters) and what a scrape reads at once (MetricsFacts), named by
// Prometheus's rules and labelled as NVIDIA's dcgm-exporter labels its series, so queries join.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/os/system.h"

namespace trainq {

// Cumulative buckets as Prometheus keeps them: counts[i] observations <= bounds[i].
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void Observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Counted on this node since the daemon started (Prometheus's counters start again at a
// restart; rate() and increase() allow for it).
struct DaemonCounters {
  uint64_t submitted = 0;                      // jobs stored by submits made here
  std::map<std::string, uint64_t> finished{};  // by the state they ended in, here
  uint64_t oom_retries = 0;  // attempts that ran out of GPU memory here and went back
  // Elastic jobs' resizes decided here (a scheduling node), by direction: "grow", "shrink".
  std::map<std::string, uint64_t> resizes{};
  // Seconds from a job's queueing to its attempt's start, observed where the start is decided.
  Histogram queue_wait{
      {1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 259200}};
  Histogram pass_duration{
      {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
  // With metrics_per_user: the same counts per user.
  std::map<std::string, uint64_t> submitted_by_user{};
  std::map<std::pair<std::string, std::string>, uint64_t> finished_by_user{};  // (user, state)
  uint64_t events_dropped = 0;  // event-stream messages a slow reader could not take
};

// What a scrape reads at its moment.
struct MetricsFacts {
  std::string version;
  std::string node;      // trainq's node name
  std::string hostname;  // as dcgm-exporter's Hostname label (os.Hostname)
  struct Gpu {
    int index = 0;
    std::string uuid;
    std::string model;
    uint64_t total = 0;
    uint64_t used = 0;
    uint64_t reserved = 0;  // held for trainq's jobs beyond what they use yet
    uint64_t usable = 0;
    int utilization = -1;  // percent; -1 unknown
    std::vector<int64_t> jobs{};
  };
  std::vector<Gpu> gpus{};
  bool gpus_known = false;                   // a sample succeeded once
  double gpu_sample_age = 0;                 // seconds since the last good sample
  std::map<std::string, int64_t> jobs{};     // by state: waiting and active states only
  std::map<std::string, int64_t> waiting{};  // by WaitKind
  std::map<std::pair<std::string, std::string>, int64_t> jobs_by_user{};  // (user, state)
  int64_t event_streams = 0;
  uint64_t history_bytes = 0;
  int64_t connections = 0;
  ProcessStats process{};
};

// The exposition: every family with its HELP and TYPE, series in a stable order.
std::string RenderMetrics(const MetricsFacts& facts, const DaemonCounters& counters, bool per_user);

}  // namespace trainq
