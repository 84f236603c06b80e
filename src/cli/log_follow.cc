#include "src/cli/log_follow.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "src/os/fd.h"
#include "src/os/log_writer.h"

namespace trainq {
namespace {

constexpr size_t kLastBytes = 256;

// `length` bytes at `offset`, fewer at the end of the file.
std::string ReadAt(int fd, uint64_t offset, size_t length) {
  std::string out(length, '\0');
  ssize_t n = ::pread(fd, out.data(), length, static_cast<off_t>(offset));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace

void LogFollower::Poll(std::FILE* out) {
  UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st = {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (Rewritten(fd.get(), size)) Restart(fd.get(), size);
  Copy(fd.get(), size, out);
}

bool LogFollower::Rewritten(int fd, uint64_t size) const {
  if (size < offset_) return true;
  if (marker_at_ && ReadAt(fd, *marker_at_, marker_.size()) != marker_) return true;
  return ReadAt(fd, offset_ - last_.size(), last_.size()) != last_;
}

// From the marker on, or from the start when there is none (the file was replaced).
void LogFollower::Restart(int fd, uint64_t size) {
  offset_ = 0;
  carry_.clear();
  last_.clear();
  marker_.clear();
  // The head is never rewritten: a marker seen once stays where it was.
  if (marker_at_ && FindLogMarker(ReadAt(fd, *marker_at_, LogWriter::kMarkerKeyBytes)) == 0) {
    offset_ = *marker_at_;
    return;
  }
  marker_at_.reset();
  std::string text = ReadAt(fd, 0, static_cast<size_t>(size));
  if (size_t at = FindLogMarker(text); at != std::string::npos) offset_ = at;
}

void LogFollower::Copy(int fd, uint64_t size, std::FILE* out) {
  std::vector<char> buffer(64 * 1024);
  while (offset_ < size) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - offset_));
    ssize_t n = ::pread(fd, buffer.data(), want, static_cast<off_t>(offset_));
    if (n <= 0) break;
    std::string_view chunk(buffer.data(), static_cast<size_t>(n));
    std::fwrite(chunk.data(), 1, chunk.size(), out);
    if (!marker_at_) {
      std::string window = carry_ + std::string(chunk);
      if (size_t at = FindLogMarker(window); at != std::string::npos) {
        marker_at_ = offset_ - carry_.size() + at;
      }
      carry_ = window.substr(window.size() - std::min(window.size(), LogWriter::kMarkerKeyBytes));
    }
    offset_ += chunk.size();
    Remember(chunk);
  }
  std::fflush(out);
  if (marker_at_ && marker_.empty()) marker_ = ReadAt(fd, *marker_at_, LogWriter::kMarkerKeyBytes);
}

void LogFollower::Remember(std::string_view printed) {
  last_ += printed;
  if (last_.size() > kLastBytes) last_.erase(0, last_.size() - kLastBytes);
}

}  // namespace trainq
