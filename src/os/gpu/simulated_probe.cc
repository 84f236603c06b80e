// Simulated GPUs (docs/simulated-gpus.md): a JSON file describes the GPUs, and usage files
// written by fake training jobs say how much each live process holds. Both are re-read on
// every Sample so a test can change them while the daemon runs.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/os/fd.h"
#include "src/os/gpu/gpu_probe.h"
#include "trainq/size.h"

namespace trainq {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kDefaultUsageDir = "usage";
constexpr const char* kDefaultName = "Simulated GPU";

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// The whole file, or the errno of the failure.
Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(path, errno);
  std::string data;
  char buffer[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n == 0) return data;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(path, errno);
    data.append(buffer, static_cast<size_t>(n));
  }
}

// Problems found in one input, each with its field, reported together.
class FieldErrors {
 public:
  void Add(const std::string& field, std::string_view problem) {
    messages_.push_back(fmt::format("{}: {}", field, problem));
  }
  void AddMessage(std::string message) { messages_.push_back(std::move(message)); }
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }
  Status ToStatus(const std::string& path) const {
    return Status::Invalid(
        fmt::format("simulated GPU file {}: {}", path, fmt::join(messages_, "; ")));
  }

 private:
  std::vector<std::string> messages_;
};

const json* Find(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// `key` of `object`; its absence is an error of the field `at`.`key`.
const json* Required(const json& object, const char* key, const std::string& at,
                     FieldErrors* errors) {
  const json* value = Find(object, key);
  if (value == nullptr) errors->Add(fmt::format("{}.{}", at, key), "is missing");
  return value;
}

// A size: a JSON integer of bytes, or a string in the forms ParseSize takes.
std::optional<uint64_t> ParseBytes(const json& value, const std::string& field, bool zero_ok,
                                   FieldErrors* errors) {
  if (value.is_number_unsigned()) {
    auto bytes = value.get<uint64_t>();
    if (bytes > 0 || zero_ok) return bytes;
    errors->Add(field, "must be more than 0");
    return std::nullopt;
  }
  if (value.is_string()) {
    auto bytes = ParseSize(value.get<std::string>(), field, zero_ok);
    if (bytes.ok()) return *bytes;
    errors->AddMessage(bytes.status().message());
    return std::nullopt;
  }
  errors->Add(field, "must be a size: a non-negative integer of bytes or a string like \"20GiB\"");
  return std::nullopt;
}

std::optional<int64_t> ParsePid(const json& value, const std::string& field, FieldErrors* errors) {
  if (value.is_number_unsigned() && value.get<uint64_t>() > 0 &&
      value.get<uint64_t>() <= static_cast<uint64_t>(INT_MAX)) {
    return static_cast<int64_t>(value.get<uint64_t>());
  }
  errors->Add(field, "must be a positive integer process id");
  return std::nullopt;
}

// Adds `bytes` held by `pid` to the GPU: one entry per process, as NVML lists them.
void AddProcess(GpuInfo* gpu, int64_t pid, uint64_t bytes) {
  gpu->used_bytes = SaturatingAdd(gpu->used_bytes, bytes);
  for (GpuProcess& p : gpu->processes) {
    if (p.pid == pid) {
      p.used_bytes = SaturatingAdd(p.used_bytes, bytes);
      return;
    }
  }
  gpu->processes.push_back({pid, bytes});
}

void ParseOtherProcesses(const json& list, const std::string& field, GpuInfo* gpu,
                         FieldErrors* errors) {
  if (!list.is_array()) return errors->Add(field, "must be an array of {\"pid\", \"bytes\"}");
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = fmt::format("{}[{}]", field, i);
    const json& entry = list[i];
    const json* pid = entry.is_object() ? Find(entry, "pid") : nullptr;
    const json* bytes = entry.is_object() ? Find(entry, "bytes") : nullptr;
    if (pid == nullptr || bytes == nullptr) {
      errors->Add(at, "must be an object with \"pid\" and \"bytes\"");
      continue;
    }
    auto p = ParsePid(*pid, at + ".pid", errors);
    auto b = ParseBytes(*bytes, at + ".bytes", true, errors);
    if (p && b) AddProcess(gpu, *p, *b);
  }
}

void ParseUtilization(const json& value, const std::string& field, GpuInfo* gpu,
                      FieldErrors* errors) {
  if (value.is_number_unsigned() && value.get<uint64_t>() <= 100) {
    gpu->utilization_pct = static_cast<int>(value.get<uint64_t>());
  } else {
    errors->Add(field, "must be an integer percentage from 0 to 100");
  }
}

void ParseText(const json* value, const std::string& field, std::string* out, FieldErrors* errors) {
  if (value->is_string() && !value->get<std::string>().empty()) {
    *out = value->get<std::string>();
  } else {
    errors->Add(field, "must be a non-empty string");
  }
}

