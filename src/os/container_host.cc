#include "src/os/container_host.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/os/fd.h"
#include "src/os/run_dir.h"
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

namespace trainq {

namespace {

// The spec's and the GPU files' names for `state_dir`'s daemon: its kind's vendor.
std::string SimulatedCdiId(const std::string& state_dir) {
  std::string kind = SimulatedCdiKind(state_dir);
  return kind.substr(0, kind.find('.'));
}

Status CannotWrite(const std::string& path, int err) {
  return Status::Unavailable(
      fmt::format("simulated GPUs in containers: cannot write {}: {} (podman reads CDI specs from "
                  "/etc/cdi and /var/run/cdi, which only root may write)",
                  path, std::strerror(err)));
}

// mkdir -p whose new directories every user may enter (their rootless podman mounts files
// below them), whatever the daemon's umask.
Status MakeOpenDirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string dir = path.substr(0, at);
    if (::mkdir(dir.c_str(), 0755) == 0) {
      if (::chmod(dir.c_str(), 0755) < 0) return CannotWrite(dir, errno);
    } else if (errno != EEXIST) {
      return CannotWrite(dir, errno);
    }
  }
  return Status::Ok();
}

// `text` at `path` with `mode`, replaced atomically; nothing written when it is there already.
Status WriteIfChanged(const std::string& path, const std::string& text, mode_t mode) {
  struct stat st = {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == mode) {
    if (Result<std::string> now = ReadFile(path); now.ok() && *now == text) return Status::Ok();
  }
  std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) return CannotWrite(tmp, errno);
  bool ok = ::fchmod(fd.get(), mode) == 0 &&
            ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  fd.Reset();
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return Status::Ok();
  err = ok ? errno : err;
  ::unlink(tmp.c_str());
  return CannotWrite(path, err);
}

}  // namespace

Result<std::string> WriteSimulatedGpuCdi(const std::string& state_dir,
                                         const std::vector<SimulatedGpu>& gpus,
                                         const SimulatedCdiPlaces& places) {
  std::string kind = SimulatedCdiKind(state_dir);
  std::string files = places.files_root + "/" + SimulatedCdiId(state_dir);
  Result<std::string> spec = SimulatedCdiSpec(kind, gpus, files);
  if (!spec.ok()) return spec.status();
  TRAINQ_RETURN_IF_ERROR(MakeOpenDirs(files));
  TRAINQ_RETURN_IF_ERROR(
      WriteIfChanged(files + "/nvidia-smi", std::string(SimulatedNvidiaSmi()), 0755));
  std::vector<std::string> keep = {"nvidia-smi"};
  for (const SimulatedGpu& g : gpus) {
    keep.push_back(SimulatedGpuFileName(g));
    TRAINQ_RETURN_IF_ERROR(
        WriteIfChanged(files + "/" + keep.back(), SimulatedGpuFileText(g), 0644));
  }
  // A GPU the file no longer lists is no longer given.
  if (Result<std::vector<std::string>> there = ListFiles(files); there.ok()) {
    for (const std::string& name : *there) {
      if (std::find(keep.begin(), keep.end(), name) == keep.end())
        (void)RemoveFile(files + "/" + name);
    }
  }
  // The spec last: a container resolves a device only once its files are in place.
  TRAINQ_RETURN_IF_ERROR(MakeOpenDirs(places.spec_dir));
  TRAINQ_RETURN_IF_ERROR(WriteIfChanged(
      places.spec_dir + "/trainq-" + SimulatedCdiId(state_dir) + ".json", *spec, 0644));
  return kind;
}

void RemoveSimulatedGpuCdi(const std::string& state_dir, const SimulatedCdiPlaces& places) {
  std::string id = SimulatedCdiId(state_dir);
  (void)RemoveFile(places.spec_dir + "/trainq-" + id + ".json");
  std::string files = places.files_root + "/" + id;
  if (Result<std::vector<std::string>> there = ListFiles(files); there.ok()) {
    for (const std::string& name : *there) (void)RemoveFile(files + "/" + name);
  }
  ::rmdir(files.c_str());
}

bool RootlessPauseAlive(uid_t uid, const std::string& root) {
  std::string user_run = fmt::format("{}/run/user/{}", root, uid);
  struct stat st = {};
  bool own_run = ::stat(user_run.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
                 (st.st_mode & 0700) == 0700;
  std::string runtime_dir = own_run ? user_run : fmt::format("{}/tmp/podman-run-{}", root, uid);
  Result<std::string> text =
      ReadUserFile(runtime_dir + "/libpod/tmp/pause.pid", 32, /*as=*/nullptr);
  if (!text.ok()) return false;
  char* end = nullptr;
  long pid = std::strtol(text->c_str(), &end, 10);
  if (pid <= 0 || end == text->c_str()) return false;
  // Alive, the user's, and a pause process, not a pid since reused by another program.
  std::string proc = fmt::format("/proc/{}", pid);
  if (::stat(proc.c_str(), &st) != 0 || st.st_uid != uid) return false;
  Result<std::string> comm = ReadFile(proc + "/comm");
  return comm.ok() && (*comm == "catatonit\n" || *comm == "podman\n" || *comm == "podman pause\n");
}

}  // namespace trainq
