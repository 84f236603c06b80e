#include "src/core/spec.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "src/core/container.h"
#include "src/core/duration.h"
#include "src/core/endpoint.h"
#include "src/core/gpu_select.h"
#include "src/core/hostlist.h"
#include "src/core/stop_spec.h"
#include "src/core/transfers.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

bool IsControl(char c) {
  auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

std::string Plural(int n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

void CheckCommand(const JobSpec& spec, std::vector<FieldError>& out) {
  if (spec.command.empty()) {
    out.push_back({"command", "give the command after --, e.g. trainq submit -- python train.py"});
    return;
  }
  if (spec.command.front().empty()) out.push_back({"command", "the program name is empty"});
  for (size_t i = 0; i < spec.command.size(); ++i) {
    // execve takes NUL-terminated strings: such an argument cannot be passed intact.
    if (HasNul(spec.command[i])) {
      out.push_back({"command", fmt::format("argument {} contains a NUL byte", i)});
    }
  }
}

// An elastic job: MIN:MAX GPUs of one node, resized by restarts (docs/workflow.md).
void CheckElastic(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  if (spec.max_gpus == 0) return;
  std::string range = fmt::format("{}:{}", spec.gpus, spec.max_gpus);
  if (spec.gpus < 1 || spec.max_gpus <= spec.gpus) {
    out.push_back({"--gpus", fmt::format("{} is not an elastic range; expected MIN:MAX with "
                                         "1 <= MIN < MAX, e.g. 1:4",
                                         range)});
  } else if (limits.max_gpus_per_node > 0 && spec.max_gpus > limits.max_gpus_per_node) {
    out.push_back({"--gpus", fmt::format("{}: an elastic job grows on one node, and the largest "
                                         "has {}; use at most {}:{}",
                                         range, Plural(limits.max_gpus_per_node, "GPU"), spec.gpus,
                                         limits.max_gpus_per_node)});
  }
  if (spec.num_nodes > 1 || spec.max_nodes > 0) {
    out.push_back({"--gpus", fmt::format("{} with --nodes {}: an elastic job grows in GPUs on one "
                                         "node or in nodes (--nodes MIN:MAX with a fixed --gpus), "
                                         "not both",
                                         range, spec.num_nodes)});
  }
  if (spec.interactive) {
    out.push_back({"--gpus", fmt::format("{}: a session cannot be resized (a resize restarts "
                                         "the program); give a fixed --gpus",
                                         range)});
  }
  if (spec.gate_pid != 0) {
    out.push_back({"--gpus", fmt::format("{}: a gate holds a fixed set of GPUs", range)});
  }
}

// An elastic gang: MIN:MAX nodes of `gpus` GPUs each, grown by parts that join its torchrun
// rendezvous (docs/workflow.md, "Elastic gangs").
void CheckElasticGang(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  if (spec.max_nodes == 0) return;
  std::string range = fmt::format("{}:{}", spec.num_nodes, spec.max_nodes);
  if (spec.num_nodes < 1 || spec.max_nodes <= spec.num_nodes || spec.max_nodes > kMaxNumNodes) {
    out.push_back({"--nodes", fmt::format("{} is not an elastic range; expected MIN:MAX with "
                                          "1 <= MIN < MAX <= {}, e.g. 1:4",
                                          range, kMaxNumNodes)});
  } else if (spec.gpus < 1) {
    out.push_back({"--nodes", fmt::format("{}: an elastic gang needs GPUs on each node: give "
                                          "--gpus 1 or more",
                                          range)});
  } else if (spec.max_nodes > limits.max_nodes && !spec.slurm_env) {
    // (A batch script's range is Slurm's: it takes the nodes there are, MIN at least.)
    out.push_back(
        {"--nodes", limits.max_nodes <= 1
                        ? fmt::format("{}: an elastic gang grows over nodes, and this is one "
                                      "machine (docs/cluster.md); use --gpus MIN:MAX to grow on "
                                      "one node",
                                      range)
                        : fmt::format("{}: the cluster has {} nodes; use at most {}:{}", range,
                                      limits.max_nodes, spec.num_nodes, limits.max_nodes)});
  }
  if (spec.interactive) {
    out.push_back({"--nodes", fmt::format("{}: a session runs on one node", range)});
  }
  if (spec.gate_pid != 0) {
    out.push_back({"--nodes", fmt::format("{}: a gate holds a fixed set of GPUs", range)});
  }
}

void CheckGpus(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  CheckElastic(spec, limits, out);
  if (spec.gpus < 0) {
    out.push_back({"--gpus", fmt::format("must be 0 (a CPU job) or more, got {}", spec.gpus)});
  } else if (spec.gpus > 0 && limits.max_gpus_per_node <= 0) {
    out.push_back({"--gpus", "this machine has no GPUs; use --gpus 0 to run on CPU"});
  } else if (spec.gpus > limits.max_gpus_per_node) {
    out.push_back({"--gpus", fmt::format("asks for {} but the largest node has {}; use --gpus {} "
                                         "or fewer",
                                         Plural(spec.gpus, "GPU"), limits.max_gpus_per_node,
                                         limits.max_gpus_per_node)});
  }
}

void CheckMem(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  if (!spec.mem_bytes && !spec.mem_percent) return;
  const uint64_t largest = limits.largest_gpu_bytes;
  const uint64_t room = largest > limits.headroom_bytes ? largest - limits.headroom_bytes : 0;
  if (spec.mem_bytes && largest > 0 && *spec.mem_bytes > largest) {
    out.push_back({"--mem", fmt::format("{} is more than any GPU here has (the largest has {}); "
                                        "ask for at most that, or a percentage like --mem 90%",
                                        FormatBytes(*spec.mem_bytes), FormatBytes(largest))});
  } else if (spec.mem_bytes && largest > 0 && *spec.mem_bytes > room) {
    // Accepted, it would wait forever: the placement keeps the headroom free on every GPU.
    out.push_back({"--mem", fmt::format("{} can never fit: the largest GPU here has {} and {} of "
                                        "it is kept free (config headroom), so at most {}; for a "
                                        "whole GPU leave --mem out",
                                        FormatBytes(*spec.mem_bytes), FormatBytes(largest),
                                        FormatBytes(limits.headroom_bytes), FormatBytes(room))});
  }
  if (spec.mem_percent && largest > 0 && limits.headroom_bytes > 0 && *spec.mem_percent > 0 &&
      *spec.mem_percent <= 100.0) {
    double total = static_cast<double>(largest);
    double needed = std::min(total, std::ceil(total * *spec.mem_percent / 100.0));
    if (needed > static_cast<double>(room)) {
      double most = std::floor(static_cast<double>(room) * 1000.0 / total) / 10.0;
      out.push_back({"--mem", fmt::format("{}% can never fit: {} of every GPU is kept free "
                                          "(config headroom), so at most {}% of the largest ({}); "
                                          "for a whole GPU leave --mem out",
                                          *spec.mem_percent, FormatBytes(limits.headroom_bytes),
                                          most, FormatBytes(largest))});
    }
  }
  if (spec.gpus == 0) {
    out.push_back({"--mem", "is GPU memory and needs GPUs; drop --mem for a CPU job (--gpus 0)"});
  }
  if (spec.mem_bytes && spec.mem_percent) {
    out.push_back({"--mem", "give a size or a percentage, not both"});
  }
  if (spec.mem_bytes && *spec.mem_bytes == 0) {
    out.push_back({"--mem", "must be more than zero, e.g. --mem 20GiB"});
  }
  if (spec.mem_percent && !(*spec.mem_percent > 0.0 && *spec.mem_percent <= 100.0)) {
    out.push_back({"--mem", fmt::format("{}% is not a percentage above 0 and at most 100",
                                        *spec.mem_percent)});
  }
}

void CheckCounts(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  // A GPU job may hold no slot (its default); a CPU job needs one to be limited at all.
  int least = spec.gpus > 0 ? 0 : 1;
  if (spec.cpus < least || spec.cpus > limits.max_cpu_slots) {
    out.push_back({"--cpus", fmt::format("asks for {}; use {} to {}", Plural(spec.cpus, "CPU slot"),
                                         least, std::max(1, limits.max_cpu_slots))});
  }
  if (spec.retries < 0 || spec.retries > kMaxRetries) {
    out.push_back(
        {"--retries", fmt::format("{} is not between 0 and {}", spec.retries, kMaxRetries)});
  }
}

void CheckCwd(const JobSpec& spec, CwdKind cwd, std::vector<FieldError>& out) {
  if (spec.cwd.empty() || spec.cwd.front() != '/' || HasNul(spec.cwd)) {
    out.push_back({"--cwd", fmt::format("'{}' is not an absolute path", spec.cwd)});
  } else if (cwd == CwdKind::kMissing) {
    out.push_back({"--cwd", fmt::format("directory {} does not exist", spec.cwd)});
  } else if (cwd == CwdKind::kNotADirectory) {
    out.push_back({"--cwd", fmt::format("{} is not a directory", spec.cwd)});
  }
}

// What execve would refuse (E2BIG) is refused here, at submit, rather than at the start.
void CheckExecSize(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  if (limits.arg_max == 0) return;
  size_t total = 0;
  for (size_t i = 0; i < spec.command.size(); ++i) {
    const std::string& a = spec.command[i];
    total += a.size() + 1 + sizeof(char*);
    if (a.size() + 1 > kMaxExecString) {
      out.push_back({"command", fmt::format("argument {} is {} bytes; one argument may have at "
                                            "most {}",
                                            i, a.size(), kMaxExecString - 1)});
    }
  }
  for (const auto& [key, value] : spec.env) {
    size_t size = key.size() + 1 + value.size() + 1;
    total += size + sizeof(char*);
    if (size > kMaxExecString) {
      out.push_back({"--env", fmt::format("{} is {} bytes with its value; one variable may have "
                                          "at most {}",
                                          key, size - 1, kMaxExecString - 1)});
    }
  }
  size_t room = limits.arg_max > kExecReserve ? limits.arg_max - kExecReserve : 0;
  if (total > room) {
    out.push_back({"command", fmt::format("the arguments and environment take {} bytes; "
                                          "programs here may be given at most {} (ARG_MAX less "
                                          "{} for trainq's variables)",
                                          total, room, kExecReserve)});
  }
}

void CheckName(const JobSpec& spec, std::vector<FieldError>& out) {
  if (spec.name.size() > kMaxJobNameBytes) {
    out.push_back({"--name", fmt::format("is {} bytes long; use at most {}", spec.name.size(),
                                         kMaxJobNameBytes)});
  }
  if (std::any_of(spec.name.begin(), spec.name.end(), IsControl)) {
    out.push_back({"--name", "contains control characters (newline, tab, ...)"});
  }
}

void CheckEnv(const JobSpec& spec, std::vector<FieldError>& out) {
  for (const auto& [key, value] : spec.env) {
    if (key.empty()) {
      out.push_back({"--env", "a variable has an empty name; use --env NAME=value"});
    } else if (key.find('=') != std::string::npos || HasNul(key)) {
      out.push_back(
          {"--env", fmt::format("'{}' is not a variable name (no '=' or NUL allowed)", key)});
    }
    if (HasNul(value)) out.push_back({"--env", fmt::format("the value of {} contains NUL", key)});
  }
}

void CheckDepIds(const std::vector<JobId>& ids, const char* field, std::vector<FieldError>& out) {
  for (JobId id : ids) {
    if (id <= 0) {
      out.push_back({field, fmt::format("{} is not a job id; use ids that 'trainq submit' printed, "
                                        "e.g. {} 12,13",
                                        id, field)});
      return;
    }
  }
}

void CheckDeps(const JobSpec& spec, std::vector<FieldError>& out) {
  CheckDepIds(spec.after, "--after", out);
  CheckDepIds(spec.after_any, "--after-any", out);
  if (spec.after.size() + spec.after_any.size() > kMaxDeps) {
    out.push_back({"--after", fmt::format("names {} jobs; at most {} dependencies are allowed",
                                          spec.after.size() + spec.after_any.size(), kMaxDeps)});
  }
  if (spec.time_limit_ms < 0) {
    out.push_back({"--time", "must be more than zero, e.g. --time 2h30m"});
  }
}

// A name as an error may show it: at most 80 bytes, anything but printable ASCII as '?'.
std::string Printable(std::string_view text) {
  std::string out(text.substr(0, 80));
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c < 0x20 || c > 0x7e; }, '?');
  return out;
}

