/* A fake libnvidia-ml.so.1: the slice of NVML that trainq calls, with the real ABI, so the
 * real loader (src/os/gpu/nvml_probe.cc) runs on machines without a GPU.
 *
 * Its GPUs come from environment variables, read when nvmlInit takes the library from
 * uninitialised to initialised:
 *   FAKE_NVML_GPUS=2               device count (default 1, at most 16)
 *   FAKE_NVML_TOTAL_MIB=81920      total memory; a comma list gives one value per GPU and
 *   FAKE_NVML_USED_MIB=1024,0        the last value repeats (default 81920 / 0 / 0).
 *   FAKE_NVML_RESERVED_MIB=512       USED is allocated memory; RESERVED the driver's share:
 *                                    nvmlMemory_t.used = USED + RESERVED, as in NVML.
 *   FAKE_NVML_UTIL=37              utilisation percent for every GPU; "na": not supported
 *   FAKE_NVML_NAME=...             product name (default "NVIDIA A100-SXM4-80GB")
 *   FAKE_NVML_DRIVER=535.104.05    driver version
 *   FAKE_NVML_PROCS=pid:mib,...    compute processes; "pid:na" reports usedGpuMemory as
 *                                  NVML_VALUE_NOT_AVAILABLE; a suffix "@N" puts it on GPU N
 *                                  (default 0). Memory of processes is not added to USED.
 *   FAKE_NVML_PROCS_LATE=pid:mib   like PROCS, but each appears only after the library
 *                                  answered INSUFFICIENT_SIZE for its GPU once: a process
 *                                  starting between the count query and the list query.
 *   FAKE_NVML_INIT_ERROR=9         nvmlInit returns this code
 *   FAKE_NVML_LOST_GPU=1           memory queries of this GPU return GPU_IS_LOST
 *   FAKE_NVML_TOPO=0,10,10,0       common-ancestor level of every pair, row by row (N*N
 *                                  values; the last repeats); default 50 (SYSTEM) between
 *                                  two GPUs, 0 for a GPU with itself
 *   FAKE_NVML_TOPO_ERROR=3         nvmlDeviceGetTopologyCommonAncestor returns this code
 * UUIDs are GPU-00000000-0000-0000-0000-0000000000NN with NN the index.
 *
 * Functions check what the real library checks where a caller's bug would show: calls
 * before init fail with UNINITIALIZED, short buffers with INSUFFICIENT_SIZE, and the
 * nvmlMemory_v2_t version field must be right. Three extra exports, fake_nvml_init_count,
 * fake_nvml_insufficient_size_answers and fake_nvml_topology_queries, let tests see how
 * the library was used. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999
};

#define NVML_VALUE_NOT_AVAILABLE ULLONG_MAX
#define MIB (1024ULL * 1024ULL)
#define MAX_GPUS 16
#define MAX_PROCS 64

struct fake_device {
  unsigned int index;
};
typedef struct fake_device* nvmlDevice_t;

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

struct fake_proc {
  unsigned int pid;
  unsigned long long bytes;
  unsigned int gpu;
  int late;
};

static int g_init_count;
static int g_insufficient_answers;
static int g_topology_queries;
static unsigned int g_gpus;
static struct fake_device g_devices[MAX_GPUS];
static unsigned long long g_total[MAX_GPUS], g_used[MAX_GPUS], g_reserved[MAX_GPUS];
static int g_util; /* -1: not supported */
static int g_lost_gpu;
static int g_late_shown[MAX_GPUS];
static struct fake_proc g_procs[MAX_PROCS];
static unsigned int g_nprocs;

static const char* env_or(const char* name, const char* fallback) {
  const char* v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : fallback;
}

/* The index-th value of a comma list; the last one repeats. */
static unsigned long long list_value(const char* list, unsigned int index) {
  unsigned long long value = 0;
  const char* p = list;
  for (unsigned int i = 0; i <= index && p != NULL; ++i) {
    value = strtoull(p, NULL, 10);
    p = strchr(p, ',');
    if (p != NULL) ++p;
  }
  return value;
}

