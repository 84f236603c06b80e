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
#include <optional>
#include <string>

namespace trainq {

class LogFollower {
 public:
  explicit LogFollower(std::string path) : path_(std::move(path)) {}

  // Prints to `out` what the log holds beyond what was printed. A missing file prints
  // nothing (the attempt has not opened it yet).
  void Poll(std::FILE* out);

 private:
  bool Rewritten(int fd, uint64_t size) const;
  void Restart(int fd, uint64_t size);
  void Copy(int fd, uint64_t size, std::FILE* out);
  void Remember(std::string_view printed);

  std::string path_;
  uint64_t offset_ = 0;                // bytes of the file printed
  std::string last_;                   // the last bytes printed, to notice a rewrite
  std::string carry_;                  // the end of what was printed, for a marker cut in two
  std::optional<uint64_t> marker_at_;  // where the marker line is, once seen
  std::string marker_;                 // its first LogWriter::kMarkerKeyBytes, as seen
};

}  // namespace trainq
