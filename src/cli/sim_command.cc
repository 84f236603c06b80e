#include "src/cli/sim_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "src/cli/format.h"
#include "src/core/duration.h"
#include "src/sim/allocation.h"
#include "src/sim/inputs.h"
#include "src/sim/replay.h"

namespace trainq {

namespace {

void AddInputs(CLI::App& cmd, SimArgs& a) {
  cmd.add_option("--trace", a.trace,
                 "trace CSV: job_id,submit_s,duration_s,gpus,gpu_fraction,"
                 "gpu_mem_gib,user[,cpu_milli,memory_mib]")
      ->required();
  cmd.add_option("--nodes", a.nodes,
                 "node list: CSV (node_id,gpus,gpu_model,gpu_mem_gib,"
                 "cpu_milli,memory_mib), JSON ({\"nodes\":[...]}) or NxG[:MEM] like 8x8:32GiB")
      ->required();
  cmd.add_option("--default-gpu-mem", a.default_gpu_mem_gib,
                 "GiB of a GPU whose memory the node list leaves empty (default 16)");
  cmd.add_flag("--json", a.json, "one line of JSON (default: a table)");
}

Result<std::string> ReadFile(const std::string& path, const char* option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Invalid(fmt::format("{}: cannot read '{}'", option, path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<std::vector<sim::NodeSpec>> LoadNodes(const SimArgs& a) {
  std::ifstream probe(a.nodes);
  if (!probe && sim::LooksLikeShorthand(a.nodes))
    return sim::ParseNodesShorthand(a.nodes, a.default_gpu_mem_gib);
  if (!probe && a.nodes.find_first_not_of("0123456789") == std::string::npos) {
    return Status::Invalid(fmt::format(
        "--nodes: '{}' is a count, not a node list; give NODESxGPUS[:MEM] like {}x8:80GiB "
        "({} nodes of 8 GPUs), or a CSV or JSON file",
        a.nodes, a.nodes, a.nodes));
  }
  Result<std::string> text = ReadFile(a.nodes, "--nodes");
  if (!text.ok()) return text.status();
  size_t first = text->find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (*text)[first] == '{')
    return sim::ParseNodesJson(*text, a.nodes, a.default_gpu_mem_gib);
  return sim::ParseNodesCsv(*text, a.nodes, a.default_gpu_mem_gib);
}

Result<std::vector<sim::TraceJob>> LoadTrace(const SimArgs& a) {
  Result<std::string> text = ReadFile(a.trace, "--trace");
  if (!text.ok()) return text.status();
  return sim::ParseTrace(*text, a.trace);
}

// One value as the table shows it: 4 significant digits; a figure in seconds (a key ending
// in _s) also as a duration.
std::string Shown(const std::string& key, const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number()) return v.dump();
  double x = v.get<double>();
  bool whole = v.is_number_integer() || (x == std::floor(x) && std::fabs(x) < 1e15);
  std::string text = whole ? fmt::format("{:.0f}", x) : fmt::format("{:.4g}", x);
  if (key.size() > 2 && key.ends_with("_s") && x >= 60) {
    text = fmt::format("{} ({} s)", FormatDuration(static_cast<int64_t>(x * 1000)), text);
  }
  return text;
}

// Every leaf of the report as a row "a.b[2].c  value", in the report's order.
void Flatten(const nlohmann::ordered_json& v, const std::string& key, const std::string& name,
             std::vector<std::vector<std::string>>& rows) {
  if (v.is_object()) {
    for (const auto& [k, child] : v.items())
      Flatten(child, k, name.empty() ? k : name + "." + k, rows);
    return;
  }
  if (v.is_array()) {
    bool scalars = v.size() <= 12 &&
                   std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_primitive(); });
    if (scalars) {
      std::vector<std::string> parts;
      for (const auto& e : v) parts.push_back(Shown(key, e));
      rows.push_back({name, fmt::format("{}", fmt::join(parts, ", "))});
      return;
    }
    for (size_t i = 0; i < v.size(); ++i) Flatten(v[i], key, fmt::format("{}[{}]", name, i), rows);
    return;
  }
  rows.push_back({name, Shown(key, v)});
}

void Print(const std::string& one_line_json, bool json) {
  if (json) {
    std::printf("%s\n", one_line_json.c_str());
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"FIGURE", "VALUE"}};
  Flatten(nlohmann::ordered_json::parse(one_line_json), "", "", rows);
  std::fputs(RenderTable(rows).c_str(), stdout);
}

int Fail(const Status& st) {
  std::fprintf(stderr, "trainq sim: %s\n", st.message().c_str());
  return ExitCodeFor(st.code());
}

