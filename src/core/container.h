// Jobs in containers (docs/containers.md): what --image, --mount and --shm-size accept, and
// the runtime command line an attempt becomes. Pure: the agent resolves the runtime and the
// archive's kind, the shim runs what this builds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

inline constexpr size_t kMaxImageBytes = 1024;
inline constexpr size_t kMaxMounts = 64;
inline constexpr uint64_t kMaxShmBytes = 1ull << 40;

// One --mount: SRC:DST[:ro|rw], both absolute.
struct Mount {
  std::string src;
  std::string dst;
  bool read_only = false;
};
inline constexpr std::string_view kMountForm =
    "SRC:DST or SRC:DST:ro, absolute paths without ':' or ',', like /data/imagenet:/data:ro";
// kInvalid naming `field` and kMountForm.
Result<Mount> ParseMount(std::string_view text, std::string_view field);

// Whether `image` names an archive file (an absolute path) rather than an image in the store.
bool IsImageArchive(std::string_view image);
// kInvalid naming `field` unless `image` is 1 to kMaxImageBytes printable characters with no
// space: a name like pytorch:2.1, localhost/env@sha256:..., or /abs/path/env.tar.
Status CheckImage(std::string_view image, std::string_view field);

// The container of a job as one text for the stores ("" for none) and back.
std::string ContainerToText(const ContainerSpec& c);
Result<ContainerSpec> ContainerFromText(std::string_view text);

// The NVIDIA Container Toolkit's CDI kind, config container_gpu_kind's default.
inline constexpr const char* kNvidiaCdiKind = "nvidia.com/gpu";

// The node's runtime and settings (config container_*), and what this attempt holds.
struct ContainerHost {
  std::string runtime;  // absolute path of podman or docker
  bool podman = true;   // false: docker (no archive transports)
  std::vector<std::string> runtime_args;
  std::string pull = "never";  // never | missing
  uint64_t shm_bytes = 8ull << 30;
  // CDI device kind for GPUs ("nvidia.com/gpu": --device nvidia.com/gpu=UUID); "": set
  // NVIDIA_VISIBLE_DEVICES to the UUIDs for the runtime's NVIDIA hook instead.
  std::string cdi_kind = kNvidiaCdiKind;
  // The image as the runtime reads it: the name, or TRANSPORT:PATH for an archive
  // ("docker-archive:/x.tar", "oci-archive:/x.tar").
  std::string image_ref;
  std::string name;  // the container's name: unique per attempt
};

// Whether the image a job names (`wanted`) is `held`, a name the runtime lists: the same
// once a missing tag reads ":latest", and a name without a registry matches the same path in
// any (docker.io/library/ubuntu:22.04 holds ubuntu:22.04).
bool ImageNameMatches(std::string_view wanted, std::string_view held);

// A shared daemon's refusal of docker (docs/containers.md, "On a shared server").
inline constexpr const char* kSharedNeedsPodman =
    "--image: a shared daemon runs each container as its submitter with rootless podman, and "
    "container_runtime is docker, whose daemon runs containers as root; install podman and "
    "uidmap and set container_runtime = \"podman\"";

// Why docker (which reads no archive transports) refuses `archive`.
std::string ArchiveNeedsPodman(const std::string& archive);

struct ContainerRun {
  std::vector<std::string> command;                      // the runtime's `run` line
  std::vector<std::pair<std::string, std::string>> env;  // the runtime client's environment
  std::vector<std::string> cleanup;                      // removes the container, if left
  // An interactive session's container keeps stdin open (--interactive); its shim inserts
  // "--tty" at this index of `command` when the client has a terminal (RunSpec's
  // session_tty_flag), as `podman run -it` gives one. -1: not a session.
  int64_t tty_flag_at = -1;
};

