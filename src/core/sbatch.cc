#include "src/core/sbatch.h"

#include <algorithm>
#include <charconv>
#include <functional>

#include <fmt/format.h>

#include "src/core/container.h"
#include "src/core/gpu_select.h"
#include "src/core/spec.h"
#include "src/core/stop_spec.h"
#include "src/core/words.h"

namespace trainq {

namespace {

// What an option's value does to the options; "" when it was read, else what is wrong with it
// (the accepted form).
using Apply = std::function<std::string(const std::string& value, SbatchOptions& out)>;

struct OptionRow {
  std::string_view name;  // long form, without "--"
  char letter;            // short form, 0 for none
  Apply apply;            // null: --parsable
  bool flag = false;      // takes no value: `apply` is called with ""
};

std::optional<int64_t> Count(std::string_view text) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 0 ||
      n > 1'000'000'000) {
    return std::nullopt;
  }
  return n;
}

std::string SetCount(const std::string& v, std::optional<int>& out, int min,
                     std::string_view form) {
  std::optional<int64_t> n = Count(v);
  if (!n || *n < min || *n > 1'000'000) return std::string(form);
  out = static_cast<int>(*n);
  return "";
}

std::vector<std::string> SplitOn(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// The TYPE of gpu:TYPE:N or TYPE:N, as --gpu-type takes it; "" when fine.
std::string SetGpuType(const std::string& type, SbatchOptions& out) {
  if (!CheckGpuType(type, "type").ok()) return std::string(kGpuTypeForm);
  out.gpu_type = type;
  return "";
}

// --gres=gpu:2, gpu:a100:2, gpu (one).
std::string Gres(const std::string& v, SbatchOptions& out) {
  std::string type;  // one type for the whole job
  for (const std::string& item : SplitOn(v, ',')) {
    std::vector<std::string> parts = SplitOn(item, ':');
    if (parts[0] != "gpu") {
      out.warnings.push_back(
          fmt::format("--gres={}: trainq knows only gpu resources; {} ignored", v, parts[0]));
      continue;
    }
    constexpr std::string_view kForm = "gpu:N or gpu:TYPE:N, e.g. gpu:2 or gpu:a100:2";
    if (parts.size() > 3) return std::string(kForm);
    if (parts.size() == 3) {
      if (!type.empty() && type != parts[1]) {
        return fmt::format("one GPU type for the whole job (it names {} and {})", type, parts[1]);
      }
      type = parts[1];
      if (std::string bad = SetGpuType(type, out); !bad.empty()) return bad;
    }
    std::string count = parts.size() == 1 ? "1" : parts.back();
    std::string bad = SetCount(count, out.gpus, 0, std::string(kForm));
    if (!bad.empty()) return bad;
  }
  if (type.empty()) out.gpu_type.clear();  // a later --gres without a type asks for any GPU
  return "";
}

// --gpus and --gpus-per-node: N or TYPE:N.
std::string Gpus(const std::string& v, std::optional<int>& into, SbatchOptions& out) {
  size_t colon = v.rfind(':');
  if (colon != std::string::npos) {
    if (std::string bad = SetGpuType(v.substr(0, colon), out); !bad.empty()) return bad;
  } else {
    out.gpu_type.clear();
  }
  std::string count = colon == std::string::npos ? v : v.substr(colon + 1);
  return SetCount(count, into, 0, "a number of GPUs, e.g. 2 or a100:2");
}

// pyxis's --container-mounts=SRC:DST[:ro],...: each checked as --mount takes it.
std::string ContainerMounts(const std::string& v, SbatchOptions& out) {
  out.container_mounts.clear();
  for (const std::string& item : SplitOn(v, ',')) {
    if (!ParseMount(item, "--container-mounts").ok())
      return std::string(kMountForm) + ", comma-separated";
    out.container_mounts.push_back(item);
  }
  return "";
}

// --constraint, -C: features every node of the job has (ParseConstraint's form).
std::string Constraint(const std::string& v, SbatchOptions& out) {
  Result<std::vector<std::string>> clauses = ParseConstraint(v, "--constraint");
  if (!clauses.ok()) return std::string(kConstraintForm);
  out.constraints = std::move(*clauses);
  return "";
}

std::string Time(const std::string& v, SbatchOptions& out) {
  if (v == "UNLIMITED" || v == "infinite") {
    out.time_limit_ms.reset();
    return "";
  }
  Result<int64_t> ms = ParseTimeLimit(v);
  if (!ms.ok()) return "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS";
  out.time_limit_ms = *ms;
  return "";
}

// afterok:1:2,afterany:3 (',' all of them; '?' any of them is not supported).
std::string Dependency(const std::string& v, SbatchOptions& out) {
  constexpr std::string_view kForm = "afterok:ID[:ID...] or afterany:ID[:ID...], joined by ','";
  if (v.find('?') != std::string::npos) return std::string(kForm) + " ('?' is not supported)";
  for (const std::string& item : SplitOn(v, ',')) {
    std::vector<std::string> parts = SplitOn(item, ':');
    std::vector<int64_t>* into = parts[0] == "afterok"    ? &out.after_ok
                                 : parts[0] == "afterany" ? &out.after_any
                                                          : nullptr;
    if (!into || parts.size() < 2) return std::string(kForm);
    for (size_t i = 1; i < parts.size(); ++i) {
      // Slurm's "ID+MINUTES" delay is not kept.
      std::optional<int64_t> id = Count(parts[i].substr(0, parts[i].find('+')));
      if (!id || *id == 0) return std::string(kForm);
      into->push_back(*id);
    }
  }
  return "";
}

std::string Nodes(const std::string& v, SbatchOptions& out) {
  constexpr char kForm[] = "a node count or a range MIN-MAX, e.g. 2 or 1-4";
  size_t dash = v.find('-');
  if (std::string bad = SetCount(v.substr(0, dash), out.nodes, 1, kForm); !bad.empty()) {
    return bad;
  }
  out.max_nodes.reset();
  if (dash == std::string::npos) return "";
  if (std::string bad = SetCount(v.substr(dash + 1), out.max_nodes, 1, kForm); !bad.empty()) {
    return bad;
  }
  if (*out.max_nodes < *out.nodes) return kForm;
  if (*out.max_nodes == *out.nodes) out.max_nodes.reset();  // 2-2: exactly 2
  return "";
}

Apply Text(std::string SbatchOptions::*field) {
  return [field](const std::string& v, SbatchOptions& out) {
    out.*field = v;
    return std::string(v.empty() ? "a value" : "");
  };
}

Apply Names(std::vector<std::string> SbatchOptions::*field) {
  return [field](const std::string& v, SbatchOptions& out) {
    for (const std::string& name : SplitOn(v, ',')) {
      if (!ValidNodeName(name)) return std::string("NAME[,NAME...] (no ranges like node[1-3])");
      (out.*field).push_back(name);
    }
    return std::string();
  };
}

// Read and not honoured: the warning says why. `flag`: it takes no value.
struct Unhonoured {
  std::string_view name;
  char letter;
  bool flag;
  std::string_view why;
};

constexpr Unhonoured kUnhonoured[] = {
    {"partition", 'p', false, "trainq has no partitions"},
    {"account", 'A', false, "trainq keeps no accounts"},
    {"qos", 'q', false, "trainq has no QOS; use --priority with trainq submit"},
    {"mem", 0, false, "host memory is not reserved per job; --mem-per-gpu sets GPU memory"},
    {"mem-per-cpu", 0, false, "host memory is not reserved per job"},
    {"mail-type", 0, false, "trainq mails when the job ends, whatever --mail-type says"},
    {"export", 0, false, "the job gets the submitting environment, as --export=ALL"},
    {"exclusive", 0, true, "trainq does not reserve whole nodes"},
    {"nice", 0, false, "use trainq submit --priority"},
    {"open-mode", 0, false,
     "output files are truncated when the job starts; a requeued job's attempts append"},
    {"wait", 'W', true, "use trainq wait ID"},
    {"begin", 'b', false, "trainq has no start times"},
    {"comment", 0, false, "trainq keeps no comments"},
    {"reservation", 0, false, "trainq has no reservations"},
    {"licenses", 'L', false, "trainq has no licenses"},
    {"distribution", 'm', false, "srun places tasks in blocks, node 0 first"},
    {"cpus-per-gpu", 0, false, "use --cpus-per-task"},
    {"threads-per-core", 0, false, "trainq does not place threads"},
    {"hint", 0, false, "trainq does not place threads"},
    {"verbose", 'v', true, "trainq sbatch prints what it does"},
    {"quiet", 'Q', true, "warnings are still printed"},
    {"container-name", 0, false, "trainq names each attempt's container and removes it at the end"},
    {"container-mount-home", 0, true,
     "only the job's directory and --container-mounts are mounted"},
    {"no-container-mount-home", 0, true, "the home directory is never mounted"},
    {"container-remap-root", 0, true, "the command runs as the image's user"},
    {"no-container-remap-root", 0, true, "the command runs as the image's user"},
    {"container-writable", 0, true, "a container's own files are always writable, and discarded"},
    {"container-readonly", 0, true, "a container's own files are always writable, and discarded"},
    {"container-save", 0, false, "trainq does not save containers as images"},
    {"container-env", 0, false, "the job's environment is passed in (docs/containers.md)"},
};

const std::vector<OptionRow>& Rows() {
  static const std::vector<OptionRow> rows = {
      {"job-name", 'J', Text(&SbatchOptions::job_name)},
      {"gres", 0, Gres},
      {"constraint", 'C', Constraint},
      {"container-image", 0, Text(&SbatchOptions::container_image)},
      {"container-mounts", 0, ContainerMounts},
      {"container-workdir", 0, Text(&SbatchOptions::container_workdir)},
      {"gpus", 'G',
       [](const std::string& v, SbatchOptions& out) { return Gpus(v, out.gpus_total, out); }},
      {"gpus-per-node", 0,
       [](const std::string& v, SbatchOptions& out) { return Gpus(v, out.gpus, out); }},
      {"mem-per-gpu", 0, Text(&SbatchOptions::mem_per_gpu)},
      {"time", 't', Time},
      {"array", 'a', Text(&SbatchOptions::array)},
      {"dependency", 'd', Dependency},
      {"output", 'o', Text(&SbatchOptions::output)},
      {"error", 'e', Text(&SbatchOptions::error)},
      {"nodes", 'N', Nodes},
      {"cpus-per-task", 'c',
       [](const std::string& v, SbatchOptions& out) {
         return SetCount(v, out.cpus_per_task, 1, "a number of CPUs, e.g. 4");
       }},
      {"ntasks", 'n',
       [](const std::string& v, SbatchOptions& out) {
         return SetCount(v, out.ntasks, 1, "a number of tasks, e.g. 2");
       }},
      {"ntasks-per-node", 0,
       [](const std::string& v, SbatchOptions& out) {
         return SetCount(v, out.ntasks_per_node, 1, "a number of tasks, e.g. 1");
       }},
      {"gpus-per-task", 0,
       [](const std::string& v, SbatchOptions& out) {
         size_t colon = v.rfind(':');
         if (colon != std::string::npos) {
           out.warnings.push_back(fmt::format(
               "--gpus-per-task={}: a GPU type is not chosen by trainq; any GPU with the memory "
               "asked",
               v));
         }
         return SetCount(colon == std::string::npos ? v : v.substr(colon + 1), out.gpus_per_task, 1,
                         "a number of GPUs, e.g. 4");
       }},
      {"chdir", 'D', Text(&SbatchOptions::chdir)},
      {"nodelist", 'w', Names(&SbatchOptions::nodelist)},
      {"exclude", 'x', Names(&SbatchOptions::exclude)},
      {"mail-user", 0, Text(&SbatchOptions::mail_user)},
      {"signal", 0,
       [](const std::string& v, SbatchOptions& out) {
         if (!ParseSignalOption(v).ok()) {
           return std::string(
               "[B:]SIG[@SECONDS]: SIG a name (USR1, TERM) or number 1-31, SECONDS 0-65535");
         }
         out.signal = v;
         return std::string();
       }},
      {"requeue", 0,
       [](const std::string&, SbatchOptions& out) {
         out.requeue = true;
         return std::string();
       },
       true},
      {"no-requeue", 0,
       [](const std::string&, SbatchOptions& out) {
         out.requeue = false;
         return std::string();
       },
       true},
      {"hold", 'H',
       [](const std::string&, SbatchOptions& out) {
         out.hold = true;
         return std::string();
       },
       true},
      {"parsable", 0, nullptr},
  };
  return rows;
}

struct Found {
  const OptionRow* row = nullptr;
  const Unhonoured* unhonoured = nullptr;
};

Found Find(std::string_view name, char letter) {
  for (const OptionRow& r : Rows()) {
    if ((!name.empty() && r.name == name) || (letter && r.letter == letter)) return {&r, nullptr};
  }
  for (const Unhonoured& u : kUnhonoured) {
    if ((!name.empty() && u.name == name) || (letter && u.letter == letter)) return {nullptr, &u};
  }
  return {};
}

bool TakesValue(const Found& f) {
  return f.row ? f.row->apply != nullptr && !f.row->flag : (f.unhonoured && !f.unhonoured->flag);
}

}  // namespace

