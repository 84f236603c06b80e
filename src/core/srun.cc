#include "src/core/srun.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "src/core/hostlist.h"
#include "src/core/words.h"

namespace trainq {

namespace {

std::optional<int> Positive(std::string_view text) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 1 ||
      n > 1'000'000) {
    return std::nullopt;
  }
  return n;
}

enum class Kind { kCount, kText, kNodes, kFlag, kWarn, kWarnFlag };

struct Row {
  std::string_view name;
  char letter;
  Kind kind;
  std::string_view why;  // kWarn/kWarnFlag: why it is not honoured
};

constexpr Row kRows[] = {
    {"ntasks", 'n', Kind::kCount, ""},
    {"nodes", 'N', Kind::kCount, ""},
    {"ntasks-per-node", 0, Kind::kCount, ""},
    {"cpus-per-task", 'c', Kind::kCount, ""},
    {"gpus-per-task", 0, Kind::kCount, ""},
    {"nodelist", 'w', Kind::kNodes, ""},
    {"exclude", 'x', Kind::kNodes, ""},
    {"chdir", 'D', Kind::kText, ""},
    {"job-name", 'J', Kind::kText, ""},
    {"label", 'l', Kind::kFlag, ""},
    {"kill-on-bad-exit", 'K', Kind::kFlag, ""},
    {"quiet", 'Q', Kind::kFlag, ""},
    // Honoured as they are: tasks' output is never buffered by srun, and steps share the job.
    {"unbuffered", 'u', Kind::kFlag, ""},
    {"overlap", 0, Kind::kFlag, ""},
    {"export", 0, Kind::kWarn, "tasks get srun's whole environment, as --export=ALL"},
    {"mpi", 0, Kind::kWarn, "trainq starts no MPI; tasks get SLURM_PROCID and the like"},
    {"cpu-bind", 0, Kind::kWarn, "tasks are not bound to CPUs"},
    {"gpu-bind", 0, Kind::kWarn, "only --gpus-per-task splits a node's GPUs among its tasks"},
    {"mem", 0, Kind::kWarn, "host memory is not reserved per step"},
    {"mem-per-cpu", 0, Kind::kWarn, "host memory is not reserved per step"},
    {"mem-per-gpu", 0, Kind::kWarn, "a step uses the job's GPUs, with their memory"},
    {"time", 't', Kind::kWarn, "the job's time limit bounds its steps"},
    {"partition", 'p', Kind::kWarn, "trainq has no partitions"},
    {"account", 'A', Kind::kWarn, "trainq keeps no accounts"},
    {"output", 'o', Kind::kWarn, "tasks write to srun's output"},
    {"error", 'e', Kind::kWarn, "tasks write to srun's error output"},
    {"input", 'i', Kind::kWarn, "tasks read no input"},
    {"distribution", 'm', Kind::kWarn, "tasks are placed in blocks, node 0 first"},
    {"gres", 0, Kind::kWarn, "a step uses the job's GPUs; --gpus-per-task splits them"},
    {"gpus", 'G', Kind::kWarn, "a step uses the job's GPUs; --gpus-per-task splits them"},
    {"gpus-per-node", 0, Kind::kWarn, "a step uses the job's GPUs; --gpus-per-task splits them"},
    {"constraint", 'C', Kind::kWarn, "a step runs on the job's nodes"},
    {"cpus-per-gpu", 0, Kind::kWarn, "use --cpus-per-task"},
    {"ntasks-per-gpu", 0, Kind::kWarn, "use --gpus-per-task"},
    {"hint", 0, Kind::kWarn, "tasks are not bound to CPUs"},
    {"threads-per-core", 0, Kind::kWarn, "tasks are not bound to CPUs"},
    {"signal", 0, Kind::kWarn, "the job's time limit sends SIGTERM, then SIGKILL"},
    {"wait", 'W', Kind::kWarn, "srun waits for every task"},
    {"network", 0, Kind::kWarn, "trainq sets up no network"},
    {"propagate", 0, Kind::kWarn, "tasks get the job's limits"},
    {"exclusive", 0, Kind::kWarnFlag, "steps share the job's CPUs and GPUs"},
    {"exact", 0, Kind::kWarnFlag, "steps share the job's CPUs and GPUs"},
    {"pty", 0, Kind::kWarnFlag, "tasks get no terminal"},
    {"verbose", 'v', Kind::kWarnFlag, "srun says only what goes wrong"},
};