// What an attempt of `spec` runs: the runtime with the job's cwd mounted at the same path (and
// as the working dir unless the spec names one), its mounts, host networking (MASTER_ADDR and
// MASTER_PORT work across nodes), an init process that passes signals on, its GPUs by UUID
// and nothing else, and its environment (`env`: the attempt's) passed by name, less what
// names the host's software (PATH, LD_LIBRARY_PATH, ...: ContainerDropsVar);
// CUDA_VISIBLE_DEVICES counts the container's GPUs from 0.
ContainerRun BuildContainerRun(const JobSpec& spec, const std::vector<std::string>& gpu_uuids,
                               const std::vector<std::pair<std::string, std::string>>& env,
                               const ContainerHost& host);

// Whether a variable of the host's environment stays out of the container: it names the
// host's programs, libraries or directories, which the image has its own of.
bool ContainerDropsVar(std::string_view name);

// The GPU isolation probe (docs/containers.md, "GPU isolation"): `nvidia-smi -L` in a
// container given `gpu_uuids` as the job's run gives them (CDI devices or
// NVIDIA_VISIBLE_DEVICES, the same runtime options), named `host.name` + "-probe"; `image` as
// the runtime reads it.
std::vector<std::string> BuildGpuProbe(const std::string& image,
                                       const std::vector<std::string>& gpu_uuids,
                                       const ContainerHost& host);

// What the probe said, against the job's GPUs in their host order (CUDA's inside, with
// CUDA_DEVICE_ORDER=PCI_BUS_ID). `ran`: it listed GPUs, so the verdict holds for the node's
// setup; `problem` is empty when it listed exactly `expected`, in that order.
struct GpuProbeVerdict {
  bool ran = false;
  std::string problem;
};
GpuProbeVerdict JudgeGpuProbe(std::string_view output, int exit_code,
                              const std::vector<std::string>& expected);

// Simulated GPUs (docs/simulated-gpus.md) in containers: a daemon writes a CDI spec of its own
// whose devices stand in for them, so `--device KIND=UUID` resolves, the container holds
// exactly its GPUs, and the isolation probe runs for real (docs/containers.md, "Without a
// GPU").
struct SimulatedGpu {
  int index = 0;     // the host's index
  std::string uuid;  // the CDI device's name
  std::string name;  // the model, as nvidia-smi -L prints it
};

// Inside a container, one file per simulated GPU it was given, named by the GPU's host index
// (zero-padded, so a listing's order is the host's), holding "UUID NAME".
inline constexpr std::string_view kSimulatedGpusInside = "/run/trainq-gpus";

// The CDI kind of the simulated GPUs of the daemon whose state dir is `state_dir`: one kind
// per daemon, since daemons on one machine may each simulate a GPU-sim-0, and CDI drops a
// device that two specs of one directory name.
std::string SimulatedCdiKind(std::string_view state_dir);

// The file name of one GPU (in kSimulatedGpusInside and in the host's files dir), and its text.
std::string SimulatedGpuFileName(const SimulatedGpu& gpu);
std::string SimulatedGpuFileText(const SimulatedGpu& gpu);

// The stand-in for nvidia-smi that every container given a simulated GPU gets at
// /usr/bin/nvidia-smi: a /bin/sh script listing the container's GPUs as `nvidia-smi -L` does.
std::string_view SimulatedNvidiaSmi();

// The CDI spec (JSON) of `gpus` under `kind`: device UUID mounts `files_dir`/FILE (read-only)
// at kSimulatedGpusInside/FILE and sets TRAINQ_SIMULATED_GPU_<index>=UUID; a container given
// any of them gets `files_dir`/nvidia-smi at /usr/bin/nvidia-smi. kInvalid naming
// `gpus[i].uuid` for a UUID CDI cannot name a device by (letters, digits, '-', '_', '.', ':'),
// or one given twice, and `files_dir` when it is not an absolute path.
Result<std::string> SimulatedCdiSpec(std::string_view kind, const std::vector<SimulatedGpu>& gpus,
                                     std::string_view files_dir);

}  // namespace trainq
