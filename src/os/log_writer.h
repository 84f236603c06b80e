// A job's output log with a size limit (log_max_size, per attempt). The shim reads the
// job's stdout and stderr from a pipe and appends through a LogWriter, so the file never
// holds more than the limit: the first half of the output as it came, a marker line saying
// how many bytes were dropped, then the latest output. Why both ends: the start shows the
// configuration and the first errors, the end how the job finished (and the OOM message
// the daemon looks for).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/os/fd.h"
#include "trainq/status.h"

namespace trainq {

class LogWriter {
 public:
  // `fd` is open for reading and writing (never O_APPEND); it is written at offsets this
  // writer tracks, after what the file already holds (a shim run again on its run dir),
  // which counts as output. `max_bytes` 0: no limit. A limit below kMinLogBytes is raised to
  // it, so the head, the marker and some tail always fit.
  LogWriter(UniqueFd fd, uint64_t max_bytes);

  // Appends `data`; kIo on a write error (the bytes are then lost, nothing else).
  Status Append(std::string_view data);
  uint64_t size() const { return size_; }
  uint64_t dropped() const { return dropped_; }

  static constexpr uint64_t kMinLogBytes = 4096;
  // The marker line: kMarkerLead, the count right-aligned in kMarkerCountWidth, then
  // kMarkerWords. Its first kMarkerKeyBytes change with every compaction (the count grows).
  static constexpr std::string_view kMarkerLead = "\n[trainq: ";
  static constexpr size_t kMarkerCountWidth = 20;
  static constexpr std::string_view kMarkerWords = " bytes of output dropped here;";
  static constexpr size_t kMarkerKeyBytes =
      kMarkerLead.size() + kMarkerCountWidth + kMarkerWords.size();

 private:
  Status WriteAt(uint64_t offset, std::string_view data);
  Status Compact(std::string_view data);
  Status CopyDown(uint64_t from, uint64_t to, uint64_t length);
  std::string Marker() const;

  UniqueFd fd_;
  uint64_t max_ = 0;
  uint64_t head_ = 0;    // bytes kept from the start
  uint64_t marker_ = 0;  // the marker line's fixed length
  uint64_t keep_ = 0;    // bytes of the latest output kept at each compaction
  uint64_t size_ = 0;
  uint64_t dropped_ = 0;
};

// Where the first marker line in `text` starts (at its newline), or npos. A marker cut off
// at the end of `text` is not found.
size_t FindLogMarker(std::string_view text);

}  // namespace trainq