static void parse_procs(const char* list, int late) {
  const char* p = list;
  while (p != NULL && *p != '\0' && g_nprocs < MAX_PROCS) {
    struct fake_proc* proc = &g_procs[g_nprocs];
    char* end = NULL;
    proc->pid = (unsigned int)strtoul(p, &end, 10);
    proc->late = late;
    proc->gpu = 0;
    if (*end == ':') ++end;
    if (strncmp(end, "na", 2) == 0) {
      proc->bytes = NVML_VALUE_NOT_AVAILABLE;
      end += 2;
    } else {
      proc->bytes = strtoull(end, &end, 10) * MIB;
    }
    if (*end == '@') proc->gpu = (unsigned int)strtoul(end + 1, &end, 10);
    ++g_nprocs;
    p = strchr(end, ',');
    if (p != NULL) ++p;
  }
}

static void load_config(void) {
  g_gpus = (unsigned int)strtoul(env_or("FAKE_NVML_GPUS", "1"), NULL, 10);
  if (g_gpus > MAX_GPUS) g_gpus = MAX_GPUS;
  for (unsigned int i = 0; i < MAX_GPUS; ++i) {
    g_devices[i].index = i;
    g_total[i] = list_value(env_or("FAKE_NVML_TOTAL_MIB", "81920"), i) * MIB;
    g_used[i] = list_value(env_or("FAKE_NVML_USED_MIB", "0"), i) * MIB;
    g_reserved[i] = list_value(env_or("FAKE_NVML_RESERVED_MIB", "0"), i) * MIB;
    g_late_shown[i] = 0;
  }
  const char* util = env_or("FAKE_NVML_UTIL", "0");
  g_util = strcmp(util, "na") == 0 ? -1 : atoi(util);
  g_lost_gpu = atoi(env_or("FAKE_NVML_LOST_GPU", "-1"));
  g_nprocs = 0;
  g_insufficient_answers = 0;
  g_topology_queries = 0;
  parse_procs(env_or("FAKE_NVML_PROCS", ""), 0);
  parse_procs(env_or("FAKE_NVML_PROCS_LATE", ""), 1);
}

static nvmlReturn_t check_device(nvmlDevice_t device) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL || device < g_devices || device >= g_devices + g_gpus) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char* s, char* out, unsigned int length) {
  if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(s) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, s, strlen(s) + 1);
  return NVML_SUCCESS;
}

/* ---- test helpers (not NVML) ---- */
int fake_nvml_init_count(void) { return g_init_count; }
int fake_nvml_insufficient_size_answers(void) { return g_insufficient_answers; }
int fake_nvml_topology_queries(void) { return g_topology_queries; }

/* ---- init and system ---- */
nvmlReturn_t nvmlInit_v2(void) {
  int code = atoi(env_or("FAKE_NVML_INIT_ERROR", "0"));
  if (code != 0) return code;
  if (g_init_count++ == 0) load_config();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

nvmlReturn_t nvmlShutdown(void) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --g_init_count;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  return copy_string(env_or("FAKE_NVML_DRIVER", "535.104.05"), version, length);
}

/* ---- devices ---- */
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *count = g_gpus;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL || index >= g_gpus) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  nvmlReturn_t r = check_device(device);
  if (r != NVML_SUCCESS) return r;
  char text[64];
  snprintf(text, sizeof(text), "GPU-00000000-0000-0000-0000-%012u", device->index);
  return copy_string(text, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  nvmlReturn_t r = check_device(device);
  if (r != NVML_SUCCESS) return r;
  return copy_string(env_or("FAKE_NVML_NAME", "NVIDIA A100-SXM4-80GB"), name, length);
}

static nvmlReturn_t check_memory_query(nvmlDevice_t device, const void* out) {
  nvmlReturn_t r = check_device(device);
  if (r != NVML_SUCCESS) return r;
  if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if ((int)device->index == g_lost_gpu) return NVML_ERROR_GPU_IS_LOST;
  return NVML_SUCCESS;
}