const Row* FindRow(std::string_view name, char letter) {
  for (const Row& r : kRows) {
    if ((!name.empty() && r.name == name) || (letter != 0 && r.letter == letter)) return &r;
  }
  return nullptr;
}

Status BadValue(std::string_view shown, std::string_view value, std::string_view form) {
  return Status::Invalid(
      fmt::format("srun: {} '{}' cannot be read; expected {}", shown, TerminalSafe(value), form));
}

Status Apply(const Row& row, std::string_view shown, const std::string& value, SrunOptions& o) {
  if (row.kind == Kind::kCount) {
    std::optional<int> n = Positive(value);
    if (!n) return BadValue(shown, value, "a positive whole number, e.g. 2");
    std::optional<int>* into = row.name == "ntasks"            ? &o.ntasks
                               : row.name == "nodes"           ? &o.nodes
                               : row.name == "ntasks-per-node" ? &o.ntasks_per_node
                               : row.name == "cpus-per-task"   ? &o.cpus_per_task
                                                               : &o.gpus_per_task;
    *into = n;
  } else if (row.kind == Kind::kNodes) {
    Result<std::vector<std::string>> names = ExpandHostlist(value);
    if (!names.ok() || names->empty()) {
      return BadValue(shown, value, "a node list, e.g. node[1-2],gpu7");
    }
    (row.name == "nodelist" ? o.nodelist : o.exclude) = std::move(*names);
  } else if (row.name == "chdir") {
    o.chdir = value;
  } else if (row.name == "job-name") {
    o.job_name = value;
  } else if (row.kind == Kind::kWarn) {
    if (row.name == "export" && value == "ALL") return Status::Ok();
    o.warnings.push_back(
        fmt::format("{}={} is not honoured: {}; ignored", shown, TerminalSafe(value), row.why));
  }
  return Status::Ok();
}

Status ApplyFlag(const Row& row, std::string_view shown, const std::optional<std::string>& value,
                 SrunOptions& o) {
  if (row.name == "kill-on-bad-exit") {
    if (value && *value != "0" && *value != "1") return BadValue(shown, *value, "0 or 1");
    o.kill_on_bad_exit = !value || *value == "1";
  } else if (value) {
    return Status::Invalid(fmt::format("srun: {} takes no value", shown));
  } else if (row.name == "label") {
    o.label = true;
  } else if (row.name == "quiet") {
    o.quiet = true;
  } else if (row.kind == Kind::kWarnFlag) {
    o.warnings.push_back(fmt::format("{} is not honoured: {}; ignored", shown, row.why));
  }
  return Status::Ok();
}

bool TakesValue(const Row& r) {
  return r.kind == Kind::kCount || r.kind == Kind::kText || r.kind == Kind::kNodes ||
         r.kind == Kind::kWarn;
}

// "2(x3),1" -> {2,2,2,1}.
std::optional<std::vector<int>> ExpandCounts(std::string_view text) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t paren = item.find("(x");
    std::optional<int> count = Positive(item.substr(0, paren));
    std::optional<int> times = 1;
    if (paren != std::string_view::npos) {
      if (!item.ends_with(")")) return std::nullopt;
      times = Positive(item.substr(paren + 2, item.size() - paren - 3));
    }
    if (!count || !times || out.size() + *times > kMaxHostlistNames) return std::nullopt;
    out.insert(out.end(), *times, *count);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

