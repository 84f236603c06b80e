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
#include "src/sim/window.h"

namespace trainq {

namespace {

void AddInputs(CLI::App& cmd, SimArgs& a) {
  cmd.add_option("--trace", a.trace,
                 "trace CSV: job_id,submit_s,duration_s,gpus,gpu_fraction,"
                 "gpu_mem_gib,user[,cpu_milli,memory_mib,submit_time]")
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

// A duration option left empty keeps `*ms` as it is.
Status ReadDuration(const std::string& text, const char* option, int64_t* ms) {
  if (text.empty()) return Status::Ok();
  Result<int64_t> v = ParseDurationMs(text, option);
  if (!v.ok()) return v.status();
  *ms = *v;
  return Status::Ok();
}

// Options that only one policy reads, given with another: named, not ignored.
Status CheckPolicyOptions(const SimArgs& a, sim::ReplayPolicy policy) {
  bool trainq = policy == sim::ReplayPolicy::kTrainq;
  bool tiresias = policy == sim::ReplayPolicy::kTiresias;
  std::vector<std::string> misplaced;
  if (!trainq && a.preempt) misplaced.push_back("--preempt");
  if (!a.preempt && a.preempt_fair_share) misplaced.push_back("--preempt-fair-share");
  if (!a.preempt && a.preempt_aging) misplaced.push_back("--preempt-aging");
  if (!a.preempt && a.preempt_priority_gap >= 0) misplaced.push_back("--preempt-priority-gap");
  bool elastic = a.elastic_fraction > 0;
  if (!trainq && a.elastic_fraction >= 0) misplaced.push_back("--elastic-fraction");
  if (!a.preempt && !elastic && !a.min_runtime.empty()) misplaced.push_back("--min-runtime");
  if (!a.preempt && !a.preempt_spare.empty()) misplaced.push_back("--preempt-spare");
  if (!a.preempt && a.preempt_attained_service) {
    misplaced.push_back("--preempt-attained-service");
  }
  if (!trainq && !a.attained_service.empty()) misplaced.push_back("--attained-service");
  bool stops = a.preempt || tiresias || elastic;
  if (!stops && !a.stop_time.empty()) misplaced.push_back("--stop-time");
  if (!stops && !a.ckpt_interval.empty()) misplaced.push_back("--ckpt-interval");
  if (!stops && !a.restart_cost.empty()) misplaced.push_back("--restart-cost");
  if (!tiresias && a.las_threshold != 0) misplaced.push_back("--las-threshold");
  if (!misplaced.empty()) {
    return Status::Invalid(fmt::format(
        "{}: not read by --policy {}{}; --preempt, --elastic-fraction and the preemption "
        "options need --policy trainq (--min-runtime: --preempt or --elastic-fraction), "
        "--las-threshold needs --policy tiresias, and --stop-time, --ckpt-interval and "
        "--restart-cost need one of them to stop jobs",
        fmt::join(misplaced, ", "), a.policy, trainq && !a.preempt ? " without --preempt" : ""));
  }
  if (!elastic && (a.seed >= 0 || a.scaling_exponent >= 0)) {
    return Status::Invalid(fmt::format(
        "{}: needs --elastic-fraction F (0 < F <= 1), the share of the trace's jobs made elastic",
        a.seed >= 0 ? "--seed" : "--scaling-exponent"));
  }
  if (a.preempt_attained_service && a.attained_service.empty()) {
    return Status::Invalid(
        "--preempt-attained-service: needs --attained-service DURATION, the GPU time past which "
        "a running job may be preempted by one that has had less");
  }
  if (a.preempt && !a.preempt_fair_share && !a.preempt_aging && !a.preempt_attained_service &&
      a.preempt_priority_gap != 0) {
    return Status::Invalid(
        "--preempt: no rule lets a job preempt another in a trace without priorities; add "
        "--preempt-fair-share, --preempt-aging or both (or --preempt-priority-gap 0: every job "
        "may preempt)");
  }
  return Status::Ok();
}

Status ReadPreemptOptions(const SimArgs& a, sim::ReplayOptions& o) {
  o.preempt = a.preempt;
  o.preempt_for_fair_share = a.preempt_fair_share;
  o.preempt_for_aging = a.preempt_aging;
  o.preempt_for_attained_service = a.preempt_attained_service;
  if (a.preempt_priority_gap >= 0) o.preempt_priority_gap = a.preempt_priority_gap;
  for (Status st :
       {ReadDuration(a.min_runtime, "--min-runtime", &o.min_runtime_ms),
        ReadDuration(a.preempt_spare, "--preempt-spare", &o.preempt_spare_ms),
        ReadDuration(a.attained_service, "--attained-service", &o.attained_service_ms),
        ReadDuration(a.stop_time, "--stop-time", &o.stop_ms),
        ReadDuration(a.ckpt_interval, "--ckpt-interval", &o.checkpoint.interval_ms),
        ReadDuration(a.restart_cost, "--restart-cost", &o.checkpoint.restart_cost_ms)}) {
    if (!st.ok()) return st;
  }
  if (a.elastic_fraction >= 0) {
    if (!(a.elastic_fraction > 0 && a.elastic_fraction <= 1)) {
      return Status::Invalid(fmt::format(
          "--elastic-fraction: {} is not valid; expected the share of the trace's jobs made "
          "elastic, a number > 0 and <= 1 (e.g. 0.5)",
          a.elastic_fraction));
    }
    o.elastic_fraction = a.elastic_fraction;
  }
  if (a.seed >= 0) o.elastic_seed = uint64_t(a.seed);
  if (a.scaling_exponent >= 0) {
    if (!(a.scaling_exponent > 0 && a.scaling_exponent <= 1)) {
      return Status::Invalid(fmt::format(
          "--scaling-exponent: {} is not valid; expected A in throughput = (GPUs / requested) "
          "^ A, a number > 0 and <= 1 (e.g. 0.8)",
          a.scaling_exponent));
    }
    o.scaling_exponent = a.scaling_exponent;
  }
  if (a.las_threshold != 0) {
    if (!(a.las_threshold > 0 && a.las_threshold <= 1e12)) {
      return Status::Invalid(
          fmt::format("--las-threshold: {} is not valid; expected GPU-seconds of attained "
                      "service, a number > 0 (e.g. 3250)",
                      a.las_threshold));
    }
    o.las_threshold_gpu_s = a.las_threshold;
  }
  return Status::Ok();
}

Result<sim::ReplayOptions> ReplayOptionsFrom(const SimArgs& a) {
  sim::ReplayOptions o;
  std::optional<sim::ReplayPolicy> policy = sim::ParseReplayPolicy(a.policy);
  if (!policy) {
    return Status::Invalid(
        fmt::format("--policy: '{}' is not a replay policy; expected trainq, "
                    "fifo, naive or tiresias",
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
  if (Status st = CheckPolicyOptions(a, o.policy); !st.ok()) return st;
  if (Status st = ReadPreemptOptions(a, o); !st.ok()) return st;
  return o;
}

int RunReplay(const SimArgs& a) {
  Result<sim::ReplayOptions> options = ReplayOptionsFrom(a);
  if (!options.ok()) return Fail(options.status());
  Result<std::vector<sim::TraceJob>> trace = LoadTrace(a);
  if (!trace.ok()) return Fail(trace.status());
  if (!a.window.empty()) {
    Result<sim::TraceWindow> window = sim::ParseWindow(a.window, *trace);
    if (!window.ok()) return Fail(window.status());
    if (Status st = ReadDuration(a.warmup, "--warmup", &window->warmup_ms); !st.ok())
      return Fail(st);
    *trace = sim::SelectWindow(*trace, *window);
    options->window = *window;
    if (window->warmup_ms > 0) options->measure_from_ms = window->warmup_ms;
  } else if (!a.warmup.empty()) {
    return Fail(Status::Invalid(
        "--warmup: needs --window: it replays the rows submitted that long before the window's "
        "START"));
  }
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

void AddPreemptOptions(CLI::App& cmd, SimArgs& a) {
  cmd.add_flag("--preempt", a.preempt,
               "trainq: waiting jobs may preempt running ones (every job preemptible), by the "
               "rules below");
  cmd.add_flag("--preempt-fair-share", a.preempt_fair_share,
               "trainq --preempt: a job of a user below their fair share may preempt jobs of "
               "users above theirs (preempt_for_fair_share)");
  cmd.add_flag("--preempt-aging", a.preempt_aging,
               "trainq --preempt: a large job waiting past --aging may preempt other users' jobs "
               "(preempt_for_aging)");
  cmd.add_option("--preempt-priority-gap", a.preempt_priority_gap,
                 "trainq --preempt: the priority lead that lets a job preempt, as the daemon's "
                 "preempt_priority_gap (default 1, which never fires: every job has priority 0; "
                 "0: every job may preempt)")
      ->check(CLI::Range(0, 100000));
  cmd.add_flag("--preempt-attained-service", a.preempt_attained_service,
               "trainq --preempt: a job that has had less GPU time than --attained-service may "
               "preempt one past it (preempt_for_attained_service)");
  cmd.add_option("--attained-service", a.attained_service,
                 "trainq: jobs that have had less GPU time than this go first at equal priority "
                 "(attained_service; e.g. 1h: one GPU-hour; default: off)");
  cmd.add_option("--min-runtime", a.min_runtime,
                 "trainq --preempt: an attempt that ran less is not preempted (default 10m); "
                 "with --elastic-fraction, nor resized");
  cmd.add_option("--preempt-spare", a.preempt_spare,
                 "trainq --preempt: a job preempted twice in a row is spared this long "
                 "(default 1h)");
  cmd.add_option("--stop-time", a.stop_time,
                 "preempting policies: from the decision until the victim's GPUs are free "
                 "(default 70s: --signal lead 60s + grace_period 10s)");
  cmd.add_option("--ckpt-interval", a.ckpt_interval,
                 "preempting policies: a job saves its progress this often; a victim loses the "
                 "work since (default 30m; 0s: never)");
  cmd.add_option("--restart-cost", a.restart_cost,
                 "preempting policies: what a preempted job spends restoring its checkpoint "
                 "when it runs again (default 60s)");
  cmd.add_option("--elastic-fraction", a.elastic_fraction,
                 "trainq: make this share of the whole-GPU single-node jobs elastic, from 1 GPU "
                 "to twice their request (e.g. 0.5; default: none)");
  cmd.add_option("--seed", a.seed, "with --elastic-fraction: which jobs are drawn (default 1)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  cmd.add_option("--scaling-exponent", a.scaling_exponent,
                 "with --elastic-fraction: a job on g GPUs runs (g / requested) ^ A as fast as "
                 "on its request (default 0.8)");
  cmd.add_option("--las-threshold", a.las_threshold,
                 "tiresias: GPU-seconds of attained service that move a job to the second "
                 "queue (default 3250)");
}

}  // namespace

Action SetupSimReplay(CLI::App& cmd) {
  auto a = std::make_shared<SimArgs>();
  AddInputs(cmd, *a);
  cmd.add_option("--policy", a->policy, "trainq, fifo, naive or tiresias (default trainq)");
  cmd.add_option("--window", a->window,
                 "replay only the rows submitted in START..END: seconds on the trace's clock, "
                 "or dates with the submit_time column (2017-11-01..2017-11-08)");
  cmd.add_option("--warmup", a->warmup,
                 "with --window: also replay the rows submitted this long before START (e.g. 7d), "
                 "so the cluster is not empty at START; only the window's rows are measured");
  cmd.add_option("--aging", a->aging, "trainq: wait before GPUs are held for a job (default 2h)");
  cmd.add_option(
      "--max-holds", a->max_holds,
      "trainq: aged jobs that cannot start yet with GPUs held at once (default 1; 0: all)");
  cmd.add_option("--half-life", a->half_life, "trainq: fair-share usage half-life (default 7d)");
  AddPreemptOptions(cmd, *a);
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