void CheckNodeNames(const std::vector<std::string>& names, const char* field,
                    std::vector<FieldError>& out) {
  if (names.size() > kMaxNodeNames) {
    out.push_back({field, fmt::format("names {} nodes; at most {}", names.size(), kMaxNodeNames)});
    return;
  }
  for (const std::string& name : names) {
    if (ValidNodeName(name)) continue;
    out.push_back({field, fmt::format("'{}' is not a node name; use NAME[,NAME...] where a name "
                                      "is 1 to {} letters, digits, '.', '_' or '-'",
                                      Printable(name), kMaxNodeNameBytes)});
    return;
  }
}

// "4 NVIDIA T4, 2 NVIDIA L4": the GPUs the offers have, by model (and label).
std::string OfferedModels(const std::vector<NodeOffer>& offers) {
  GpuCensus census;
  for (const NodeOffer& node : offers) {
    for (const auto& [model, label] : node.gpus) census.Add(model, label);
  }
  return census.Text();
}

// --gpu-type and --constraint against what the nodes offer (SpecLimits::offers).
void CheckSelection(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  if (!spec.gpu_type.empty() && spec.gpus == 0) {
    out.push_back({"--gpu-type",
                   "a CPU job (--gpus 0) uses no GPU; ask for GPUs or leave "
                   "--gpu-type out"});
    return;
  }
  if (limits.offers.empty()) return;
  std::vector<const NodeOffer*> meeting;
  for (const NodeOffer& node : limits.offers) {
    if (MeetsConstraints(node.features, spec.constraints)) meeting.push_back(&node);
  }
  if (meeting.empty()) {
    std::vector<std::string> have;
    for (const NodeOffer& node : limits.offers) {
      have.push_back(fmt::format(
          "{}: {}", node.name,
          node.features.empty() ? "none" : fmt::format("{}", fmt::join(node.features, ","))));
    }
    out.push_back(
        {"--constraint", fmt::format("no node has {} (node features, config node_features: {})",
                                     fmt::join(spec.constraints, " and "), fmt::join(have, "; "))});
    return;
  }
  if (static_cast<int>(meeting.size()) < spec.num_nodes) {
    out.push_back({"--nodes", fmt::format("asks for {} nodes but only {} {} {}", spec.num_nodes,
                                          meeting.size(), meeting.size() == 1 ? "has" : "have",
                                          fmt::join(spec.constraints, " and "))});
    return;
  }
  if (spec.gpu_type.empty() || spec.gpus <= 0) return;
  int most = 0;
  int nodes_with_enough = 0;
  for (const NodeOffer* node : meeting) {
    int count = 0;
    for (const auto& [model, label] : node->gpus) {
      count += GpuTypeMatches(spec.gpu_type, model, label) ? 1 : 0;
    }
    most = std::max(most, count);
    nodes_with_enough += count >= spec.gpus ? 1 : 0;
  }
  std::string where = spec.constraints.empty() ? "" : " on a node with its --constraint";
  if (most == 0) {
    out.push_back(
        {"--gpu-type", fmt::format("no GPU{} is of type {} (a word of its model name, or of its "
                                   "node's gpu_type label); GPUs: {}",
                                   where, spec.gpu_type, OfferedModels(limits.offers))});
  } else if (most < spec.gpus) {
    std::string node = spec.constraints.empty() ? "one node" : "one node with its --constraint";
    out.push_back(
        {"--gpus", fmt::format("asks for {} {}s on one node but the most {} has is {}; "
                               "use --gpus {} or fewer",
                               spec.gpus, GpuTypeShown(spec.gpu_type), node, most, most)});
  } else if (nodes_with_enough < spec.num_nodes) {
    out.push_back({"--nodes", fmt::format("asks for {} nodes with {} {}{} each, but only {} {} "
                                          "them",
                                          spec.num_nodes, spec.gpus, GpuTypeShown(spec.gpu_type),
                                          spec.gpus == 1 ? "" : "s", nodes_with_enough,
                                          nodes_with_enough == 1 ? "has" : "have")});
  }
}