Status ApplySbatchOptions(const std::vector<std::string>& words, std::string_view where,
                          SbatchOptions& out) {
  Result<size_t> end = ApplySbatchCommandLine(words, where, out, /*stop_at_word=*/false);
  return end.ok() ? Status::Ok() : end.status();
}

Result<size_t> ApplySbatchCommandLine(const std::vector<std::string>& words, std::string_view where,
                                      SbatchOptions& out, bool stop_at_word) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (stop_at_word && (word.empty() || word[0] != '-')) return i;
    std::string name, value;
    bool has_value = false;
    char letter = 0;
    if (word.starts_with("--")) {
      size_t eq = word.find('=');
      name = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) {
        value = word.substr(eq + 1);
        has_value = true;
      }
    } else if (word.size() >= 2 && word[0] == '-') {
      letter = word[1];
      if (word.size() > 2) {
        value = word.substr(2);
        has_value = true;
      }
    } else {
      return Status::Invalid(fmt::format("{}: '{}' is not an sbatch option", where, word));
    }
    std::string shown = letter ? std::string("-") + letter : "--" + name;
    Found found = Find(name, letter);
    if (!found.row && !found.unhonoured) {
      out.warnings.push_back(
          fmt::format("{}: {} is not an option trainq sbatch knows; ignored", where, shown));
      continue;
    }
    if (TakesValue(found) && !has_value) {
      if (i + 1 == words.size()) {
        return Status::Invalid(fmt::format("{}: {} needs a value", where, shown));
      }
      value = words[++i];
    }
    if (found.unhonoured) {
      out.warnings.push_back(fmt::format("{}: {}{} is not honoured: {}; ignored", where, shown,
                                         has_value || TakesValue(found) ? "=" + value : "",
                                         found.unhonoured->why));
      continue;
    }
    if (!found.row->apply) {
      out.parsable = true;
      continue;
    }
    size_t warned = out.warnings.size();
    std::string problem = found.row->apply(value, out);
    for (size_t w = warned; w < out.warnings.size(); ++w) {
      out.warnings[w] = fmt::format("{}: {}", where, out.warnings[w]);
    }
    if (!problem.empty()) {
      return Status::Invalid(fmt::format("{}: {} '{}' cannot be read; expected {}", where, shown,
                                         TerminalSafe(value), problem));
    }
    out.origin[std::string(found.row->name)] =
        found.row->flag ? fmt::format("{}: --{}", where, found.row->name)
                        : fmt::format("{}: --{}={}", where, found.row->name, TerminalSafe(value));
  }
  return words.size();
}

