// The NVML probe: libnvidia-ml.so.1 loaded with dlopen, so one trainq binary runs on
// machines with and without an NVIDIA driver.
#include <dlfcn.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "src/os/gpu/gpu_probe.h"
#include "src/os/gpu/nvml_api.h"

namespace trainq {

namespace {

struct DlCloser {
  void operator()(void* handle) const { dlclose(handle); }
};
using LibraryHandle = std::unique_ptr<void, DlCloser>;

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

// The entry points we call. Optional ones may be null; of each versioned family the
// newest the library has is used.
struct NvmlApi {
  nvml::InitFn init = nullptr;
  nvml::ShutdownFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;
  nvml::DriverVersionFn driver_version = nullptr;
  nvml::DeviceCountFn device_count = nullptr;
  nvml::HandleByIndexFn handle_by_index = nullptr;
  nvml::DeviceStringFn uuid = nullptr;
  nvml::DeviceStringFn name = nullptr;
  nvml::MemoryV2Fn memory_v2 = nullptr;  // one of memory_v2 and memory is set
  nvml::MemoryFn memory = nullptr;
  nvml::UtilizationFn utilization = nullptr;          // optional
  nvml::ProcessesV2Fn processes_v2 = nullptr;         // _v3 or _v2; optional
  nvml::ProcessesV1Fn processes_v1 = nullptr;         // used when processes_v2 is null; optional
  nvml::TopologyCommonAncestorFn topology = nullptr;  // optional (absent on some platforms)
};

class SymbolResolver {
 public:
  SymbolResolver(void* handle, const SymbolLookup& lookup) : handle_(handle), lookup_(lookup) {}

  // The first of `names` the library has, or null.
  template <class Fn>
  Fn Find(std::initializer_list<const char*> names) const {
    for (const char* name : names) {
      if (void* p = lookup_(handle_, name)) return reinterpret_cast<Fn>(p);
    }
    return nullptr;
  }

  // Like Find, but an absent symbol is remembered for the error.
  template <class Fn>
  void Require(Fn* out, std::initializer_list<const char*> names) {
    *out = Find<Fn>(names);
    if (*out == nullptr) missing_.push_back(fmt::format("{}", fmt::join(names, " or ")));
  }

  void Missing(std::string what) { missing_.push_back(std::move(what)); }

  Status Check(const std::string& library) const {
    if (missing_.empty()) return Status::Ok();
    return Status::Unavailable(fmt::format("NVML library {} lacks required symbol(s): {}", library,
                                           fmt::join(missing_, ", ")));
  }

