#include "src/os/container_host.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/os/system.h"
#include "src/os/user_file.h"

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

namespace {

// The image names an archive's index holds: docker-archive's manifest.json RepoTags, or an OCI
// index's ref.name annotations.
void AddNames(const std::string& text, bool oci, std::vector<std::string>& names) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto add = [&names](const nlohmann::json& v) {
    if (v.is_string() && !v.get<std::string>().empty()) names.push_back(v.get<std::string>());
  };
  if (!oci && doc.is_array()) {
    for (const nlohmann::json& m : doc) {
      if (!m.is_object() || !m.contains("RepoTags") || !m["RepoTags"].is_array()) continue;
      for (const nlohmann::json& tag : m["RepoTags"]) add(tag);
    }
  } else if (oci && doc.is_object() && doc.contains("manifests") && doc["manifests"].is_array()) {
    for (const nlohmann::json& m : doc["manifests"]) {
      if (m.is_object() && m.contains("annotations") && m["annotations"].is_object()) {
        add(m["annotations"].value("org.opencontainers.image.ref.name", nlohmann::json()));
      }
    }
  }
}

}  // namespace

namespace {

// What the walk below reads at most: a tar's index files are among its first entries, and a
// docker-archive's manifest.json follows its layers (a few entries each). Bounded, so a file of
// any size, or one made of endless tiny entries, costs a few MiB of reads at most.
constexpr int kMaxEntries = 4096;
constexpr uint64_t kIndexMax = 1 << 20;
constexpr uint64_t kBlock = 512;
constexpr uint64_t kMaxEntrySize = uint64_t{1} << 36;  // 12 octal digits

std::string ArchiveRefused(const std::string& problem) {
  return fmt::format(
      "--image: {}; give a `podman save`/`docker save` tar or an OCI archive (a regular file "
      "the job's user may read), or the name of an image in the node's store",
      problem);
}

// A tar is 512-byte headers, each followed by its file's blocks: the headers are read where
// they are (pread), the blocks between them skipped, and only the index files read whole.
Result<ImageArchive> WalkArchive(int fd, const std::string& path) {
  bool any = false, oci = false;
  std::string docker_index, oci_index;
  uint64_t offset = 0;
  for (int entry = 0; entry < kMaxEntries; ++entry) {
    Result<std::string> header = ReadAtMost(fd, offset, kBlock, path);
    if (!header.ok()) return Status::Invalid(ArchiveRefused(header.status().message()));
    if (header->size() < kBlock || (*header)[0] == '\0') break;  // the end-of-archive blocks
    if (header->compare(257, 5, "ustar") != 0) break;
    any = true;
    std::string name(header->data(), strnlen(header->data(), 100));
    if (name.starts_with("./")) name.erase(0, 2);
    uint64_t size = std::strtoull(header->substr(124, 12).c_str(), nullptr, 8);
    if (size >= kMaxEntrySize) break;  // not 12 octal digits ("-1" parses too)
    std::string* keep = name == "manifest.json" ? &docker_index
                        : name == "index.json"  ? &oci_index
                                                : nullptr;
    if (name == "oci-layout") oci = true;
    if (keep != nullptr && size <= kIndexMax) {
      Result<std::string> text = ReadAtMost(fd, offset + kBlock, size, path);
      if (!text.ok()) return Status::Invalid(ArchiveRefused(text.status().message()));
      *keep = std::move(*text);
    }
    offset += kBlock * (1 + (size + kBlock - 1) / kBlock);
  }
  if (!any) return Status::Invalid(ArchiveRefused(path + " is not a tar archive"));
  ImageArchive archive;
  archive.transport = oci ? "oci-archive" : "docker-archive";
  AddNames(oci ? oci_index : docker_index, oci, archive.names);
  return archive;
}

}  // namespace

Result<ImageArchive> ReadImageArchive(const std::string& path, const UserInfo* as) {
  Result<UniqueFd> fd = OpenUserFile(path, FileWant::kRegular, as);
  if (!fd.ok()) return Status::Invalid(ArchiveRefused(fd.status().message()));
  return WalkArchive(fd->get(), path);
}

Result<std::string> ImageArchiveTransport(const std::string& path, const UserInfo* as) {
  Result<ImageArchive> archive = ReadImageArchive(path, as);
  if (!archive.ok()) return archive.status();
  return archive->transport;
}

std::vector<std::string> ParseImageList(std::string_view text) {
  std::vector<std::string> names;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    std::string_view line = text.substr(start, end == std::string_view::npos ? end : end - start);
    start = end == std::string_view::npos ? text.size() : end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.find("<none>") != std::string_view::npos) continue;
    names.emplace_back(line);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

namespace {

// `runtime images`'s output, or nullopt when it could not be run or failed.
std::optional<std::string> ListImages(const std::string& runtime) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> words = {runtime, "images", "--format", "{{.Repository}}:{{.Tag}}"};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int err = ::posix_spawn(&pid, runtime.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  std::string out;
  if (err == 0) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      if (out.size() < (4u << 20)) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fds[0]);
  if (err != 0) return std::nullopt;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

}  // namespace

ImageCensus::ImageCensus(std::string runtime, std::chrono::milliseconds every)
    : runtime_(std::move(runtime)), every_(every) {
  thread_ = std::jthread([this](std::stop_token stop) {
    std::mutex wait_mu;
    std::condition_variable_any wake;
    while (!stop.stop_requested()) {
      if (std::optional<std::string> out = ListImages(runtime_)) {
        std::vector<std::string> names = ParseImageList(*out);
        std::lock_guard lock(mu_);
        names_ = std::move(names);
      }
      std::unique_lock lock(wait_mu);
      wake.wait_for(lock, stop, every_, [] { return false; });
    }
  });
}

ImageCensus::~ImageCensus() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

std::vector<std::string> ImageCensus::Names() const {
  std::lock_guard lock(mu_);
  return names_.value_or(std::vector<std::string>{});
}

std::optional<std::vector<std::string>> ImageCensus::Listing() const {
  std::lock_guard lock(mu_);
  return names_;
}

}  // namespace trainq