Result<SbatchAllocation> AllocationOf(const SbatchOptions& o) {
  SbatchAllocation a;
  auto from = [&o](std::string_view name) {
    auto it = o.origin.find(std::string(name));
    return it == o.origin.end() ? std::string("--") + std::string(name) : it->second;
  };
  if (o.max_nodes && (o.ntasks || o.gpus_total)) {
    return Status::Invalid(
        fmt::format("{} with {}: a node range is laid out per node when the job starts; give "
                    "--ntasks-per-node and --gpus-per-node instead",
                    from("nodes"), o.ntasks ? from("ntasks") : from("gpus")));
  }
  if (o.nodes) {
    a.nodes = *o.nodes;
  } else if (o.ntasks && o.ntasks_per_node) {
    a.nodes = (*o.ntasks + *o.ntasks_per_node - 1) / *o.ntasks_per_node;
  }
  if (o.ntasks) {
    a.ntasks = *o.ntasks;
  } else {
    a.ntasks = a.nodes * o.ntasks_per_node.value_or(1);
  }
  if (a.ntasks < a.nodes) {
    return Status::Invalid(fmt::format(
        "{} asks for fewer tasks than {} asks for nodes; every node runs one task at least",
        from("ntasks"), from("nodes")));
  }
  if (o.ntasks_per_node && a.ntasks > a.nodes * *o.ntasks_per_node) {
    return Status::Invalid(fmt::format("{} and {} cannot hold {}: at most {} tasks", from("nodes"),
                                       from("ntasks-per-node"), from("ntasks"),
                                       a.nodes * *o.ntasks_per_node));
  }
  a.tasks_per_node.assign(a.nodes, a.ntasks / a.nodes);
  for (int i = 0; i < a.ntasks % a.nodes; ++i) ++a.tasks_per_node[i];
  int most = a.tasks_per_node[0];
  std::optional<int> per_node = o.gpus;
  std::string per_node_from = o.origin.contains("gres") ? from("gres") : from("gpus-per-node");
  if (!per_node && o.gpus_total) {
    if (*o.gpus_total % a.nodes != 0) {
      return Status::Invalid(fmt::format(
          "{} does not split evenly over the {} nodes of {}: trainq gives every node of a job "
          "as many GPUs; use --gpus-per-node",
          from("gpus"), a.nodes, from("nodes")));
    }
    per_node = *o.gpus_total / a.nodes;
    per_node_from = from("gpus");
  }
  if (per_node) {
    a.gpus_per_node = *per_node;
    if (o.gpus_per_task && *o.gpus_per_task * most > *per_node) {
      return Status::Invalid(fmt::format(
          "{} with {} task(s) on a node needs {} GPUs there, more than the {} of {}",
          from("gpus-per-task"), most, *o.gpus_per_task * most, *per_node, per_node_from));
    }
  } else if (o.gpus_per_task) {
    a.gpus_per_node = *o.gpus_per_task * most;
  }
  // Slurm gives each task a CPU at least; without --ntasks options trainq keeps its own rule
  // (a GPU job holds no CPU slot unless it asks).
  if (o.cpus_per_task || o.ntasks || o.ntasks_per_node) {
    a.cpus_per_node = o.cpus_per_task.value_or(1) * most;
  }
  return a;
}