// One entry of "gpus". used_bytes starts as the memory of others.
GpuInfo ParseGpu(const json& entry, size_t index, FieldErrors* errors) {
  std::string at = fmt::format("gpus[{}]", index);
  GpuInfo gpu;
  gpu.index = static_cast<int>(index);
  gpu.name = kDefaultName;
  gpu.processes_known = true;
  if (!entry.is_object()) {
    errors->Add(at, "must be an object");
    return gpu;
  }
  if (const json* uuid = Required(entry, "uuid", at, errors)) {
    ParseText(uuid, at + ".uuid", &gpu.uuid, errors);
  }
  if (const json* name = Find(entry, "name")) ParseText(name, at + ".name", &gpu.name, errors);
  if (const json* total = Required(entry, "memory_total", at, errors)) {
    gpu.total_bytes = ParseBytes(*total, at + ".memory_total", false, errors).value_or(0);
  }
  if (const json* others = Find(entry, "memory_used_by_others")) {
    gpu.used_bytes = ParseBytes(*others, at + ".memory_used_by_others", true, errors).value_or(0);
  }
  if (const json* util = Find(entry, "utilization")) {
    ParseUtilization(*util, at + ".utilization", &gpu, errors);
  }
  if (const json* procs = Find(entry, "other_processes")) {
    ParseOtherProcesses(*procs, at + ".other_processes", &gpu, errors);
  }
  if (gpu.total_bytes > 0 && gpu.used_bytes > gpu.total_bytes) {
    errors->Add(at + ".memory_used_by_others",
                "with other_processes must not exceed memory_total: a GPU cannot use more "
                "memory than it has");
  }
  return gpu;
}

struct SimulatedConfig {
  std::vector<GpuInfo> gpus;
  std::vector<std::vector<int>> topology;
  fs::path usage_dir;
};

constexpr const char* kLevelForm =
    "must be a level: X, NV# (NVLink), BRD, PIX, PXB, PHB, NODE, SYS, or 0, 10, 20, 30, 40, 50";

std::optional<int> ParseLevel(const json& value) {
  if (value.is_string()) return TopologyLevelFromName(value.get<std::string>());
  if (value.is_number_unsigned()) return TopologyLevelFromName(value.dump());
  return std::nullopt;
}

void ParseTopologyRow(const json& row, size_t i, size_t n, std::vector<int>* out,
                      FieldErrors* errors) {
  std::string at = fmt::format("topology[{}]", i);
  if (!row.is_array() || row.size() != n) {
    return errors->Add(at, fmt::format("must be an array of {} levels, one per GPU", n));
  }
  for (size_t j = 0; j < n; ++j) {
    std::optional<int> level = ParseLevel(row[j]);
    if (!level) errors->Add(fmt::format("{}[{}]", at, j), kLevelForm);
    if (level) (*out)[j] = *level;
  }
}

// A GPU with itself is X; the pair (i, j) is the pair (j, i).
void CheckTopologyShape(const std::vector<std::vector<int>>& levels, FieldErrors* errors) {
  for (size_t i = 0; i < levels.size(); ++i) {
    if (levels[i][i] != kTopoInternal) {
      errors->Add(fmt::format("topology[{}][{}]", i, i), "a GPU with itself must be X");
    }
    for (size_t j = 0; j < i; ++j) {
      if (levels[i][j] != levels[j][i]) {
        errors->Add(fmt::format("topology[{}][{}]", i, j),
                    fmt::format("must equal topology[{}][{}]: both describe the same pair", j, i));
      }
    }
  }
}

// Optional "topology": one row per GPU, as `nvidia-smi topo -m` prints it.
std::vector<std::vector<int>> ParseTopology(const json& root, size_t n, FieldErrors* errors) {
  const json* topology = Find(root, "topology");
  if (topology == nullptr) return {};
  if (!topology->is_array() || topology->size() != n) {
    errors->Add("topology", fmt::format("must be {} rows (one per GPU) of {} levels each", n, n));
    return {};
  }
  std::vector<std::vector<int>> levels(n, std::vector<int>(n, kTopoInternal));
  size_t before = errors->size();
  for (size_t i = 0; i < n; ++i) ParseTopologyRow((*topology)[i], i, n, &levels[i], errors);
  if (errors->size() == before) CheckTopologyShape(levels, errors);
  return levels;
}

void CheckUniqueUuids(const std::vector<GpuInfo>& gpus, FieldErrors* errors) {
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (!gpus[i].uuid.empty() && gpus[i].uuid == gpus[j].uuid) {
        errors->Add(fmt::format("gpus[{}].uuid", i),
                    fmt::format("'{}' is also the uuid of gpus[{}]", gpus[i].uuid, j));
      }
    }
  }
}