// --image, --mount, --shm-size, --container-workdir (docs/containers.md).
void CheckContainer(const JobSpec& spec, std::vector<FieldError>& out) {
  const ContainerSpec& c = spec.container;
  if (!c.on()) {
    if (!c.mounts.empty() || c.shm_bytes > 0 || !c.workdir.empty()) {
      out.push_back({"--image",
                     "--mount, --shm-size and --container-workdir are for a job in a "
                     "container; give its --image"});
    }
    return;
  }
  if (Status st = CheckImage(c.image, "--image"); !st.ok()) {
    out.push_back({"--image", st.message().substr(std::string_view("--image: ").size())});
  }
  if (c.mounts.size() > kMaxMounts) {
    out.push_back({"--mount", fmt::format("{} mounts; at most {}", c.mounts.size(), kMaxMounts)});
  }
  for (const std::string& m : c.mounts) {
    if (Result<Mount> mount = ParseMount(m, "--mount"); !mount.ok()) {
      out.push_back(
          {"--mount", mount.status().message().substr(std::string_view("--mount: ").size())});
      break;
    }
  }
  if (c.shm_bytes > kMaxShmBytes) {
    out.push_back({"--shm-size", fmt::format("{} is more than {}", FormatBytes(c.shm_bytes),
                                             FormatBytes(kMaxShmBytes))});
  }
  if (!c.workdir.empty() && !ParseMount(c.workdir + ":/x", "").ok()) {
    out.push_back({"--container-workdir",
                   fmt::format("'{}' is not an absolute path without ':' or ','", c.workdir)});
  }
  // The cwd is mounted at the same path: SRC:DST cannot hold it otherwise.
  if (!spec.cwd.empty() && spec.cwd.find_first_of(":,") != std::string::npos) {
    out.push_back({"cwd", fmt::format("'{}' holds ':' or ','; a container job's directory is "
                                      "mounted into it and cannot; run it from another",
                                      spec.cwd)});
  }
}