Result<SrunOptions> ParseSrun(const std::vector<std::string>& args) {
  SrunOptions o;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      ++i;
      break;
    }
    if (word.size() < 2 || word[0] != '-') break;
    std::string name;
    char letter = 0;
    std::optional<std::string> value;
    if (word.starts_with("--")) {
      size_t eq = word.find('=');
      name = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) value = word.substr(eq + 1);
    } else {
      letter = word[1];
      if (word.size() > 2) value = word.substr(2);
    }
    std::string shown = letter != 0 ? std::string("-") + letter : "--" + name;
    // pyxis's step options: trainq runs a whole job in one container, as pyxis 0.12 runs a
    // containerised batch script; a step in an image of its own would be a pretend success.
    if (name.starts_with("container-") || name == "no-container-mount-home") {
      return Status::Invalid(fmt::format(
          "srun: {}: trainq runs a whole job in one container (#SBATCH --container-image, or "
          "trainq submit --image; docs/containers.md), not a step in an image of its own",
          TerminalSafe(shown)));
    }
    const Row* row = FindRow(name, letter);
    if (row == nullptr) {
      return Status::Invalid(
          fmt::format("srun: {} is not an srun option trainq knows (docs/workflow.md lists them)",
                      TerminalSafe(shown)));
    }
    if (!TakesValue(*row)) {
      // A short flag may be followed by more flags ("-lK"); only -K's value is attached.
      if (letter != 0 && value && row->name != "kill-on-bad-exit") {
        std::vector<std::string> split = {std::string("-") + letter};
        for (char c : *value) split.push_back(std::string("-") + c);
        for (const std::string& flag : split) {
          const Row* r = FindRow("", flag[1]);
          if (r == nullptr || TakesValue(*r)) {
            return Status::Invalid(
                fmt::format("srun: {} is not an srun flag trainq knows", TerminalSafe(flag)));
          }
          TRAINQ_RETURN_IF_ERROR(ApplyFlag(*r, flag, std::nullopt, o));
        }
        continue;
      }
      TRAINQ_RETURN_IF_ERROR(ApplyFlag(*row, shown, value, o));
      continue;
    }
    if (!value) {
      if (i + 1 == args.size())
        return Status::Invalid(fmt::format("srun: {} needs a value", shown));
      value = args[++i];
    }
    TRAINQ_RETURN_IF_ERROR(Apply(*row, shown, *value, o));
  }
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (o.command.empty()) {
    return Status::Invalid("srun: no command to run; usage: srun [OPTIONS] COMMAND [ARGS...]");
  }
  return o;
}

Result<SlurmAllocation> AllocationFromEnv(const EnvMap& env) {
  auto get = [&env](const char* key) -> const std::string* {
    auto it = env.find(key);
    return it == env.end() || it->second.empty() ? nullptr : &it->second;
  };
  auto missing = [](std::string_view key) {
    return Status::Invalid(fmt::format(
        "srun: {} is not set: srun runs inside a job `trainq sbatch` started (use trainq submit "
        "or trainq run elsewhere)",
        key));
  };
  SlurmAllocation a;
  const std::string* id = get("SLURM_JOB_ID");
  if (id == nullptr) return missing("SLURM_JOB_ID");
  a.job_id = *id;
  const std::string* list = get("SLURM_JOB_NODELIST");
  if (list == nullptr) return missing("SLURM_JOB_NODELIST");
  Result<std::vector<std::string>> nodes = ExpandHostlist(*list);
  if (!nodes.ok() || nodes->empty()) {
    return Status::Invalid(
        fmt::format("srun: SLURM_JOB_NODELIST '{}' cannot be read", TerminalSafe(*list)));
  }
  a.nodes = std::move(*nodes);
  a.capacity.assign(a.nodes.size(), 1);
  if (const std::string* per = get("SLURM_TASKS_PER_NODE")) {
    std::optional<std::vector<int>> counts = ExpandCounts(*per);
    if (!counts || counts->size() != a.nodes.size()) {
      return Status::Invalid(fmt::format(
          "srun: SLURM_TASKS_PER_NODE '{}' does not give a count for each of the {} nodes",
          TerminalSafe(*per), a.nodes.size()));
    }
    a.capacity = std::move(*counts);
  }
  auto number = [&](const char* key, std::optional<int>& into) -> Status {
    const std::string* text = get(key);
    if (text == nullptr) return Status::Ok();
    into = Positive(*text);
    if (!into) {
      return Status::Invalid(
          fmt::format("srun: {} '{}' is not a positive number", key, TerminalSafe(*text)));
    }
    return Status::Ok();
  };
  std::optional<int> node_id;
  if (const std::string* text = get("SLURM_NODEID"); text != nullptr && *text != "0") {
    TRAINQ_RETURN_IF_ERROR(number("SLURM_NODEID", node_id));
  }
  a.node_id = node_id.value_or(0);
  TRAINQ_RETURN_IF_ERROR(number("SLURM_NTASKS", a.ntasks));
  TRAINQ_RETURN_IF_ERROR(number("SLURM_GPUS_PER_TASK", a.gpus_per_task));
  TRAINQ_RETURN_IF_ERROR(number("SLURM_CPUS_PER_TASK", a.cpus_per_task));
  return a;
}

