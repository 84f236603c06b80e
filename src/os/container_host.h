// What a node runs container jobs with (docs/containers.md): the runtime program, and how an
// image archive is read. OS touches only; the command line is src/core/container.h's.
#pragma once

#include <string>

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
Result<std::string> ImageArchiveTransport(const std::string& path);

}  // namespace trainq
