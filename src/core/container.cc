#include "src/core/container.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace trainq {

namespace {

using json = nlohmann::json;

bool AbsolutePath(std::string_view p) {
  return !p.empty() && p[0] == '/' && p.find_first_of(":,") == std::string_view::npos &&
         std::none_of(p.begin(), p.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// The runtime's GPU options for `gpu_uuids`, as the run line has them.
void AddGpus(std::vector<std::string>& cmd, const std::vector<std::string>& gpu_uuids,
             const ContainerHost& host) {
  if (gpu_uuids.empty()) {
    cmd.insert(cmd.end(), {"--env", "NVIDIA_VISIBLE_DEVICES=void"});
  } else if (!host.cdi_kind.empty()) {
    for (const std::string& uuid : gpu_uuids) {
      cmd.insert(cmd.end(), {"--device", host.cdi_kind + "=" + uuid});
    }
  } else {
    cmd.insert(cmd.end(),
               {"--env", fmt::format("NVIDIA_VISIBLE_DEVICES={}", fmt::join(gpu_uuids, ","))});
  }
}

}  // namespace

Result<Mount> ParseMount(std::string_view text, std::string_view field) {
  auto refuse = [&] {
    return Status::Invalid(fmt::format("{}: '{}' is not {}", field, text, kMountForm));
  };
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return refuse();
  Mount m{std::string(parts[0]), std::string(parts[1]), false};
  if (!AbsolutePath(m.src) || !AbsolutePath(m.dst)) return refuse();
  if (parts.size() == 3) {
    if (parts[2] != "ro" && parts[2] != "rw") return refuse();
    m.read_only = parts[2] == "ro";
  }
  return m;
}

bool IsImageArchive(std::string_view image) { return !image.empty() && image[0] == '/'; }

Status CheckImage(std::string_view image, std::string_view field) {
  bool ok = !image.empty() && image.size() <= kMaxImageBytes &&
            std::all_of(image.begin(), image.end(), [](char c) {
              auto u = static_cast<unsigned char>(c);
              return u > 0x20 && u != 0x7f;
            });
  if (ok) return Status::Ok();
  return Status::Invalid(fmt::format(
      "{}: '{}' is not an image: give a name in the node's image store (pytorch:2.1, "
      "localhost/env@sha256:...) or the path of a `podman save`/`docker save` tar or an OCI "
      "archive",
      field, image));
}

std::string ContainerToText(const ContainerSpec& c) {
  if (!c.on()) return "";
  json doc = {{"image", c.image}};
  if (!c.mounts.empty()) doc["mounts"] = c.mounts;
  if (c.shm_bytes > 0) doc["shm"] = c.shm_bytes;
  if (!c.workdir.empty()) doc["workdir"] = c.workdir;
  if (!c.archive_names.empty()) doc["archive_names"] = c.archive_names;
  return doc.dump();
}

Result<ContainerSpec> ContainerFromText(std::string_view text) {
  ContainerSpec c;
  if (text.empty()) return c;
  json doc = json::parse(text, nullptr, false);
  auto corrupt = [&] {
    return Status::Internal(
        fmt::format("stored container is not what trainq writes: {}", text.substr(0, 80)));
  };
  if (!doc.is_object() || !doc.contains("image") || !doc["image"].is_string()) return corrupt();
  c.image = doc["image"].get<std::string>();
  // An optional array of strings; false when it is something else.
  auto strings = [&doc](const char* key, std::vector<std::string>& out) {
    if (!doc.contains(key)) return true;
    if (!doc[key].is_array()) return false;
    for (const json& v : doc[key]) {
      if (!v.is_string()) return false;
      out.push_back(v.get<std::string>());
    }
    return true;
  };
  if (!strings("mounts", c.mounts) || !strings("archive_names", c.archive_names)) {
    return corrupt();
  }
  if (doc.contains("shm")) {
    if (!doc["shm"].is_number_unsigned()) return corrupt();
    c.shm_bytes = doc["shm"].get<uint64_t>();
  }
  if (doc.contains("workdir")) {
    if (!doc["workdir"].is_string()) return corrupt();
    c.workdir = doc["workdir"].get<std::string>();
  }
  return c;
}

namespace {

std::string WithTag(std::string_view name) {
  std::string out(name.substr(0, name.find('@')));  // a digest is not compared
  size_t slash = out.rfind('/');
  if (out.find(':', slash == std::string::npos ? 0 : slash) == std::string::npos) out += ":latest";
  return out;
}

// docker's rule: the first part is a registry when it has a '.' or ':' or is localhost.
bool HasRegistry(std::string_view name) {
  size_t slash = name.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view first = name.substr(0, slash);
  return first == "localhost" || first.find_first_of(".:") != std::string_view::npos;
}

}  // namespace

bool ImageNameMatches(std::string_view wanted, std::string_view held) {
  if (wanted.empty() || held.empty()) return false;
  std::string w = WithTag(wanted), h = WithTag(held);
  if (w == h) return true;
  if (HasRegistry(wanted) || h.size() <= w.size()) return false;
  // Without a registry: the held name's path after its registry (and docker's library/).
  return h.ends_with("/" + w) &&
         (h.size() - w.size() - 1 == h.find('/') || h.substr(h.find('/') + 1) == "library/" + w);
}

std::string ArchiveNeedsPodman(const std::string& archive) {
  return fmt::format(
      "--image: an archive needs container_runtime = podman; with docker, load it first "
      "(docker load -i {}) and give the image's name",
      archive);
}

bool ContainerDropsVar(std::string_view name) {
  static constexpr std::string_view kHostOnly[] = {"PATH",
                                                   "HOME",
                                                   "LD_LIBRARY_PATH",
                                                   "LD_PRELOAD",
                                                   "PYTHONHOME",
                                                   "VIRTUAL_ENV",
                                                   "CONDA_PREFIX",
                                                   "CONDA_DEFAULT_ENV",
                                                   "CONDA_EXE",
                                                   "CONDA_PYTHON_EXE",
                                                   "CONDA_SHLVL",
                                                   "SHELL",
                                                   "TMPDIR",
                                                   "XDG_RUNTIME_DIR",
                                                   "PWD",
                                                   "OLDPWD",
                                                   "HOSTNAME",
                                                   "_",
                                                   "MANPATH",
                                                   "INFOPATH",
                                                   "DBUS_SESSION_BUS_ADDRESS",
                                                   "SSH_AUTH_SOCK",
                                                   "MAIL"};
  return std::find(std::begin(kHostOnly), std::end(kHostOnly), name) != std::end(kHostOnly);
}

ContainerRun BuildContainerRun(const JobSpec& spec, const std::vector<std::string>& gpu_uuids,
                               const std::vector<std::pair<std::string, std::string>>& env,
                               const ContainerHost& host) {
  const ContainerSpec& c = spec.container;
  ContainerRun run;
  std::vector<std::string>& cmd = run.command;
  cmd = {host.runtime, "run",  "--rm",    "--name", host.name, "--init",
         "--network",  "host", "--quiet", "--pull", host.pull};
  if (spec.interactive) {
    cmd.insert(cmd.begin() + 2, "--interactive");
    run.tty_flag_at = 2;
  }
  uint64_t shm = c.shm_bytes > 0 ? c.shm_bytes : host.shm_bytes;
  cmd.insert(cmd.end(), {"--shm-size", fmt::format("{}b", shm)});
  cmd.insert(cmd.end(), {"--volume", spec.cwd + ":" + spec.cwd});
  cmd.insert(cmd.end(), {"--workdir", c.workdir.empty() ? spec.cwd : c.workdir});
  for (const std::string& text : c.mounts) {
    Result<Mount> m = ParseMount(text, "--mount");
    if (!m.ok()) continue;  // judged at submit; a record that changed since runs without it
    cmd.insert(cmd.end(), {"--volume", m->src + ":" + m->dst + (m->read_only ? ":ro" : "")});
  }
  // The runtime client gets the attempt's environment; the container each of its variables by
  // name (no value on the command line), less the host's own.
  for (const auto& [name, value] : env) {
    if (name == "CUDA_VISIBLE_DEVICES" || name == "NVIDIA_VISIBLE_DEVICES" ||
        ContainerDropsVar(name)) {
      continue;
    }
    run.env.emplace_back(name, value);
    cmd.insert(cmd.end(), {"--env", name});
  }
  // Inside, the job's GPUs are the container's only ones, counted from 0.
  std::vector<std::string> inside;
  for (size_t i = 0; i < gpu_uuids.size(); ++i) inside.push_back(std::to_string(i));
  cmd.insert(cmd.end(), {"--env", fmt::format("CUDA_VISIBLE_DEVICES={}", fmt::join(inside, ","))});
  AddGpus(cmd, gpu_uuids, host);
  // The runtime needs its own PATH and HOME (the attempt's may name the submitter's).
  for (const auto& [name, value] : env) {
    if (name == "PATH" || name == "HOME") run.env.emplace_back(name, value);
  }
  cmd.insert(cmd.end(), host.runtime_args.begin(), host.runtime_args.end());
  cmd.push_back(host.image_ref.empty() ? c.image : host.image_ref);
  cmd.insert(cmd.end(), spec.command.begin(), spec.command.end());
  run.cleanup = {host.runtime, "rm", "--force"};
  if (host.podman) run.cleanup.insert(run.cleanup.end(), {"--ignore", "--time", "0"});
  run.cleanup.push_back(host.name);
  return run;
}

std::vector<std::string> BuildGpuProbe(const std::string& image,
                                       const std::vector<std::string>& gpu_uuids,
                                       const ContainerHost& host) {
  std::vector<std::string> cmd = {host.runtime, "run",  "--rm",    "--name", host.name + "-probe",
                                  "--network",  "host", "--quiet", "--pull", host.pull};
  AddGpus(cmd, gpu_uuids, host);
  cmd.insert(cmd.end(), host.runtime_args.begin(), host.runtime_args.end());
  // Where the NVIDIA toolkit mounts the host's nvidia-smi (over any the image has), whatever
  // the image's PATH.
  cmd.insert(cmd.end(), {"--entrypoint", "/usr/bin/nvidia-smi"});
  cmd.insert(cmd.end(), {image, "-L"});
  return cmd;
}

GpuProbeVerdict JudgeGpuProbe(std::string_view output, int exit_code,
                              const std::vector<std::string>& expected) {
  std::vector<std::string> listed;
  std::string last;
  for (size_t start = 0; start < output.size();) {
    size_t end = output.find('\n', start);
    std::string_view line = output.substr(start, end == std::string_view::npos ? end : end - start);
    start = end == std::string_view::npos ? output.size() : end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    last = std::string(line);
    size_t at = line.find("(UUID: ");
    size_t close = line.rfind(')');
    if (at != std::string_view::npos && close != std::string_view::npos && close > at + 7) {
      listed.emplace_back(line.substr(at + 7, close - at - 7));
    }
  }
  GpuProbeVerdict v;
  if (exit_code != 0 || listed.empty()) {
    v.problem = fmt::format(
        "GPU isolation check: nvidia-smi -L in a container {} ({})",
        exit_code != 0 ? fmt::format("exited {}", exit_code) : std::string("listed no GPU"),
        last.empty() ? std::string("no output") : last);
    return v;
  }
  v.ran = true;
  if (listed == expected) return v;
  std::vector<std::string> extra, missing;
  for (const std::string& u : listed) {
    if (std::find(expected.begin(), expected.end(), u) == expected.end()) extra.push_back(u);
  }
  for (const std::string& u : expected) {
    if (std::find(listed.begin(), listed.end(), u) == listed.end()) missing.push_back(u);
  }
  std::string what = !extra.empty()     ? fmt::format("also {}", fmt::join(extra, ", "))
                     : !missing.empty() ? fmt::format("not {}", fmt::join(missing, ", "))
                                        : "in another order";
  v.problem = fmt::format(
      "GPU isolation failed: a container given GPUs {} lists {} ({}); this node's container "
      "setup does not isolate GPUs, so its container GPU jobs are refused until the daemon "
      "restarts",
      fmt::join(expected, ", "), fmt::join(listed, ", "), what);
  return v;
}

}  // namespace trainq

namespace trainq {

namespace {

bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// CDI's rule for a device's name: letters and digits, and '_', '-', '.', ':' inside.
bool CdiDeviceName(std::string_view name) {
  if (name.empty() || !Alnum(name.front()) || !Alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return Alnum(c) || c == '_' || c == '-' || c == '.' || c == ':';
  });
}

// No line breaks or control characters in what a one-line file holds.
std::string OneLine(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

json ReadOnlyMount(std::string host_path, std::string container_path) {
  return {{"hostPath", std::move(host_path)},
          {"containerPath", std::move(container_path)},
          {"options", {"ro", "bind"}}};
}

// Reads each GPU file in its name's order: the host's order, numbered from 0 as nvidia-smi
// numbers a container's GPUs. Any arguments: it knows only -L.
constexpr std::string_view kNvidiaSmi =
    "#!/bin/sh\n"
    "# trainq's stand-in for nvidia-smi over simulated GPUs (docs/simulated-gpus.md)\n"
    "i=0\n"
    "for f in /run/trainq-gpus/*; do\n"
    "  [ -f \"$f\" ] || continue\n"
    "  read -r uuid name < \"$f\"\n"
    "  echo \"GPU $i: $name (UUID: $uuid)\"\n"
    "  i=$((i + 1))\n"
    "done\n"
    "[ \"$i\" -gt 0 ] || { echo \"No devices were found\" >&2; exit 6; }\n";

}  // namespace

std::string SimulatedCdiKind(std::string_view state_dir) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : state_dir) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return fmt::format("sim-{:012x}.trainq.dev/gpu", hash & 0xffffffffffffull);
}

