// What a node runs container jobs with (docs/containers.md): the runtime program, and how an
// image archive is read. OS touches only; the command line is src/core/container.h's.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "src/core/container.h"
#include "src/os/users.h"
#include "trainq/status.h"

namespace trainq {

struct ContainerRuntime {
  std::string path;  // absolute
  bool podman = true;
};

// The runtime `setting` (config container_runtime) names: "podman", "docker", or "" for podman
// where it is installed, else docker. kUnavailable saying what to install when none is found.
Result<ContainerRuntime> FindContainerRuntime(const std::string& setting);

// How the runtime reads the archive at `path`: "oci-archive" for an OCI layout (an
// `oci-layout` entry), "docker-archive" for `docker save`/`podman save` tars. kInvalid naming
// the path when it is missing or not a tar archive.
Result<std::string> ImageArchiveTransport(const std::string& path, const UserInfo* as = nullptr);

// An archive's transport (as above) and the image names it holds (docker-archive's RepoTags,
// an OCI index's ref.name annotations), which the runtime names the image by once loaded.
// Opened with OpenUserFile (as `as`, if given): a FIFO, a device, a link or a directory is
// refused at once, naming what it is. At most the first 4096 entries' headers and two index
// files of up to 1 MiB are read, whatever the archive's size, so it may be read on the loop.
// kInvalid "--image: ..." saying what is wrong and what is accepted.
struct ImageArchive {
  std::string transport;
  std::vector<std::string> names;
};
Result<ImageArchive> ReadImageArchive(const std::string& path, const UserInfo* as = nullptr);

// The image names in this node's container store ("localhost/env:3"), listed by the runtime
// (`images`) on a thread of its own every `every`, for a cluster's placement
// (docs/containers.md, "In a cluster"). Empty until the first listing answers.
class ImageCensus {
 public:
  explicit ImageCensus(std::string runtime,
                       std::chrono::milliseconds every = std::chrono::seconds(15));
  ~ImageCensus();
  ImageCensus(const ImageCensus&) = delete;
  ImageCensus& operator=(const ImageCensus&) = delete;
  std::vector<std::string> Names() const;
  // nullopt until a listing answered: "holds nothing" and "not known yet" differ.
  std::optional<std::vector<std::string>> Listing() const;

 private:
  std::string runtime_;
  std::chrono::milliseconds every_;
  mutable std::mutex mu_;
  std::optional<std::vector<std::string>> names_;
  std::jthread thread_;
};

// What `RUNTIME images` lists, one "REPOSITORY:TAG" a line, less untagged images.
std::vector<std::string> ParseImageList(std::string_view text);

// Where WriteSimulatedGpuCdi writes. podman reads CDI specs from /etc/cdi and /var/run/cdi (the
// latter for specs made at run time; podman before 4.7 knows no other), and each user's
// rootless podman mounts the GPU files, so they lie outside any daemon's private state dir.
struct SimulatedCdiPlaces {
  std::string spec_dir = "/var/run/cdi";
  std::string files_root = "/var/run/trainq-simulated-gpus";
};

// Writes the CDI spec of the simulated GPUs `gpus` of the daemon whose state dir is
// `state_dir` (src/core/container.h, SimulatedCdiSpec) and the files it mounts, readable by
// every user. What is already there as it should be is left alone, so a job's start costs a
// few reads. Returns the spec's kind (SimulatedCdiKind(state_dir)); kInvalid as
// SimulatedCdiSpec; kUnavailable naming the path when it cannot be written (a daemon that is
// not root may not write /var/run/cdi).
Result<std::string> WriteSimulatedGpuCdi(const std::string& state_dir,
                                         const std::vector<SimulatedGpu>& gpus,
                                         const SimulatedCdiPlaces& places = {});
// Removes what WriteSimulatedGpuCdi wrote for `state_dir` (a daemon's clean stop).
void RemoveSimulatedGpuCdi(const std::string& state_dir, const SimulatedCdiPlaces& places = {});

// Whether `uid`'s rootless podman already has its user-namespace holder: its pause process,
// whose pid podman keeps in RUNTIME_DIR/libpod/tmp/pause.pid, RUNTIME_DIR being /run/user/UID
// when that is the user's, else /tmp/podman-run-UID (a job's podman has no XDG_RUNTIME_DIR or
// TMPDIR: ContainerDropsVar). Then `podman unshare true` before a job has nothing to start and
// is skipped (docs/containers.md, "On a shared server"). `root` replaces "/" in both, for
// tests. Reads a few bytes, never blocks on what the user put there.
bool RootlessPauseAlive(uid_t uid, const std::string& root = "");

}  // namespace trainq
