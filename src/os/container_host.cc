#include "src/os/container_host.h"

#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "src/os/system.h"

namespace trainq {

namespace {

// Where a daemon started by systemd, with a short PATH, still finds the runtimes.
Result<std::string> FindProgram(const std::string& name) {
  Result<std::string> found = FindOnPath(name);
  if (found.ok()) return found;
  for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"}) {
    if (IsExecutable(dir + name)) return dir + name;
  }
  return found.status();
}

}  // namespace

Result<ContainerRuntime> FindContainerRuntime(const std::string& setting) {
  for (const char* name : {"podman", "docker"}) {
    if (!setting.empty() && setting != name) continue;
    Result<std::string> path = FindProgram(name);
    if (path.ok()) return ContainerRuntime{*path, std::string(name) == "podman"};
  }
  return Status::Unavailable(fmt::format(
      "no container runtime on this node: {} (Debian: apt install {}), or set container_runtime",
      setting.empty() ? "install podman or docker" : "install " + setting,
      setting.empty()       ? "podman runc"
      : setting == "docker" ? "docker.io"
                            : "podman runc"));
}

Result<std::string> ImageArchiveTransport(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::Invalid(
        fmt::format("--image: cannot read the archive {}: {}", path, std::strerror(errno)));
  }
  // A tar is 512-byte headers, each followed by its file's blocks; the first few hundred
  // entries hold the layout files of both kinds.
  char header[512];
  bool any = false;
  for (int entry = 0; entry < 4096 && in.read(header, sizeof header); ++entry) {
    if (header[0] == '\0') break;  // the end-of-archive blocks
    if (std::memcmp(header + 257, "ustar", 5) != 0) break;
    any = true;
    std::string name(header, strnlen(header, 100));
    if (name.starts_with("./")) name.erase(0, 2);
    if (name == "oci-layout") return std::string("oci-archive");
    if (name == "manifest.json") return std::string("docker-archive");
    uint64_t size = std::strtoull(std::string(header + 124, 12).c_str(), nullptr, 8);
    in.seekg(static_cast<std::streamoff>((size + 511) / 512 * 512), std::ios::cur);
  }
  if (!any) {
    return Status::Invalid(fmt::format(
        "--image: {} is not a tar archive; give a `podman save`/`docker save` tar, an OCI "
        "archive, or the name of an image in the node's store",
        path));
  }
  return std::string("docker-archive");
}

}  // namespace trainq
