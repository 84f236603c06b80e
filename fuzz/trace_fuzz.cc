// libFuzzer target for the simulator's input parsers (src/sim/inputs.h): traces, node lists
// in CSV, JSON and shorthand, and seed lists; small parsed traces are also replayed and
// placed, so no input the parsers accept can crash the simulator. Run: `make fuzz`.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/sim/allocation.h"
#include "src/sim/inputs.h"
#include "src/sim/replay.h"

namespace trainq::sim {
namespace {

void CheckInvalid(const Status& st) {
  FUZZ_CHECK(st.code() == Code::kInvalid);
  FUZZ_CHECK(!st.message().empty());
}

void CheckNodes(const Result<std::vector<NodeSpec>>& nodes) {
  if (!nodes.ok()) return CheckInvalid(nodes.status());
  FUZZ_CHECK(!nodes->empty());
  for (const NodeSpec& n : *nodes) {
    FUZZ_CHECK(!n.name.empty() && n.gpus >= 0 && n.gpus <= 1024 && n.gpu_mem_bytes > 0);
    FUZZ_CHECK(n.cpu_milli >= 0);
  }
}

void SimulateSmall(const std::vector<TraceJob>& trace) {
  if (trace.size() > 40) return;
  std::vector<NodeSpec> nodes = *ParseNodesShorthand("2x4:16GiB+1x2:32GiB");
  for (ReplayPolicy p : {ReplayPolicy::kTrainq, ReplayPolicy::kFifo, ReplayPolicy::kNaive}) {
    ReplayOptions o;
    o.policy = p;
    o.aging_ms = 1000;
    ReplayMetrics m = Replay(trace, nodes, o);
    FUZZ_CHECK(m.stuck == 0);
    FUZZ_CHECK(m.jobs + m.unplaceable + m.skipped_no_duration == int(trace.size()));
    FUZZ_CHECK(m.gpu_utilization >= 0 && m.gpu_utilization <= 1.0 + 1e-9);
  }
  // Bounded arrivals: copies of a tiny share could otherwise number in the thousands.
  bool tiny = false;
  for (const TraceJob& j : trace) tiny |= j.gpus > 0 && j.gpu_milli < 50;
  if (tiny) return;
  AllocationReport r = RunAllocation(trace, nodes, {AllocationPolicy::kBestFit, 1.3, {1}});
  for (double v : r.mean) FUZZ_CHECK(v >= 0 && v <= 100.0 + 1e-9);
}

void CheckTrace(std::string_view text) {
  Result<std::vector<TraceJob>> trace = ParseTrace(text, "t.csv");
  if (!trace.ok()) return CheckInvalid(trace.status());
  for (const TraceJob& j : *trace) {
    FUZZ_CHECK(!j.id.empty() && j.submit_ms >= 0 && j.gpus >= 0);
    FUZZ_CHECK(j.gpus == 0 || (j.gpu_milli > 0 && j.gpu_milli <= 1000));
    FUZZ_CHECK(j.gpu_milli == 1000 || j.gpus <= 1);
    FUZZ_CHECK(!j.duration_ms || *j.duration_ms >= 0);
  }
  SimulateSmall(*trace);
}

void CheckSeeds(std::string_view text) {
  Result<std::vector<uint64_t>> seeds = ParseSeeds(text);
  if (!seeds.ok()) return CheckInvalid(seeds.status());
  FUZZ_CHECK(!seeds->empty());
}

}  // namespace
}  // namespace trainq::sim

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  trainq::sim::CheckTrace(text);
  trainq::sim::CheckNodes(trainq::sim::ParseNodesCsv(text, "n.csv"));
  trainq::sim::CheckNodes(trainq::sim::ParseNodesJson(text, "n.json"));
  if (size < 200) trainq::sim::CheckNodes(trainq::sim::ParseNodesShorthand(text));
  trainq::sim::CheckSeeds(text);
  return 0;
}