void CheckNodes(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  CheckNodeNames(spec.nodes_allowed, "--node", out);
  CheckNodeNames(spec.nodes_excluded, "--exclude-node", out);
  for (const std::string& name : spec.nodes_allowed) {
    if (std::find(spec.nodes_excluded.begin(), spec.nodes_excluded.end(), name) !=
        spec.nodes_excluded.end()) {
      out.push_back({"--exclude-node", fmt::format("{} is also given with --node; a node may be "
                                                   "allowed or excluded, not both",
                                                   name)});
      break;
    }
  }
  if (spec.num_nodes < 1 || spec.num_nodes > kMaxNumNodes) {
    out.push_back(
        {"--nodes", fmt::format("{} is not between 1 and {}", spec.num_nodes, kMaxNumNodes)});
  } else if (spec.num_nodes > 1 && spec.gpus < 1) {
    out.push_back(
        {"--nodes", "a job over several nodes needs GPUs on each: give --gpus 1 or more"});
  } else if (spec.num_nodes > limits.max_nodes) {
    out.push_back(
        {"--nodes", limits.max_nodes <= 1
                        ? fmt::format("{} nodes asked, and this is one machine: a job over several "
                                      "nodes needs a cluster (docs/cluster.md)",
                                      spec.num_nodes)
                        : fmt::format("{} nodes asked; the cluster has {}", spec.num_nodes,
                                      limits.max_nodes)});
  } else if (!spec.nodes_allowed.empty() &&
             static_cast<size_t>(spec.num_nodes) > spec.nodes_allowed.size()) {
    out.push_back({"--nodes", fmt::format("asks for {} nodes but --node names {}; name at least "
                                          "as many nodes as --nodes asks for",
                                          spec.num_nodes, spec.nodes_allowed.size())});
  }
  CheckElasticGang(spec, limits, out);
}

void CheckHostMem(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  if (spec.mem_limit_bytes == 0) return;
  if (!limits.host_limits) {
    out.push_back({"--mem-limit", "this daemon cannot enforce host limits (" +
                                      limits.host_limits_off + "); leave --mem-limit out"});
    return;
  }
  if (limits.max_mem_limit > 0 && spec.mem_limit_bytes > limits.max_mem_limit) {
    out.push_back({"--mem-limit", fmt::format("{} is more than config max_mem_limit allows ({})",
                                              FormatBytes(spec.mem_limit_bytes),
                                              FormatBytes(limits.max_mem_limit))});
  } else if (limits.max_mem_limit == 0 && limits.machine_mem_bytes > 0 &&
             spec.mem_limit_bytes > limits.machine_mem_bytes) {
    out.push_back({"--mem-limit", fmt::format("{} is more than this machine has ({})",
                                              FormatBytes(spec.mem_limit_bytes),
                                              FormatBytes(limits.machine_mem_bytes))});
  }
}

