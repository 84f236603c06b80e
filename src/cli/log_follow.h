// `trainq logs -f`: follows one attempt's log by offset. The shim compacts a log that
// reaches log_max_size in place (src/os/log_writer.h): the head stays, the marker line after
// it is rewritten with a larger count and the latest output moves down behind it, so the
// file may shrink or change under what was printed. The follower notices (the file is
// shorter than what it printed, the last bytes it printed or the marker it saw changed) and
// prints again from the marker on, as `tail -F` does after a truncation: some of the latest
// output may show twice, nothing shows garbled.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace trainq {

// Where a log's bytes come from: the file itself, or the daemon (`GET /v1/jobs/ID/log`)
// when the file is not this user's to open (a shared server's run dirs) or not on this
// machine. Each Poll asks Size() once, then reads within that view.
class LogSource {
 public:
  virtual ~LogSource() = default;
  // The log's size now; nullopt when there is no log yet (or it cannot be read).
  virtual std::optional<uint64_t> Size() = 0;
  // `length` bytes at `offset`, fewer at the end.
  virtual std::string ReadAt(uint64_t offset, size_t length) = 0;
};

// The file at `path`, opened anew at each Size().
std::unique_ptr<LogSource> FileLogSource(std::string path);

class LogFollower {
 public:
  explicit LogFollower(std::string path) : source_(FileLogSource(std::move(path))) {}
  explicit LogFollower(std::unique_ptr<LogSource> source) : source_(std::move(source)) {}

  // Prints to `out` what the log holds beyond what was printed. A missing log prints
  // nothing (the attempt has not opened it yet).
  void Poll(std::FILE* out);
  // `logs --tail N`: the next Poll starts at the last `lines` lines of what the log holds now
  // (a final newline ends the last line; it starts none). A missing log changes nothing.
  void SkipToLastLines(size_t lines);

 private:
  bool Rewritten(uint64_t size) const;
  void Restart(uint64_t size);
  void Copy(uint64_t size, std::FILE* out);
  void Remember(std::string_view printed);

  std::unique_ptr<LogSource> source_;
  uint64_t offset_ = 0;                // bytes of the file printed
  std::string last_;                   // the last bytes printed, to notice a rewrite
  std::string carry_;                  // the end of what was printed, for a marker cut in two
  std::optional<uint64_t> marker_at_;  // where the marker line is, once seen
  std::string marker_;                 // its first LogWriter::kMarkerKeyBytes, as seen
};

}  // namespace trainq
