#include "src/os/log_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include <fmt/format.h>

#include "trainq/size.h"

namespace trainq {

LogWriter::LogWriter(UniqueFd fd, uint64_t max_bytes)
    : fd_(std::move(fd)), max_(max_bytes == 0 ? 0 : std::max(max_bytes, kMinLogBytes)) {
  off_t end = ::lseek(fd_.get(), 0, SEEK_END);
  size_ = end > 0 ? static_cast<uint64_t>(end) : 0;
  if (max_ == 0) return;
  marker_ = Marker().size();  // fixed width: rewritten in place as the count grows
  head_ = max_ / 2;
  keep_ = (max_ - head_ - marker_) / 2;
}

// The count is padded to a fixed width so that the line keeps its length.
std::string LogWriter::Marker() const {
  return fmt::format(
      "{}{:>{}}{} log_max_size is {}: the first half and the latest output are "
      "kept]\n",
      kMarkerLead, dropped_, kMarkerCountWidth, kMarkerWords, FormatBytes(max_));
}

size_t FindLogMarker(std::string_view text) {
  const size_t words_at = LogWriter::kMarkerLead.size() + LogWriter::kMarkerCountWidth;
  for (size_t at = text.find(LogWriter::kMarkerLead); at != std::string_view::npos;
       at = text.find(LogWriter::kMarkerLead, at + 1)) {
    if (text.substr(at + std::min(words_at, text.size() - at), LogWriter::kMarkerWords.size()) ==
        LogWriter::kMarkerWords) {
      return at;
    }
  }
  return std::string_view::npos;
}

Status LogWriter::Append(std::string_view data) {
  if (data.empty()) return Status::Ok();
  if (max_ == 0 || size_ + data.size() <= max_) {
    TRAINQ_RETURN_IF_ERROR(WriteAt(size_, data));
    size_ += data.size();
    return Status::Ok();
  }
  return Compact(data);
}

// Keeps the head, writes the marker after it, and keeps the latest `keep_` bytes of what
// followed the head together with `data`. What is copied per compaction is at most what was
// appended since the last one, so the copying costs at most one byte per byte written.
Status LogWriter::Compact(std::string_view data) {
  if (size_ < head_) {  // the head is not full yet: fill it first
    size_t fill = static_cast<size_t>(head_ - size_);
    TRAINQ_RETURN_IF_ERROR(WriteAt(size_, data.substr(0, fill)));
    size_ = head_;
    data.remove_prefix(fill);
  }
  const uint64_t base = head_ + marker_;
  // Before the first compaction (nothing dropped yet) the output runs on right after the head.
  const uint64_t tail_start = dropped_ == 0 ? head_ : base;
  const uint64_t tail = size_ - tail_start;
  uint64_t from_file = data.size() >= keep_ ? 0 : std::min(tail, keep_ - data.size());
  if (data.size() > keep_) {
    dropped_ += data.size() - keep_;
    data.remove_prefix(data.size() - keep_);
  }
  dropped_ += tail - from_file;  // more than 0: size_ + data overflowed the limit
  TRAINQ_RETURN_IF_ERROR(CopyDown(size_ - from_file, base, from_file));
  TRAINQ_RETURN_IF_ERROR(WriteAt(head_, Marker()));
  TRAINQ_RETURN_IF_ERROR(WriteAt(base + from_file, data));
  size_ = base + from_file + data.size();
  if (::ftruncate(fd_.get(), static_cast<off_t>(size_)) != 0) {
    return ErrnoStatus("truncating the job's log", errno);
  }
  return Status::Ok();
}

// Moves `length` bytes from `from` down to `to` (to <= from), front to back, so an overlap
// is safe.
Status LogWriter::CopyDown(uint64_t from, uint64_t to, uint64_t length) {
  if (length == 0 || from == to) return Status::Ok();
  std::vector<char> buffer(std::min<uint64_t>(length, 1 << 20));
  for (uint64_t done = 0; done < length;) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), length - done));
    ssize_t n = ::pread(fd_.get(), buffer.data(), want, static_cast<off_t>(from + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus("reading the job's log back", n < 0 ? errno : EIO);
    TRAINQ_RETURN_IF_ERROR(WriteAt(to + done, std::string_view(buffer.data(), size_t(n))));
    done += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status LogWriter::WriteAt(uint64_t offset, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd_.get(), data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus("writing the job's log", n < 0 ? errno : EIO);
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

}  // namespace trainq
