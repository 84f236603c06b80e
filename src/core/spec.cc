#include "src/core/spec.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

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

void CheckGpus(const JobSpec& spec, const SpecLimits& limits, std::vector<FieldError>& out) {
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

void CheckMem(const JobSpec& spec, std::vector<FieldError>& out) {
  if (!spec.mem_bytes && !spec.mem_percent) return;
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
  if (spec.cpus < 1 || spec.cpus > limits.max_cpu_slots) {
    out.push_back({"--cpus", fmt::format("asks for {}; use 1 to {}", Plural(spec.cpus, "CPU slot"),
                                         std::max(1, limits.max_cpu_slots))});
  }
  if (spec.retries < 0 || spec.retries > kMaxRetries) {
    out.push_back(
        {"--retries", fmt::format("{} is not between 0 and {}", spec.retries, kMaxRetries)});
  }
}

void CheckCwd(const JobSpec& spec, bool cwd_exists, std::vector<FieldError>& out) {
  if (spec.cwd.empty() || spec.cwd.front() != '/' || HasNul(spec.cwd)) {
    out.push_back({"--cwd", fmt::format("'{}' is not an absolute path", spec.cwd)});
  } else if (!cwd_exists) {
    out.push_back({"--cwd", fmt::format("directory {} does not exist", spec.cwd)});
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

}  // namespace

std::vector<FieldError> ValidateSpec(const JobSpec& spec, const SpecLimits& limits,
                                     bool cwd_exists) {
  std::vector<FieldError> errors;
  CheckCommand(spec, errors);
  CheckGpus(spec, limits, errors);
  CheckMem(spec, errors);
  CheckCounts(spec, limits, errors);
  CheckCwd(spec, cwd_exists, errors);
  CheckName(spec, errors);
  CheckEnv(spec, errors);
  return errors;
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

std::vector<std::pair<std::string, std::string>> BuildAttemptEnv(const JobSpec& spec,
                                                                 const AttemptEnvInput& in) {
  Env env;
  env.reserve(spec.env.size() + 5);
  for (const auto& [key, value] : spec.env) SetVar(env, key, value);
  SetVar(env, "CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(in.gpu_indices, ",")));
  SetVar(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  SetVar(env, "TRAINQ_JOB_ID", std::to_string(in.job));
  SetVar(env, "TRAINQ_ATTEMPT", std::to_string(in.attempt));
  SetVar(env, "TRAINQ_GPUS", fmt::format("{}", fmt::join(in.gpu_uuids, ",")));
  return env;
}

}  // namespace trainq