void CheckHostProcs(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
  if (spec.max_procs == 0) return;
  if (spec.max_procs < 0 || spec.max_procs > kMaxProcsLimit) {
    out.push_back(
        {"--max-procs", fmt::format("{} is not between 1 and {}", spec.max_procs, kMaxProcsLimit)});
  } else if (!limits.host_limits) {
    out.push_back({"--max-procs", "this daemon cannot enforce host limits (" +
                                      limits.host_limits_off + "); leave --max-procs out"});
  } else if (limits.max_procs > 0 && spec.max_procs > limits.max_procs) {
    out.push_back({"--max-procs", fmt::format("{} is more than config max_procs_per_job allows "
                                              "({})",
                                              spec.max_procs, limits.max_procs)});
  }
}

constexpr int kMaxGroupLimit = 100000;
constexpr int kMaxArrayIndex = 1000000;
constexpr size_t kMaxRecordBytes = 64 * 1024;

void CheckWorkflow(const JobSpec& spec, std::vector<FieldError>& out) {
  if (spec.group < 0 && spec.group != kNewGroup) out.push_back({"group", "not a group's id"});
  if (spec.group_limit < 0 || spec.group_limit > kMaxGroupLimit) {
    out.push_back({"group_limit", fmt::format("{} is not between 0 (no limit) and {}",
                                              spec.group_limit, kMaxGroupLimit)});
  }
  if (spec.array_index < -1 || spec.array_index > kMaxArrayIndex) {
    out.push_back({"array_index",
                   fmt::format("{} is not between 0 and {}", spec.array_index, kMaxArrayIndex)});
  }
  if (spec.record.size() > kMaxRecordBytes) {
    out.push_back(
        {"record", fmt::format("{} bytes; at most {}", spec.record.size(), kMaxRecordBytes)});
  }
  if (!spec.notify_url.empty()) {
    Result<WebhookUrl> url = ParseWebhookUrl(spec.notify_url, "--notify");
    if (!url.ok()) out.push_back({"--notify", url.status().message().substr(10)});
  }
  const std::string& mail = spec.mail;
  // A user name alone is mailed on this machine; '-' first would be an option to sendmail.
  bool address = mail.front() != '-' && mail.front() != '@' && mail.size() <= 254 &&
                 std::all_of(mail.begin(), mail.end(), [](char c) { return c > ' ' && c < 127; });
  if (!mail.empty() && !address) {
    out.push_back({"--mail", fmt::format("'{}' is not a mail address; use your user name or "
                                         "USER@DOMAIN",
                                         Printable(mail))});
  }
}

// A session is one program on one terminal: one node, a command to run, no gate.
void CheckSession(const JobSpec& spec, std::vector<FieldError>& out) {
  if (spec.no_log && !spec.interactive) {
    out.push_back({"no_log", "only for an interactive session (trainq shell --no-log)"});
  }
  if (!spec.interactive) return;
  if (spec.num_nodes > 1) {
    out.push_back({"--nodes", fmt::format("{}: an interactive session runs on one node; use "
                                          "--nodes 1, or submit a batch job for a gang",
                                          spec.num_nodes)});
  }
  if (spec.gate_pid != 0) out.push_back({"gate", "a gate runs no command: it cannot be a session"});
}

// The per-worker variables torchrun (torch.distributed.run) sets for each rank.
constexpr std::array<std::string_view, 8> kWorkerVars = {
    "WORLD_SIZE",       "RANK",       "LOCAL_RANK",      "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE", "GROUP_RANK", "ROLE_WORLD_SIZE", "ROLE_RANK"};

void Unset(Env& env, std::string_view key) {
  std::erase_if(env, [key](const auto& kv) { return kv.first == key; });
}

// Sets `key` once: replaces the first occurrence and drops any later ones.
void SetVar(Env& env, const std::string& key, std::string value) {
  auto same = [&key](const auto& kv) { return kv.first == key; };
  auto it = std::find_if(env.begin(), env.end(), same);
  if (it == env.end()) {
    env.emplace_back(key, std::move(value));
    return;
  }
  it->second = std::move(value);
  env.erase(std::remove_if(std::next(it), env.end(), same), env.end());
}

bool LooksLikeScript(std::string_view arg) {
  constexpr std::array<std::string_view, 9> kExts = {".py", ".sh", ".bash", ".jl",   ".lua",
                                                     ".pl", ".rb", ".R",    ".ipynb"};
  if (arg.empty() || arg.front() == '-') return false;
  return std::any_of(kExts.begin(), kExts.end(), [arg](std::string_view ext) {
    return arg.size() > ext.size() && arg.ends_with(ext);
  });
}

std::string_view Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool SameDomain(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

Status CheckMailOwner(std::string_view mail, std::string_view user,
                      const std::vector<std::string>& domains) {
  size_t at = mail.rfind('@');
  if (mail == user) return Status::Ok();
  if (at != std::string_view::npos && mail.substr(0, at) == user) {
    std::string_view domain = mail.substr(at + 1);
    for (const std::string& d : domains) {
      if (SameDomain(domain, d)) return Status::Ok();
    }
  }
  std::string accepted = fmt::format("'{}' (mailed on this machine)", user);
  for (const std::string& d : domains) accepted += fmt::format(" or '{}@{}'", user, d);
  std::string none = domains.empty() ? fmt::format(
                                           "; {}@DOMAIN needs DOMAIN in the daemon's "
                                           "mail_domains option, which names none",
                                           user)
                                     : "";
  return Status::Invalid(
      fmt::format("--mail: '{}' is not your address; use {}{}", Printable(mail), accepted, none));
}

bool ValidNodeName(std::string_view name) {
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  };
  return !name.empty() && name.size() <= kMaxNodeNameBytes &&
         std::all_of(name.begin(), name.end(), ok);
}