static unsigned long long free_of(unsigned int i) {
  unsigned long long in_use = g_used[i] + g_reserved[i];
  return in_use < g_total[i] ? g_total[i] - in_use : 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  nvmlReturn_t r = check_memory_query(device, memory);
  if (r != NVML_SUCCESS) return r;
  unsigned int i = device->index;
  memory->total = g_total[i];
  memory->used = g_used[i] + g_reserved[i];
  memory->free = free_of(i);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  nvmlReturn_t r = check_memory_query(device, memory);
  if (r != NVML_SUCCESS) return r;
  if (memory->version != NVML_MEMORY_V2_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  unsigned int i = device->index;
  memory->total = g_total[i];
  memory->reserved = g_reserved[i];
  memory->used = g_used[i];
  memory->free = free_of(i);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  nvmlReturn_t r = check_device(device);
  if (r != NVML_SUCCESS) return r;
  if (util == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (g_util < 0) return NVML_ERROR_NOT_SUPPORTED;
  util->gpu = (unsigned int)g_util;
  util->memory = (unsigned int)g_util / 2;
  return NVML_SUCCESS;
}

/* ---- compute processes ---- */
static int proc_visible(const struct fake_proc* p, unsigned int gpu) {
  return p->gpu == gpu && (!p->late || g_late_shown[gpu]);
}

static unsigned int visible_count(unsigned int gpu) {
  unsigned int n = 0;
  for (unsigned int i = 0; i < g_nprocs; ++i) n += (unsigned int)proc_visible(&g_procs[i], gpu);
  return n;
}

/* The shared protocol: *count in = capacity, out = entries written or needed. Fills
 * through `store` so one body serves both struct layouts. */
static nvmlReturn_t list_processes(nvmlDevice_t device, unsigned int* count, void* infos,
                                   void (*store)(void*, unsigned int, const struct fake_proc*)) {
  nvmlReturn_t r = check_device(device);
  if (r != NVML_SUCCESS) return r;
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int gpu = device->index;
  unsigned int needed = visible_count(gpu);
  if (*count < needed) {
    *count = needed;
    ++g_insufficient_answers;
    g_late_shown[gpu] = 1;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (needed > 0 && infos == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int n = 0;
  for (unsigned int i = 0; i < g_nprocs; ++i) {
    if (proc_visible(&g_procs[i], gpu)) store(infos, n++, &g_procs[i]);
  }
  *count = n;
  return NVML_SUCCESS;
}

static void store_v1(void* infos, unsigned int i, const struct fake_proc* p) {
  nvmlProcessInfo_v1_t* out = (nvmlProcessInfo_v1_t*)infos + i;
  out->pid = p->pid;
  out->usedGpuMemory = p->bytes;
}

static void store_v2(void* infos, unsigned int i, const struct fake_proc* p) {
  nvmlProcessInfo_t* out = (nvmlProcessInfo_t*)infos + i;
  out->pid = p->pid;
  out->usedGpuMemory = p->bytes;
  out->gpuInstanceId = 0xFFFFFFFFu;
  out->computeInstanceId = 0xFFFFFFFFu;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return list_processes(device, count, infos, store_v2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return list_processes(device, count, infos, store_v2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  nvmlProcessInfo_v1_t* infos) {
  return list_processes(device, count, infos, store_v1);
}

/* ---- topology ---- */
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 int* path_info) {
  nvmlReturn_t r = check_device(device1);
  if (r == NVML_SUCCESS) r = check_device(device2);
  if (r != NVML_SUCCESS) return r;
  if (path_info == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  ++g_topology_queries;
  int code = atoi(env_or("FAKE_NVML_TOPO_ERROR", "0"));
  if (code != 0) return code;
  const char* topo = getenv("FAKE_NVML_TOPO");
  if (topo != NULL && topo[0] != '\0') {
    *path_info = (int)list_value(topo, device1->index * g_gpus + device2->index);
  } else {
    *path_info = device1 == device2 ? 0 : 50;
  }
  return NVML_SUCCESS;
}
