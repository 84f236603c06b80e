// Our own declarations of the slice of NVML we use (no NVIDIA headers at build time), and
// the symbol-lookup seam that lets tests hide symbols of a real library.
// Layouts follow nvml.h of driver 450+ (CUDA 11/12); sizes are checked below.
#pragma once

#include <climits>
#include <functional>
#include <memory>
#include <string>

#include "src/os/gpu/gpu_probe.h"
#include "trainq/status.h"

namespace trainq {
namespace nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorArgumentVersionMismatch = 25;

// usedGpuMemory when the driver cannot attribute memory to a process.
inline constexpr unsigned long long kValueNotAvailable = ULLONG_MAX;

// Buffer sizes NVML documents as sufficient (the _V2 sizes, the largest).
inline constexpr unsigned kDeviceUuidBufferSize = 96;
inline constexpr unsigned kDeviceNameBufferSize = 96;
inline constexpr unsigned kDriverVersionBufferSize = 80;

struct DeviceSt;  // opaque
using Device = DeviceSt*;

struct Memory {  // nvmlMemory_t: used = allocated + reserved
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct MemoryV2 {  // nvmlMemory_v2_t: used = allocated only, reserved apart
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
// NVML_STRUCT_VERSION(Memory, 2)
inline constexpr unsigned int kMemoryV2Version =
    static_cast<unsigned int>(sizeof(MemoryV2)) | (2u << 24);

struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};

struct ProcessInfoV1 {  // for nvmlDeviceGetComputeRunningProcesses
  unsigned int pid;
  unsigned long long used_gpu_memory;
};

struct ProcessInfoV2 {  // for the _v2 and _v3 entry points
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

static_assert(sizeof(Memory) == 24);
static_assert(sizeof(MemoryV2) == 40);
static_assert(sizeof(Utilization) == 8);
static_assert(sizeof(ProcessInfoV1) == 16);
static_assert(sizeof(ProcessInfoV2) == 24);

using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using DriverVersionFn = Return (*)(char*, unsigned int);
using DeviceCountFn = Return (*)(unsigned int*);
using HandleByIndexFn = Return (*)(unsigned int, Device*);
using DeviceStringFn = Return (*)(Device, char*, unsigned int);  // UUID, name
using MemoryFn = Return (*)(Device, Memory*);
using MemoryV2Fn = Return (*)(Device, MemoryV2*);
using UtilizationFn = Return (*)(Device, Utilization*);
using ProcessesV1Fn = Return (*)(Device, unsigned int*, ProcessInfoV1*);
using ProcessesV2Fn = Return (*)(Device, unsigned int*, ProcessInfoV2*);
// nvmlGpuTopologyLevel_t is a C enum: int-sized, values as kTopo* in gpu_probe.h.
using TopologyCommonAncestorFn = Return (*)(Device, Device, int*);

}  // namespace nvml

// Resolves `name` in the library `handle` came from; nullptr when absent. The default is
// dlsym. Tests wrap it to hide symbols of the real (fake) library and so drive the
// version fallbacks.
using SymbolLookup = std::function<void*(void* handle, const char* name)>;
SymbolLookup DlsymLookup();

// OpenNvmlProbe with symbols resolved through `lookup`.
Result<std::unique_ptr<GpuProbe>> OpenNvmlProbeWithLookup(const std::string& library,
                                                          const SymbolLookup& lookup);

}  // namespace trainq