fs::path ParseUsageDir(const json& root, const std::string& path, FieldErrors* errors) {
  fs::path dir = kDefaultUsageDir;
  if (const json* value = Find(root, "usage_dir")) {
    if (value->is_string() && !value->get<std::string>().empty()) {
      dir = value->get<std::string>();
    } else {
      errors->Add("usage_dir", "must be a non-empty string (a directory)");
    }
  }
  return fs::path(path).parent_path() / dir;  // an absolute `dir` stays as it is
}

Result<SimulatedConfig> LoadConfig(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return Status::Invalid("cannot read simulated GPU file " + text.status().message());
  }
  json root = json::parse(*text, nullptr, false);
  FieldErrors errors;
  if (root.is_discarded() || !root.is_object()) {
    errors.Add("(file)", "is not a JSON object");
    return errors.ToStatus(path);
  }
  SimulatedConfig config;
  const json* gpus = Find(root, "gpus");
  if (gpus == nullptr || !gpus->is_array()) errors.Add("gpus", "must be an array of GPUs");
  for (size_t i = 0; gpus != nullptr && gpus->is_array() && i < gpus->size(); ++i) {
    config.gpus.push_back(ParseGpu((*gpus)[i], i, &errors));
  }
  CheckUniqueUuids(config.gpus, &errors);
  config.topology = ParseTopology(root, config.gpus.size(), &errors);
  config.usage_dir = ParseUsageDir(root, path, &errors);
  if (!errors.empty()) return errors.ToStatus(path);
  return config;
}

// Alive: signalable (EPERM: someone else's, still alive) and not a zombie.
bool PidLive(int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  auto stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return false;     // gone between the two looks
  size_t paren = stat->rfind(')');  // the command name may itself hold ')'
  if (paren == std::string::npos || paren + 2 >= stat->size()) return false;
  char state = (*stat)[paren + 2];
  return state != 'Z' && state != 'X';
}

GpuInfo* FindGpu(const json& key, std::vector<GpuInfo>* gpus) {
  for (GpuInfo& gpu : *gpus) {
    if (key.is_string() && gpu.uuid == key.get<std::string>()) return &gpu;
    if (key.is_number_unsigned() && key.get<uint64_t>() == static_cast<uint64_t>(gpu.index)) {
      return &gpu;
    }
  }
  return nullptr;
}

// One usage file. A job may be writing it right now, so anything wrong with it (half
// written, unknown GPU) skips it instead of failing the sample.
void ApplyUsageFile(const fs::path& file, std::vector<GpuInfo>* gpus) {
  auto text = ReadFile(file.string());
  if (!text.ok()) return;
  json usage = json::parse(*text, nullptr, false);
  if (usage.is_discarded() || !usage.is_object()) return;
  const json* pid = Find(usage, "pid");
  const json* gpu_key = Find(usage, "gpu");
  const json* bytes = Find(usage, "bytes");
  if (pid == nullptr || gpu_key == nullptr || bytes == nullptr) return;
  FieldErrors ignored;
  auto p = ParsePid(*pid, "pid", &ignored);
  auto b = ParseBytes(*bytes, "bytes", true, &ignored);
  GpuInfo* gpu = FindGpu(*gpu_key, gpus);
  if (!p || !b || gpu == nullptr || !PidLive(*p)) return;
  AddProcess(gpu, *p, *b);
}

void ApplyUsage(const fs::path& dir, std::vector<GpuInfo>* gpus) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".json") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());  // a stable process order from sample to sample
  for (const fs::path& file : files) ApplyUsageFile(file, gpus);
}

class SimulatedProbe final : public GpuProbe {
 public:
  explicit SimulatedProbe(std::string path) : path_(std::move(path)) {}

  Result<GpuSnapshot> Sample() override {
    auto config = LoadConfig(path_);
    if (!config.ok()) return config.status();
    ApplyUsage(config->usage_dir, &config->gpus);
    GpuSnapshot snapshot;
    snapshot.source = "simulated";
    for (GpuInfo& gpu : config->gpus) {
      // Simulated jobs may claim more than is there; a real GPU never reports it.
      gpu.used_bytes = std::min(gpu.used_bytes, gpu.total_bytes);
      gpu.free_bytes = gpu.total_bytes - gpu.used_bytes;
      snapshot.gpus.push_back(std::move(gpu));
    }
    snapshot.topology = std::move(config->topology);
    return snapshot;
  }

  std::string Describe() const override { return "simulated GPUs from " + path_; }

 private:
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<GpuProbe>> OpenSimulatedProbe(const std::string& path) {
  auto probe = std::make_unique<SimulatedProbe>(path);
  auto first = probe->Sample();  // a bad file is the user's error now, not at the first job
  if (!first.ok()) return first.status();
  return std::unique_ptr<GpuProbe>(std::move(probe));
}

}  // namespace trainq