Result<sim::ReplayOptions> ReplayOptionsFrom(const SimArgs& a) {
  sim::ReplayOptions o;
  std::optional<sim::ReplayPolicy> policy = sim::ParseReplayPolicy(a.policy);
  if (!policy) {
    return Status::Invalid(
        fmt::format("--policy: '{}' is not a replay policy; expected trainq, "
                    "fifo or naive",
                    a.policy));
  }
  o.policy = *policy;
  Result<int64_t> aging = ParseDurationMs(a.aging, "--aging");
  if (!aging.ok()) return aging.status();
  Result<int64_t> half_life = ParseDurationMs(a.half_life, "--half-life");
  if (!half_life.ok()) return half_life.status();
  o.aging_ms = *aging;
  o.half_life_ms = *half_life;
  if (a.max_holds < 0) {
    return Status::Invalid(
        fmt::format("--max-holds: {} is not valid; expected a whole number of "
                    "jobs (0 = every aged job)",
                    a.max_holds));
  }
  o.max_holds = a.max_holds;
  return o;
}

int RunReplay(const SimArgs& a) {
  Result<sim::ReplayOptions> options = ReplayOptionsFrom(a);
  if (!options.ok()) return Fail(options.status());
  Result<std::vector<sim::TraceJob>> trace = LoadTrace(a);
  if (!trace.ok()) return Fail(trace.status());
  Result<std::vector<sim::NodeSpec>> nodes = LoadNodes(a);
  if (!nodes.ok()) return Fail(nodes.status());
  sim::ReplayMetrics m = sim::Replay(*trace, *nodes, *options);
  Print(sim::ReplayJson(m, *options), a.json);
  return 0;
}

Result<sim::AllocationOptions> AllocationOptionsFrom(const SimArgs& a) {
  sim::AllocationOptions o;
  std::optional<sim::AllocationPolicy> policy = sim::ParseAllocationPolicy(a.policy);
  if (!policy) {
    return Status::Invalid(
        fmt::format("--policy: '{}' is not a placement policy; expected "
                    "trainq, bestfit or random",
                    a.policy));
  }
  o.policy = *policy;
  if (!(a.inflate >= 0.01 && a.inflate <= 100)) {
    return Status::Invalid(
        fmt::format("--inflate: {} is out of range; expected a factor of the "
                    "cluster's GPUs from 0.01 to 100, e.g. 1.3",
                    a.inflate));
  }
  o.inflate = a.inflate;
  Result<std::vector<uint64_t>> seeds = sim::ParseSeeds(a.seeds);
  if (!seeds.ok()) return seeds.status();
  o.seeds = *seeds;
  return o;
}

int RunPlacement(const SimArgs& a) {
  Result<sim::AllocationOptions> options = AllocationOptionsFrom(a);
  if (!options.ok()) return Fail(options.status());
  Result<std::vector<sim::TraceJob>> trace = LoadTrace(a);
  if (!trace.ok()) return Fail(trace.status());
  Result<std::vector<sim::NodeSpec>> nodes = LoadNodes(a);
  if (!nodes.ok()) return Fail(nodes.status());
  sim::AllocationReport report = sim::RunAllocation(*trace, *nodes, *options);
  Print(sim::AllocationJson(report, *options), a.json);
  return 0;
}

}  // namespace

Action SetupSimReplay(CLI::App& cmd) {
  auto a = std::make_shared<SimArgs>();
  AddInputs(cmd, *a);
  cmd.add_option("--policy", a->policy, "trainq, fifo or naive (default trainq)");
  cmd.add_option("--aging", a->aging, "trainq: wait before GPUs are held for a job (default 2h)");
  cmd.add_option(
      "--max-holds", a->max_holds,
      "trainq: aged jobs that cannot start yet with GPUs held at once (default 1; 0: all)");
  cmd.add_option("--half-life", a->half_life, "trainq: fair-share usage half-life (default 7d)");
  return [a](Invocation&) { return RunReplay(*a); };
}

Action SetupSimPlacement(CLI::App& cmd) {
  auto a = std::make_shared<SimArgs>();
  AddInputs(cmd, *a);
  cmd.add_option("--policy", a->policy, "trainq, bestfit or random (default trainq)");
  cmd.add_option("--inflate", a->inflate,
                 "arrivals as a factor of the cluster's GPUs (default 1.3)");
  cmd.add_option("--seeds", a->seeds, "seeds: 42, 42-51 or 1,5,9 (default 42-51)");
  return [a](Invocation&) { return RunPlacement(*a); };
}

}  // namespace trainq