Result<StepLayout> LayOutStep(const SrunOptions& o, const SlurmAllocation& a) {
  // The nodes the step may use, in allocation order.
  std::vector<size_t> usable;
  for (const std::string& name : o.nodelist) {
    if (std::find(a.nodes.begin(), a.nodes.end(), name) == a.nodes.end()) {
      return Status::Invalid(fmt::format(
          "srun: error: Unable to create step for job {}: Requested node configuration is not "
          "available (node {} is not in the job's allocation {})",
          a.job_id, TerminalSafe(name), CompressHostlist(a.nodes)));
    }
  }
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    bool listed = o.nodelist.empty() ||
                  std::find(o.nodelist.begin(), o.nodelist.end(), a.nodes[i]) != o.nodelist.end();
    bool excluded = std::find(o.exclude.begin(), o.exclude.end(), a.nodes[i]) != o.exclude.end();
    if (listed && !excluded) usable.push_back(i);
  }
  int want_nodes = o.nodes.value_or(0);
  if (!o.nodelist.empty() && want_nodes == 0) want_nodes = static_cast<int>(usable.size());
  StepLayout l;
  l.tasks.assign(a.nodes.size(), 0);
  l.first.assign(a.nodes.size(), 0);
  // srun's -n defaults to the job's SLURM_NTASKS, as Slurm's does.
  int ntasks = 0;
  if (o.ntasks) {
    ntasks = *o.ntasks;
  } else if (o.ntasks_per_node) {
    ntasks = *o.ntasks_per_node * (want_nodes > 0 ? want_nodes : static_cast<int>(usable.size()));
  } else if (a.ntasks) {
    ntasks = *a.ntasks;
  } else {
    ntasks = want_nodes > 0 ? want_nodes : static_cast<int>(usable.size());
  }
  if (want_nodes > ntasks) {
    l.warnings.push_back(fmt::format("can't run {} processes on {} nodes, setting nnodes to {}",
                                     ntasks, want_nodes, ntasks));
    want_nodes = ntasks;
  }
  if (want_nodes > static_cast<int>(usable.size()) || usable.empty()) {
    return Status::Invalid(fmt::format("srun: error: Only allocated {} nodes asked for {}",
                                       usable.size(), std::max(want_nodes, 1)));
  }
  if (want_nodes > 0 || o.ntasks_per_node) {
    // Spread over the first N usable nodes, evenly; the first ones take the extras.
    size_t n = want_nodes > 0
                   ? static_cast<size_t>(want_nodes)
                   : std::min(usable.size(), static_cast<size_t>((ntasks + *o.ntasks_per_node - 1) /
                                                                 *o.ntasks_per_node));
    for (size_t k = 0; k < n; ++k) {
      l.tasks[usable[k]] = ntasks / static_cast<int>(n) +
                           (static_cast<int>(k) < ntasks % static_cast<int>(n) ? 1 : 0);
    }
  } else {
    // Block: fill each node up to what the allocation gives it, node 0 first.
    int left = ntasks;
    for (size_t i : usable) {
      int take = std::min(left, a.capacity[i]);
      l.tasks[i] = take;
      left -= take;
    }
    if (left > 0) {
      int room = ntasks - left;
      return Status::Invalid(fmt::format(
          "srun: error: Unable to create step for job {}: More processors requested than "
          "permitted ({} tasks asked; the job's allocation runs {}: --ntasks or "
          "--ntasks-per-node in the batch script set that)",
          a.job_id, ntasks, room));
    }
  }
  int rank = 0;
  for (size_t i = 0; i < l.tasks.size(); ++i) {
    l.first[i] = rank;
    rank += l.tasks[i];
    if (l.tasks[i] > 0) l.step_nodes.push_back(a.nodes[i]);
  }
  l.ntasks = ntasks;
  l.gpus_per_task = o.gpus_per_task.value_or(a.gpus_per_task.value_or(0));
  l.cpus_per_task = o.cpus_per_task ? o.cpus_per_task : a.cpus_per_task;
  return l;
}