std::vector<std::string> ShebangOf(std::string_view script) {
  if (!script.starts_with("#!")) return {};
  std::string_view line = script.substr(2, script.find('\n') - 2);
  std::vector<std::string> out;
  size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) return {};
  line.remove_prefix(start);
  size_t space = line.find_first_of(" \t");
  out.emplace_back(line.substr(0, space));
  if (space != std::string_view::npos) {
    std::string_view arg = line.substr(space);
    size_t a = arg.find_first_not_of(" \t"), b = arg.find_last_not_of(" \t\r");
    if (a != std::string_view::npos) out.emplace_back(arg.substr(a, b - a + 1));
  }
  if (!out.empty() && !out[0].empty() && out[0].back() == '\r') out[0].pop_back();
  return out;
}

namespace {

// One "#TRAINQ --stage SRC[:DST]" (or --collect PATTERN, --collect-to DIR) line, values as
// the same flags of `trainq submit` take them, "--opt=value" or "--opt value".
Status ApplyTrainqLine(std::string_view rest, int line, SbatchOptions& out) {
  std::string where = fmt::format("#TRAINQ line {}", line);
  Result<std::vector<std::string>> words = SplitWords(rest.substr(0, rest.find(" #")), where);
  if (!words.ok()) return words.status();
  for (size_t i = 0; i < words->size(); ++i) {
    std::string word = (*words)[i];
    std::string value;
    if (size_t eq = word.find('='); eq != std::string::npos) {
      value = word.substr(eq + 1);
      word.resize(eq);
    } else if (i + 1 < words->size()) {
      value = (*words)[++i];
    }
    if ((word != "--stage" && word != "--collect" && word != "--collect-to") || value.empty()) {
      return Status::Invalid(fmt::format(
          "{}: '{}': a #TRAINQ line gives --stage SRC[:DST], --collect PATTERN or --collect-to "
          "DIR (docs/cluster.md); other options go in #SBATCH lines",
          where, (*words)[i]));
    }
    if (word == "--stage") out.stage.push_back(value);
    if (word == "--collect") out.collect.push_back(value);
    if (word == "--collect-to") out.collect_to = value;
    out.origin[word.substr(2)] = where;
  }
  return Status::Ok();
}

}  // namespace

