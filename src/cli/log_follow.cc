#include "src/cli/log_follow.h"

#include <algorithm>
#include <vector>

#include "src/os/fd.h"
#include "src/os/log_writer.h"
#include "src/os/system.h"

namespace trainq {
namespace {

constexpr size_t kLastBytes = 256;

// `length` bytes at `offset`, fewer at the end of the file.
std::string ReadBytes(int fd, uint64_t offset, size_t length) {
  std::string out(length, '\0');
  Result<size_t> n = trainq::ReadAt(fd, offset, out);
  out.resize(n.ok() ? *n : 0);
  return out;
}

class File : public LogSource {
 public:
  explicit File(std::string path) : path_(std::move(path)) {}
  std::optional<uint64_t> Size() override {
    Result<UniqueFd> fd = OpenToRead(path_);
    fd_ = fd.ok() ? std::move(*fd) : UniqueFd();
    return fd_.valid() ? FdSize(fd_.get()) : std::nullopt;
  }
  std::string ReadAt(uint64_t offset, size_t length) override {
    return ReadBytes(fd_.get(), offset, length);
  }

 private:
  std::string path_;
  UniqueFd fd_;
};

}  // namespace

std::unique_ptr<LogSource> FileLogSource(std::string path) {
  return std::make_unique<File>(std::move(path));
}

void LogFollower::Poll(std::FILE* out) {
  std::optional<uint64_t> size = source_->Size();
  if (!size) return;
  if (Rewritten(*size)) Restart(*size);
  Copy(*size, out);
}

bool LogFollower::Rewritten(uint64_t size) const {
  if (size < offset_) return true;
  if (marker_at_ && source_->ReadAt(*marker_at_, marker_.size()) != marker_) return true;
  return source_->ReadAt(offset_ - last_.size(), last_.size()) != last_;
}

// From the marker on, or from the start when there is none (the file was replaced).
void LogFollower::Restart(uint64_t size) {
  offset_ = 0;
  carry_.clear();
  last_.clear();
  marker_.clear();
  // The head is never rewritten: a marker seen once stays where it was.
  if (marker_at_ && FindLogMarker(source_->ReadAt(*marker_at_, LogWriter::kMarkerKeyBytes)) == 0) {
    offset_ = *marker_at_;
    return;
  }
  marker_at_.reset();
  std::string text = source_->ReadAt(0, static_cast<size_t>(size));
  if (size_t at = FindLogMarker(text); at != std::string::npos) offset_ = at;
}

void LogFollower::Copy(uint64_t size, std::FILE* out) {
  constexpr uint64_t kChunk = 1 << 20;
  while (offset_ < size) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, size - offset_));
    std::string bytes = source_->ReadAt(offset_, want);
    if (bytes.empty()) break;
    std::string_view chunk(bytes);
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
  if (marker_at_ && marker_.empty()) {
    marker_ = source_->ReadAt(*marker_at_, LogWriter::kMarkerKeyBytes);
  }
}

void LogFollower::SkipToLastLines(size_t lines) {
  std::optional<uint64_t> size = source_->Size();
  if (!size || *size == 0) return;
  constexpr uint64_t kChunk = 64 * 1024;
  uint64_t start = lines == 0 ? *size : 0;  // 0: the whole log has no more lines than asked
  size_t seen = 0;
  for (uint64_t pos = *size; pos > 0 && start == 0;) {
    uint64_t from = pos - std::min(kChunk, pos);
    std::string chunk = source_->ReadAt(from, static_cast<size_t>(pos - from));
    if (chunk.empty()) break;
    for (size_t i = chunk.size(); i-- > 0;) {
      uint64_t at = from + i;
      if (chunk[i] != '\n' || at + 1 == *size) continue;
      if (++seen == lines) {
        start = at + 1;
        break;
      }
    }
    pos = from;
  }
  if (start == 0) return;
  offset_ = start;
  carry_.clear();
  last_ = source_->ReadAt(start - std::min<uint64_t>(start, kLastBytes),
                          static_cast<size_t>(std::min<uint64_t>(start, kLastBytes)));
}

void LogFollower::Remember(std::string_view printed) {
  last_ += printed;
  if (last_.size() > kLastBytes) last_.erase(0, last_.size() - kLastBytes);
}

}  // namespace trainq