std::string SimulatedGpuFileName(const SimulatedGpu& gpu) {
  return fmt::format("{:04d}", gpu.index);
}

std::string SimulatedGpuFileText(const SimulatedGpu& gpu) {
  return fmt::format("{} {}\n", gpu.uuid, OneLine(gpu.name.empty() ? "Simulated GPU" : gpu.name));
}

std::string_view SimulatedNvidiaSmi() { return kNvidiaSmi; }

Result<std::string> SimulatedCdiSpec(std::string_view kind, const std::vector<SimulatedGpu>& gpus,
                                     std::string_view files_dir) {
  std::vector<std::string> problems;
  if (!AbsolutePath(files_dir)) {
    problems.push_back(fmt::format("files_dir: '{}' is not an absolute path", files_dir));
  }
  std::vector<std::string> seen;
  json devices = json::array();
  for (size_t i = 0; i < gpus.size(); ++i) {
    const SimulatedGpu& g = gpus[i];
    if (!CdiDeviceName(g.uuid)) {
      problems.push_back(fmt::format(
          "gpus[{}].uuid: '{}' cannot name a CDI device (letters, digits, and '-', '_', '.', "
          "':' between them)",
          i, g.uuid));
    } else if (std::find(seen.begin(), seen.end(), g.uuid) != seen.end()) {
      problems.push_back(fmt::format("gpus[{}].uuid: '{}' is given twice", i, g.uuid));
    }
    seen.push_back(g.uuid);
    std::string file = SimulatedGpuFileName(g);
    devices.push_back({{"name", g.uuid},
                       {"containerEdits",
                        {{"env", {fmt::format("TRAINQ_SIMULATED_GPU_{}={}", g.index, g.uuid)}},
                         {"mounts",
                          {ReadOnlyMount(fmt::format("{}/{}", files_dir, file),
                                         fmt::format("{}/{}", kSimulatedGpusInside, file))}}}}});
  }
  if (!problems.empty()) return Status::Invalid(fmt::format("{}", fmt::join(problems, "; ")));
  json spec = {
      {"cdiVersion", "0.5.0"},
      {"kind", std::string(kind)},
      {"devices", std::move(devices)},
      {"containerEdits",
       {{"mounts",
         {ReadOnlyMount(fmt::format("{}/nvidia-smi", files_dir), "/usr/bin/nvidia-smi")}}}}};
  return spec.dump(2) + "\n";
}

}  // namespace trainq