bool NodeSpecificVar(std::string_view name) {
  static constexpr std::string_view kNames[] = {"CUDA_VISIBLE_DEVICES",
                                                "GPU_DEVICE_ORDINAL",
                                                "ROCR_VISIBLE_DEVICES",
                                                "ZE_AFFINITY_MASK",
                                                "SLURM_NODEID",
                                                "SLURMD_NODENAME",
                                                "SLURM_TOPOLOGY_ADDR",
                                                "SLURM_JOB_GPUS",
                                                "SLURM_GPUS_ON_NODE",
                                                "SLURM_CPUS_ON_NODE",
                                                "HOSTNAME",
                                                "NODE_RANK",
                                                "PET_NODE_RANK",
                                                "PET_NPROC_PER_NODE",
                                                "TRAINQ_SERVER",
                                                "TMPDIR"};
  if (std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames)) return true;
  // The attempt's per-node names: TRAINQ_NODE_RANK, TRAINQ_GPUS, TRAINQ_RUN_DIR, ...
  return name.starts_with("TRAINQ_") && name != "TRAINQ_JOB_ID" && name != "TRAINQ_ATTEMPT";
}

EnvMap TaskEnv(const EnvMap& base, const StepLayout& l, const SlurmAllocation& a, int node,
               int local, int step, const std::vector<std::string>& node_gpus) {
  EnvMap env = base;
  int rank = l.first[node] + local;
  std::vector<int> counts;
  for (int t : l.tasks) {
    if (t > 0) counts.push_back(t);
  }
  std::vector<int> here;
  for (int t = 0; t < l.tasks[node]; ++t) here.push_back(l.first[node] + t);
  std::string step_text = std::to_string(step);
  env["SLURM_STEP_ID"] = env["SLURM_STEPID"] = step_text;
  env["SLURM_PROCID"] = std::to_string(rank);
  env["SLURM_LOCALID"] = std::to_string(local);
  env["SLURM_NODEID"] = std::to_string(node);
  env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = env["SLURM_STEP_NUM_TASKS"] =
      std::to_string(l.ntasks);
  env["SLURM_NNODES"] = env["SLURM_STEP_NUM_NODES"] = std::to_string(l.step_nodes.size());
  env["SLURM_NODELIST"] = env["SLURM_STEP_NODELIST"] = CompressHostlist(l.step_nodes);
  env["SLURM_TASKS_PER_NODE"] = env["SLURM_STEP_TASKS_PER_NODE"] = CompressCounts(counts);
  env["SLURM_GTIDS"] = fmt::format("{}", fmt::join(here, ","));
  env["SLURMD_NODENAME"] = a.nodes[node];
  env["SLURM_TOPOLOGY_ADDR"] = a.nodes[node];
  // What Slurm 22.05 reports for its default: cyclic while every node runs one task.
  env["SLURM_DISTRIBUTION"] =
      static_cast<size_t>(l.ntasks) == l.step_nodes.size() ? "cyclic" : "block";
  // srun's node: the first, whose address a gang's parts have as MASTER_ADDR.
  auto master = base.find("MASTER_ADDR");
  std::string launch = master != base.end() ? master->second : "127.0.0.1";
  env["SLURM_LAUNCH_NODE_IPADDR"] = env["SLURM_SRUN_COMM_HOST"] = launch;
  if (l.cpus_per_task) env["SLURM_CPUS_PER_TASK"] = std::to_string(*l.cpus_per_task);
  std::vector<std::string> mine = node_gpus;
  if (auto cpus = base.find("SLURM_JOB_CPUS_PER_NODE"); cpus != base.end()) {
    env["SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0"] = cpus->second;
  }
  if (l.gpus_per_task > 0) env["SLURM_GPUS_PER_TASK"] = std::to_string(l.gpus_per_task);
  // Slurm binds a task to its share of the node's GPUs where the node runs several tasks.
  if (l.gpus_per_task > 0 && l.tasks[node] > 1) {
    env["SLURMD_TRES_BIND"] = fmt::format("gpu:per_task:{}", l.gpus_per_task);
    mine.clear();
    for (int g = 0; g < l.gpus_per_task; ++g) {
      size_t at = static_cast<size_t>(local * l.gpus_per_task + g);
      if (at < node_gpus.size()) mine.push_back(node_gpus[at]);
    }
    std::string list = fmt::format("{}", fmt::join(mine, ","));
    for (const char* key : {"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES",
                            "ZE_AFFINITY_MASK"}) {
      env[key] = list;
    }
  }
  if (!mine.empty()) env["SLURM_STEP_GPUS"] = fmt::format("{}", fmt::join(mine, ","));
  return env;
}

}  // namespace trainq