Status ReadSbatchScript(std::string_view script, SbatchOptions& out) {
  if (ShebangOf(script).empty()) {
    return Status::Invalid(
        "the script does not start with #! and an interpreter (e.g. #!/bin/bash); sbatch "
        "refuses such a script too");
  }
  size_t at = script.find('\n');
  for (int line = 2; at != std::string_view::npos; ++line) {
    size_t end = script.find('\n', at + 1);
    std::string_view text = script.substr(
        at + 1, end == std::string_view::npos ? std::string_view::npos : end - at - 1);
    at = end;
    size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;
    if (text[first] != '#') break;  // the first command: sbatch reads no further
    if (text.substr(first).starts_with("#TRAINQ")) {
      TRAINQ_RETURN_IF_ERROR(ApplyTrainqLine(text.substr(first + 7), line, out));
      continue;
    }
    if (!text.substr(first).starts_with("#SBATCH")) continue;
    std::string where = fmt::format("#SBATCH line {}", line);
    std::string_view rest = text.substr(first + 7);
    // "#SBATCH --x  # a comment": the comment is not part of the options.
    size_t hash = rest.find(" #");
    Result<std::vector<std::string>> words = SplitWords(rest.substr(0, hash), where);
    if (!words.ok()) return words.status();
    TRAINQ_RETURN_IF_ERROR(ApplySbatchOptions(*words, where, out));
  }
  return Status::Ok();
}

namespace {

std::string ShellQuoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

std::string ShellPathOf(std::string_view pattern, std::string_view job_name,
                        std::string_view user) {
  std::string out, fixed;
  auto flush = [&] {
    if (!fixed.empty()) out += ShellQuoted(fixed);
    fixed.clear();
  };
  auto variable = [&](std::string_view name) {
    flush();
    out += fmt::format("\"${{{}}}\"", name);
  };
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      fixed += pattern[i];
      continue;
    }
    char c = pattern[++i];
    switch (c) {
      case '%':
        fixed += '%';
        break;
      case 'x':
        fixed += job_name;
        break;
      case 'u':
        fixed += user;
        break;
      case 'j':
        variable("SLURM_JOB_ID");
        break;
      // Outside an array Slurm writes the job id for %A and 4294967294 for %a.
      case 'A':
        variable("SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID");
        break;
      case 'a':
        variable("SLURM_ARRAY_TASK_ID:-4294967294");
        break;
      case 'N':
        variable("SLURMD_NODENAME");
        break;
      default:
        fixed += '%';
        fixed += c;
    }
  }
  flush();
  return out.empty() ? "''" : out;
}

}  // namespace trainq