std::vector<FieldError> ValidateSpec(const JobSpec& spec, const SpecLimits& limits, CwdKind cwd) {
  std::vector<FieldError> errors;
  CheckCommand(spec, errors);
  CheckExecSize(spec, limits, errors);
  CheckGpus(spec, limits, errors);
  CheckMem(spec, limits, errors);
  CheckCounts(spec, limits, errors);
  CheckCwd(spec, cwd, errors);
  CheckName(spec, errors);
  CheckEnv(spec, errors);
  CheckDeps(spec, errors);
  CheckHostMem(spec, limits, errors);
  CheckHostProcs(spec, limits, errors);
  CheckNodes(spec, limits, errors);
  CheckSelection(spec, limits, errors);
  CheckContainer(spec, errors);
  CheckTransfers(spec, errors);
  CheckCollect(spec, errors);
  CheckWorkflow(spec, errors);
  CheckSession(spec, errors);
  if (!spec.stop.checkpoint.empty()) {
    if (std::string problem = CheckpointGlobProblem(spec.stop.checkpoint); !problem.empty()) {
      errors.push_back({"--checkpoint", problem});
    }
  }
  return errors;
}

namespace {

template <class T>
T LimitOf(T asked, T fallback, T bound) {
  if (asked > 0) return asked;
  if (fallback > 0 && bound > 0) return std::min(fallback, bound);
  return fallback > 0 ? fallback : bound;
}

}  // namespace

HostLimits AttemptHostLimits(const JobSpec& spec, const HostLimitConfig& config) {
  return {LimitOf(spec.mem_limit_bytes, config.default_mem, config.max_mem),
          LimitOf(spec.max_procs, config.default_procs, config.max_procs)};
}

Status ToStatus(const std::vector<FieldError>& errors) {
  if (errors.empty()) return Status::Ok();
  std::string message;
  for (const FieldError& e : errors) {
    if (!message.empty()) message += "; ";
    message += e.field + ": " + e.message;
  }
  return Status::Invalid(std::move(message));
}

std::string DefaultJobName(const std::vector<std::string>& command) {
  if (command.empty()) return "";
  auto script = std::find_if(command.begin() + 1, command.end(),
                             [](const std::string& a) { return LooksLikeScript(a); });
  std::string name(Basename(script != command.end() ? *script : command.front()));
  std::replace_if(name.begin(), name.end(), IsControl, '?');
  if (name.size() > kMaxJobNameBytes) {
    size_t cut = kMaxJobNameBytes;
    // Never split a UTF-8 sequence: back up over continuation bytes.
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
    name.resize(cut);
  }
  return name;
}

Result<std::pair<std::string, std::string>> ParseEnvAssignment(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return Status::Invalid(fmt::format("--env: '{}' is not K=V; use --env NAME=value", text));
  }
  if (eq == 0) {
    return Status::Invalid(
        fmt::format("--env: '{}' has an empty name; use --env NAME=value", text));
  }
  return std::pair{text.substr(0, eq), text.substr(eq + 1)};
}

