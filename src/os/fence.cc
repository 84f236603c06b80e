// The fence stamp (src/os/fence.h). Read every few hundred milliseconds by every shim of a
// cluster node, so it is a single short line parsed without allocation-heavy machinery.
#include "src/os/fence.h"

#include <time.h>

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "src/os/run_dir.h"

namespace trainq {
namespace {

constexpr int64_t kMinCheckMs = 50;
constexpr int64_t kMaxCheckMs = 500;
constexpr size_t kBootIdLength = 36;

std::string ReadBootId() {
  auto text = ReadFile("/proc/sys/kernel/random/boot_id");
  if (!text.ok() || text->size() < kBootIdLength) return "";
  return text->substr(0, kBootIdLength);
}

}  // namespace

int64_t BootClockMs() {
  struct timespec ts = {};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);  // cannot fail for a valid clock id
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

const std::string& BootId() {
  static const std::string id = ReadBootId();
  return id;
}

Status WriteFenceStamp(const std::string& path, int64_t renewed_at_ms) {
  if (renewed_at_ms < 0) return Status::Invalid("fence stamp: negative time");
  return WriteFileAtomic(path, fmt::format("{} {}\n", renewed_at_ms, BootId()),
                         Durability::kNoSync);
}

Result<int64_t> ReadFenceStamp(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::string_view line(*text);
  int64_t ms = -1;
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), ms);
  std::string_view rest(end, line.data() + line.size() - end);
  if (ec != std::errc() || ms < 0 || !rest.starts_with(' ') || !rest.ends_with('\n')) {
    return Status::Invalid(path + ": not a fence stamp (\"BOOTTIME_MS BOOT_ID\")");
  }
  std::string_view boot = rest.substr(1, rest.size() - 2);
  if (boot != BootId()) return Status::NotFound(path + ": stamped in another boot");
  return ms;
}

int64_t FenceCheckIntervalMs(int64_t fence_after_ms) {
  return std::clamp(fence_after_ms / 10, kMinCheckMs, kMaxCheckMs);
}

}  // namespace trainq