 private:
  void* handle_;
  const SymbolLookup& lookup_;
  std::vector<std::string> missing_;
};

Result<NvmlApi> ResolveApi(void* handle, const SymbolLookup& lookup, const std::string& library) {
  SymbolResolver r(handle, lookup);
  NvmlApi api;
  r.Require(&api.init, {"nvmlInit_v2", "nvmlInit"});
  r.Require(&api.shutdown, {"nvmlShutdown"});
  r.Require(&api.error_string, {"nvmlErrorString"});
  r.Require(&api.driver_version, {"nvmlSystemGetDriverVersion"});
  r.Require(&api.device_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  r.Require(&api.handle_by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  r.Require(&api.uuid, {"nvmlDeviceGetUUID"});
  r.Require(&api.name, {"nvmlDeviceGetName"});
  api.memory_v2 = r.Find<nvml::MemoryV2Fn>({"nvmlDeviceGetMemoryInfo_v2"});
  if (api.memory_v2 == nullptr) r.Require(&api.memory, {"nvmlDeviceGetMemoryInfo"});
  api.utilization = r.Find<nvml::UtilizationFn>({"nvmlDeviceGetUtilizationRates"});
  // _v3 and _v2 take the same struct; they differ in what the driver fills in.
  api.processes_v2 = r.Find<nvml::ProcessesV2Fn>(
      {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  if (api.processes_v2 == nullptr) {
    api.processes_v1 = r.Find<nvml::ProcessesV1Fn>({"nvmlDeviceGetComputeRunningProcesses"});
  }
  api.topology = r.Find<nvml::TopologyCommonAncestorFn>({"nvmlDeviceGetTopologyCommonAncestor"});
  TRAINQ_RETURN_IF_ERROR(r.Check(library));
  return api;
}

// The one mapping from NVML error codes to ours.
Status NvmlError(const NvmlApi& api, std::string_view call, nvml::Return code) {
  const char* text = api.error_string(code);
  std::string message =
      fmt::format("{}: {} (NVML error {})", call, text != nullptr ? text : "unknown error", code);
  if (code == nvml::kErrorInvalidArgument || code == nvml::kErrorArgumentVersionMismatch) {
    return Status::Internal(std::move(message));  // we called it wrongly
  }
  return Status::Unavailable(std::move(message));
}

// Calls the two-step protocol of the process queries: a count query, then the list; a
// process that starts between the two calls makes the second one too small, so retry.
template <class Info, class Fn>
bool QueryProcesses(Fn fn, nvml::Device device, GpuInfo* gpu) {
  constexpr int kMaxTries = 4;
  std::vector<Info> infos;
  unsigned int count = 0;
  nvml::Return r = fn(device, &count, nullptr);
  for (int tries = 0; r == nvml::kErrorInsufficientSize && tries < kMaxTries; ++tries) {
    infos.resize(count);
    count = static_cast<unsigned int>(infos.size());
    r = fn(device, &count, infos.data());
  }
  if (r != nvml::kSuccess) return false;
  infos.resize(std::min<size_t>(count, infos.size()));
  gpu->processes_known = true;
  for (const Info& info : infos) {
    bool known = info.used_gpu_memory != nvml::kValueNotAvailable;
    // A process whose usage the driver cannot tell makes the per-process figures of
    // this GPU incomplete; it is still listed so its owner can be found.
    if (!known) gpu->processes_known = false;
    gpu->processes.push_back({info.pid, known ? info.used_gpu_memory : 0});
  }
  return true;
}

class NvmlProbe final : public GpuProbe {
 public:
  NvmlProbe(LibraryHandle library, NvmlApi api) : library_(std::move(library)), api_(api) {}
  ~NvmlProbe() override {
    if (initialized_) api_.shutdown();
  }
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  Status Init();
  Result<GpuSnapshot> Sample() override;
  std::string Describe() const override {
    return fmt::format("NVML (driver {}), {} GPU{}", driver_, gpus_at_open_,
                       gpus_at_open_ == 1 ? "" : "s");
  }

 private:
  Result<GpuInfo> SampleDevice(unsigned int index) const;
  Result<std::string> ReadString(nvml::DeviceStringFn fn, std::string_view call,
                                 nvml::Device device, unsigned int size) const;
  Status ReadMemory(nvml::Device device, GpuInfo* gpu) const;
  int ReadUtilization(nvml::Device device) const;
  void ReadProcesses(nvml::Device device, GpuInfo* gpu) const;
  std::vector<std::vector<int>> ReadTopology(unsigned int count) const;

  LibraryHandle library_;  // first member: closed after shutdown
  NvmlApi api_;
  bool initialized_ = false;
  std::string driver_;
  unsigned int gpus_at_open_ = 0;
  // The topology does not change while the GPUs stay the same: read once per GPU count.
  std::optional<std::vector<std::vector<int>>> topology_;
  unsigned int topology_count_ = 0;
};

Status NvmlProbe::Init() {
  nvml::Return r = api_.init();
  if (r != nvml::kSuccess) {
    return Status::Unavailable(NvmlError(api_, "nvmlInit", r).message());
  }
  initialized_ = true;
  char version[nvml::kDriverVersionBufferSize] = {};
  r = api_.driver_version(version, sizeof(version));
  if (r != nvml::kSuccess) return NvmlError(api_, "nvmlSystemGetDriverVersion", r);
  version[sizeof(version) - 1] = '\0';
  driver_ = version;
  r = api_.device_count(&gpus_at_open_);
  if (r != nvml::kSuccess) return NvmlError(api_, "nvmlDeviceGetCount", r);
  return Status::Ok();
}

Result<GpuSnapshot> NvmlProbe::Sample() {
  unsigned int count = 0;
  nvml::Return r = api_.device_count(&count);
  if (r != nvml::kSuccess) return NvmlError(api_, "nvmlDeviceGetCount", r);
  GpuSnapshot snapshot;
  snapshot.source = "nvml";
  for (unsigned int i = 0; i < count; ++i) {
    auto gpu = SampleDevice(i);
    if (!gpu.ok()) return gpu.status();
    snapshot.gpus.push_back(std::move(gpu).value());
  }
  if (!topology_ || topology_count_ != count) {
    topology_ = ReadTopology(count);
    topology_count_ = count;
  }
  snapshot.topology = *topology_;
  return snapshot;
}

// Any pair NVML cannot tell (not supported, no permission) makes the whole matrix unknown:
// the policy then treats every pair alike, rather than trusting half a picture.
std::vector<std::vector<int>> NvmlProbe::ReadTopology(unsigned int count) const {
  if (api_.topology == nullptr || count == 0) return {};
  std::vector<nvml::Device> devices(count, nullptr);
  for (unsigned int i = 0; i < count; ++i) {
    if (api_.handle_by_index(i, &devices[i]) != nvml::kSuccess) return {};
  }
  std::vector<std::vector<int>> levels(count, std::vector<int>(count, kTopoInternal));
  for (unsigned int i = 0; i < count; ++i) {
    for (unsigned int j = i + 1; j < count; ++j) {
      int level = -1;
      if (api_.topology(devices[i], devices[j], &level) != nvml::kSuccess) return {};
      if (!TopologyLevelFromName(std::to_string(level))) return {};  // a level we do not know
      levels[i][j] = levels[j][i] = level;
    }
  }
  return levels;
}

Result<GpuInfo> NvmlProbe::SampleDevice(unsigned int index) const {
  nvml::Device device = nullptr;
  nvml::Return r = api_.handle_by_index(index, &device);
  if (r != nvml::kSuccess) {
    return NvmlError(api_, fmt::format("nvmlDeviceGetHandleByIndex({})", index), r);
  }
  GpuInfo gpu;
  gpu.index = static_cast<int>(index);
  auto uuid = ReadString(api_.uuid, "nvmlDeviceGetUUID", device, nvml::kDeviceUuidBufferSize);
  if (!uuid.ok()) return uuid.status();
  gpu.uuid = std::move(uuid).value();
  auto name = ReadString(api_.name, "nvmlDeviceGetName", device, nvml::kDeviceNameBufferSize);
  if (!name.ok()) return name.status();
  gpu.name = std::move(name).value();
  TRAINQ_RETURN_IF_ERROR(ReadMemory(device, &gpu));
  gpu.utilization_pct = ReadUtilization(device);
  ReadProcesses(device, &gpu);
  return gpu;
}

Result<std::string> NvmlProbe::ReadString(nvml::DeviceStringFn fn, std::string_view call,
                                          nvml::Device device, unsigned int size) const {
  std::vector<char> buffer(size, '\0');
  nvml::Return r = fn(device, buffer.data(), size);
  if (r != nvml::kSuccess) return NvmlError(api_, call, r);
  buffer.back() = '\0';
  return std::string(buffer.data());
}

Status NvmlProbe::ReadMemory(nvml::Device device, GpuInfo* gpu) const {
  if (api_.memory_v2 != nullptr) {
    nvml::MemoryV2 m{};
    m.version = nvml::kMemoryV2Version;
    nvml::Return r = api_.memory_v2(device, &m);
    if (r != nvml::kSuccess) return NvmlError(api_, "nvmlDeviceGetMemoryInfo_v2", r);
    // v2 keeps the driver's reservation out of `used`; ours counts everything.
    gpu->total_bytes = m.total;
    gpu->used_bytes = m.used + m.reserved;
    gpu->free_bytes = m.free;
    return Status::Ok();
  }
  nvml::Memory m{};
  nvml::Return r = api_.memory(device, &m);
  if (r != nvml::kSuccess) return NvmlError(api_, "nvmlDeviceGetMemoryInfo", r);
  gpu->total_bytes = m.total;
  gpu->used_bytes = m.used;
  gpu->free_bytes = m.free;
  return Status::Ok();
}

int NvmlProbe::ReadUtilization(nvml::Device device) const {
  if (api_.utilization == nullptr) return -1;
  nvml::Utilization u{};
  // Not supported on MIG instances and some boards: unknown, not an error.
  if (api_.utilization(device, &u) != nvml::kSuccess) return -1;
  return static_cast<int>(std::min(u.gpu, 100u));
}

void NvmlProbe::ReadProcesses(nvml::Device device, GpuInfo* gpu) const {
  // Failure (no permission, not supported) leaves processes_known false: the scheduler
  // then falls back to counting reservations in full.
  if (api_.processes_v2 != nullptr) {
    QueryProcesses<nvml::ProcessInfoV2>(api_.processes_v2, device, gpu);
  } else if (api_.processes_v1 != nullptr) {
    QueryProcesses<nvml::ProcessInfoV1>(api_.processes_v1, device, gpu);
  }
}

}  // namespace

SymbolLookup DlsymLookup() {
  return [](void* handle, const char* name) { return dlsym(handle, name); };
}

Result<std::unique_ptr<GpuProbe>> OpenNvmlProbeWithLookup(const std::string& library,
                                                          const SymbolLookup& lookup) {
  dlerror();
  LibraryHandle handle(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (handle == nullptr) {
    return Status::Unavailable(fmt::format("NVML library {} not found: {}", library, DlError()));
  }
  auto api = ResolveApi(handle.get(), lookup, library);
  if (!api.ok()) return api.status();
  auto probe = std::make_unique<NvmlProbe>(std::move(handle), *api);
  TRAINQ_RETURN_IF_ERROR(probe->Init());
  return std::unique_ptr<GpuProbe>(std::move(probe));
}

Result<std::unique_ptr<GpuProbe>> OpenNvmlProbe(const std::string& library) {
  return OpenNvmlProbeWithLookup(library, DlsymLookup());
}

}  // namespace trainq