namespace {

Status BadTime(std::string_view text) {
  return Status::Invalid(fmt::format(
      "--time: '{}' is not a time limit; use a duration (30s, 90m, 2h30m, 1d), minutes (90), "
      "H:MM:SS with minutes and seconds below 60 (2:30:00) or Slurm's D-HH[:MM[:SS]] (1-12:00:00)",
      text));
}

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "2:30:00" (H:M:S) or "45:00" (M:S), as Slurm writes them.
std::optional<int64_t> ClockMs(std::string_view text) {
  std::vector<int64_t> parts;
  for (size_t start = 0;;) {
    size_t colon = text.find(':', start);
    std::string_view part = text.substr(start, colon - start);
    if (!AllDigits(part)) return std::nullopt;
    parts.push_back(std::stoll(std::string(part)));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return std::nullopt;
  // Minutes and seconds after the first field are clock digits: 1:99:99 is a typo, not 2h40m.
  if (std::any_of(parts.begin() + 1, parts.end(), [](int64_t p) { return p > 59; })) {
    return std::nullopt;
  }
  int64_t seconds = 0;
  for (int64_t p : parts) seconds = seconds * 60 + p;
  return seconds * 1000;
}

// Slurm's "D-H", "D-H:M" and "D-H:M:S": days, then hours (after the days the clock starts
// with hours, not minutes as in "M:S").
std::optional<int64_t> DaysClockMs(std::string_view text) {
  size_t dash = text.find('-');
  if (dash == std::string_view::npos || !AllDigits(text.substr(0, dash))) return std::nullopt;
  int64_t days = std::stoll(std::string(text.substr(0, dash)));
  std::string_view rest = text.substr(dash + 1);
  std::optional<int64_t> clock;
  if (AllDigits(rest)) {
    clock = std::stoll(std::string(rest)) * 3600 * 1000;
  } else if (std::count(rest.begin(), rest.end(), ':') == 1) {
    clock = ClockMs(std::string(rest) + ":00");
  } else {
    clock = ClockMs(rest);
  }
  if (!clock) return std::nullopt;
  return days * 24 * 3600 * 1000 + *clock;
}

// The variables of one part of a multi-node job: torchrun's (PET_*), the common launchers'
// (NNODES, NODE_RANK, WORLD_SIZE over all nodes) and trainq's own.
void SetNodeVars(Env& env, const AttemptEnvInput& in) {
  std::string nodes = std::to_string(in.num_nodes);
  std::string rank = std::to_string(in.node_rank);
  SetVar(env, "PET_NNODES", nodes);
  SetVar(env, "PET_NODE_RANK", rank);
  SetVar(env, "NNODES", nodes);
  SetVar(env, "NODE_RANK", rank);
  SetVar(env, "TRAINQ_NUM_NODES", nodes);
  SetVar(env, "TRAINQ_NODE_RANK", rank);
  SetVar(env, "WORLD_SIZE", std::to_string(in.num_nodes * in.gpu_indices.size()));
}

// An elastic gang's part (--nodes MIN:MAX): torchrun's dynamic rendezvous instead of fixed ranks.
// Part 0's agent hosts the c10d store on MASTER_PORT of its node (is_host, so no agent guesses
// from host names); a part added later joins the running rendezvous, and the agents restart their
// workers at the new world size. Ranks come from the rendezvous, so none is set; last_call is
// short because trainq starts every placed part at once.
void SetRendezvousVars(Env& env, const JobSpec& spec, const AttemptEnvInput& in,
                       const std::string& addr, const std::string& port) {
  std::string nodes = std::to_string(in.num_nodes);
  SetVar(env, "PET_NNODES", fmt::format("{}:{}", spec.num_nodes, spec.max_nodes));
  SetVar(env, "PET_RDZV_BACKEND", "c10d");
  SetVar(env, "PET_RDZV_ENDPOINT", fmt::format("{}:{}", addr, port));
  SetVar(env, "PET_RDZV_ID", fmt::format("trainq-{}-{}", in.job, in.attempt));
  SetVar(env, "PET_RDZV_CONF",
         fmt::format("is_host={},last_call_timeout=5", in.node_rank == 0 ? "true" : "false"));
  Unset(env, "PET_NODE_RANK");
  SetVar(env, "TRAINQ_NUM_NODES", nodes);
  SetVar(env, "TRAINQ_NODE_RANK", std::to_string(in.node_rank));
  SetVar(env, "TRAINQ_MIN_NODES", std::to_string(spec.num_nodes));
  SetVar(env, "TRAINQ_MAX_NODES", std::to_string(spec.max_nodes));
}

// What Slurm 22.05 sets for a batch script (one task per node; the reference Slurm's own
// variables are in tests/integration/data/slurm_reference_env.md), from the attempt. Those
// fixed at submit (SLURM_SUBMIT_DIR, SLURM_ARRAY_TASK_COUNT, SLURM_CPUS_PER_TASK, ...) come
// in the job's env from `trainq sbatch`.
void SetSlurmVars(Env& env, const JobSpec& spec, const AttemptEnvInput& in) {
  auto given = [&env](std::string_view key) {
    return std::any_of(env.begin(), env.end(), [key](const auto& kv) { return kv.first == key; });
  };
  std::string id = std::to_string(in.job);
  std::string nodes = std::to_string(in.num_nodes);
  std::string rank = std::to_string(in.node_rank);
  // Slurm gives every job at least one CPU; a GPU job here holds no slot unless it asks.
  std::string cpus = std::to_string(std::max(1, spec.cpus));
  std::string nodelist = CompressHostlist(in.node_names);
  for (const char* key : {"SLURM_JOB_ID", "SLURM_JOBID"}) SetVar(env, key, id);
  SetVar(env, "SLURM_RESTART_COUNT", std::to_string(std::max(0, in.attempt - 1)));
  // sbatch fixes it at submit: an array's tasks are named NAME[INDEX], their Slurm name NAME.
  if (!given("SLURM_JOB_NAME")) SetVar(env, "SLURM_JOB_NAME", spec.name);
  SetVar(env, "SLURM_JOB_USER", spec.user);
  for (const char* key : {"SLURM_NNODES", "SLURM_JOB_NUM_NODES"}) SetVar(env, key, nodes);
  SetVar(env, "SLURM_NODEID", rank);
  for (const char* key : {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_GTIDS"}) SetVar(env, key, "0");
  for (const char* key : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) SetVar(env, key, nodelist);
  if (static_cast<size_t>(in.node_rank) < in.node_names.size()) {
    const std::string& here = in.node_names[in.node_rank];
    SetVar(env, "SLURMD_NODENAME", here);
    SetVar(env, "SLURM_TOPOLOGY_ADDR", here);
    SetVar(env, "HOSTNAME", here);
  }
  SetVar(env, "SLURM_TOPOLOGY_ADDR_PATTERN", "node");
  SetVar(env, "SLURM_CPUS_ON_NODE", cpus);
  SetVar(env, "SLURM_JOB_CPUS_PER_NODE",
         CompressCounts(std::vector<int>(in.num_nodes, std::max(1, spec.cpus))));
  // sbatch writes the tasks per node it laid out; a job from elsewhere runs one per node, and
  // a node range's --ntasks-per-node on each of the nodes it got.
  if (!given("SLURM_TASKS_PER_NODE")) {
    int per = 1;
    auto it = std::find_if(env.begin(), env.end(),
                           [](const auto& kv) { return kv.first == "SLURM_NTASKS_PER_NODE"; });
    if (it != env.end()) {
      int n = 0;
      auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
      if (ec == std::errc() && n > 0) per = n;
    }
    SetVar(env, "SLURM_TASKS_PER_NODE", CompressCounts(std::vector<int>(in.num_nodes, per)));
    if (spec.max_nodes > 0 && given("SLURM_NTASKS_PER_NODE")) {
      for (const char* key : {"SLURM_NTASKS", "SLURM_NPROCS"}) {
        SetVar(env, key, std::to_string(in.num_nodes * per));
      }
    }
  }
  SetVar(env, "SLURM_PRIO_PROCESS", "0");
  SetVar(env, "SLURM_NODE_ALIASES", "(null)");
  SetVar(env, "ENVIRONMENT", "BATCH");
  if (!given("TMPDIR")) SetVar(env, "TMPDIR", "/tmp");
  if (!in.gpu_indices.empty()) {
    std::string list = fmt::format("{}", fmt::join(in.gpu_indices, ","));
    SetVar(env, "SLURM_GPUS_ON_NODE", std::to_string(in.gpu_indices.size()));
    SetVar(env, "SLURM_JOB_GPUS", list);
    // What Slurm's generic GPU plugin sets beside CUDA_VISIBLE_DEVICES.
    for (const char* key : {"GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"}) {
      SetVar(env, key, list);
    }
  }
  // srun and scontrol, first on the PATH; srun reaches this node's daemon for a step that
  // spans nodes.
  if (!in.slurm_bin_dir.empty()) {
    std::string path = in.slurm_bin_dir;
    for (const auto& [key, value] : env) {
      if (key == "PATH" && !value.empty()) path += ":" + value;
    }
    if (path == in.slurm_bin_dir) path += ":/usr/local/bin:/usr/bin:/bin";
    SetVar(env, "PATH", path);
  }
  if (!in.local_api.empty()) SetVar(env, "TRAINQ_SERVER", in.local_api);
  if (spec.array_index < 0) return;
  SetVar(env, "SLURM_ARRAY_JOB_ID", std::to_string(spec.group > 0 ? spec.group : in.job));
  SetVar(env, "SLURM_ARRAY_TASK_ID", std::to_string(spec.array_index));
}

}  // namespace

Result<int64_t> ParseTimeLimit(std::string_view text) {
  int64_t ms = 0;
  if (AllDigits(text)) {
    ms = std::stoll(std::string(text)) * 60 * 1000;
  } else if (text.find('-') != std::string_view::npos) {
    std::optional<int64_t> days = DaysClockMs(text);
    if (!days) return BadTime(text);
    ms = *days;
  } else if (text.find(':') != std::string_view::npos) {
    std::optional<int64_t> clock = ClockMs(text);
    if (!clock) return BadTime(text);
    ms = *clock;
  } else {
    Result<int64_t> parsed = ParseDurationMs(text, "--time");
    if (!parsed.ok())
      return parsed.status().message().find("too long") != std::string::npos ? parsed.status()
                                                                             : BadTime(text);
    ms = *parsed;
  }
  if (ms > kMaxDurationMs) {
    return Status::Invalid(fmt::format("--time: '{}' is too long; a time limit is at most {}d",
                                       text, kMaxDurationDays));
  }
  if (ms <= 0) return Status::Invalid("--time: must be more than zero, e.g. --time 2h30m");
  return ms;
}

std::vector<std::pair<std::string, std::string>> BuildAttemptEnv(const JobSpec& spec,
                                                                 const AttemptEnvInput& in) {
  Env env;
  env.reserve(spec.env.size() + 12);
  for (const auto& [key, value] : spec.env) SetVar(env, key, value);
  SetVar(env, "CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(in.gpu_indices, ",")));
  SetVar(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  SetVar(env, "TRAINQ_JOB_ID", std::to_string(in.job));
  SetVar(env, "TRAINQ_ATTEMPT", std::to_string(in.attempt));
  // Every earlier attempt was a restart: a preemption, a requeue, an OOM retry, a lost node.
  SetVar(env, "TRAINQ_RESTART_COUNT", std::to_string(std::max(0, in.attempt - 1)));
  SetVar(env, "TRAINQ_GPUS", fmt::format("{}", fmt::join(in.gpu_uuids, ",")));
  SetVar(env, "TRAINQ_NUM_GPUS", std::to_string(in.gpu_indices.size()));
  if (!in.run_dir.empty()) SetVar(env, kRunDirEnv, in.run_dir);
  if (spec.group > 0) SetVar(env, "TRAINQ_GROUP", std::to_string(spec.group));
  if (spec.array_index >= 0) SetVar(env, "TRAINQ_ARRAY_INDEX", std::to_string(spec.array_index));
  if (spec.slurm_env) SetSlurmVars(env, spec, in);
  if (in.master_port <= 0) return env;
  std::string port = std::to_string(in.master_port);
  std::string addr = in.master_addr.empty() ? kMasterAddr : in.master_addr;
  for (std::string_view key : kWorkerVars) Unset(env, key);
  SetVar(env, "MASTER_ADDR", addr);
  SetVar(env, "MASTER_PORT", port);
  SetVar(env, "PET_MASTER_ADDR", addr);
  SetVar(env, "PET_MASTER_PORT", port);
  SetVar(env, "PET_NPROC_PER_NODE", std::to_string(in.gpu_indices.size()));
  SetVar(env, "PET_NNODES", "1");
  // A batch script's range is Slurm's: the nodes it starts on are its own, with fixed ranks.
  if (spec.max_nodes > 0 && !spec.slurm_env) {
    SetRendezvousVars(env, spec, in, addr, port);
  } else if (in.num_nodes > 1) {
    SetNodeVars(env, in);
  }
  return env;
}

}  // namespace trainq
