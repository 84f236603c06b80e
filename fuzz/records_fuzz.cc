// libFuzzer target for the files trainq reads back from disk: a run dir's spec.json,
// shim.json and exit.json (written by the daemon and the shim, read after a restart) and the
// simulated GPU file. The first input byte picks which. Invariants: a refusal names the file;
// a record that reads back is written and read again to the same bytes; a simulated GPU never
// has more used or free memory than it has in all.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz/fuzz_check.h"
#include "src/os/gpu/gpu_probe.h"
#include "src/os/run_dir.h"

namespace trainq {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Reads the record at `path` in `dir`; if it parses, writes it to dir/again and checks that
// writing what that reads back gives the same file.
template <typename Record, typename Read, typename Write>
void RoundTrip(const std::string& dir, const std::string& path, Read read, Write write) {
  Result<Record> record = read(dir);
  if (!record.ok()) {
    FUZZ_CHECK(!record.status().message().empty());
    return;
  }
  std::string again = dir + "/again";
  FUZZ_CHECK(MakeDirs(again).ok());
  FUZZ_CHECK(write(again, *record).ok());
  std::string again_path = again + path.substr(dir.size());
  std::string first = Slurp(again_path);
  Result<Record> reread = read(again);
  FUZZ_CHECK(reread.ok());
  FUZZ_CHECK(write(again, *reread).ok());
  FUZZ_CHECK(Slurp(again_path) == first);
}

void FuzzSimulated(const std::string& path) {
  Result<std::unique_ptr<GpuProbe>> probe = OpenSimulatedProbe(path);
  if (!probe.ok()) {
    FUZZ_CHECK(probe.status().message().find(path) != std::string::npos);
    return;
  }
  Result<GpuSnapshot> snapshot = (*probe)->Sample();
  if (!snapshot.ok()) return;
  for (const GpuInfo& gpu : snapshot->gpus) {
    FUZZ_CHECK(gpu.used_bytes <= gpu.total_bytes);
    FUZZ_CHECK(gpu.free_bytes <= gpu.total_bytes);
  }
  if (!snapshot->topology.empty()) FUZZ_CHECK(snapshot->topology.size() == snapshot->gpus.size());
}

}  // namespace
}  // namespace trainq

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainq;
  if (size == 0) return 0;
  static const char* const kNames[] = {"spec.json", "shim.json", "exit.json", "gpus.json"};
  const char* name = kNames[data[0] % 4];
  std::string path = fuzz::WriteInputFile(name, data + 1, size - 1);
  std::string dir = path.substr(0, path.rfind('/'));
  switch (data[0] % 4) {
    case 0:
      return RoundTrip<RunSpec>(dir, path, ReadRunSpec, WriteRunSpec), 0;
    case 1:
      return RoundTrip<ShimRecord>(dir, path, ReadShimRecord, WriteShimRecord), 0;
    case 2:
      return RoundTrip<ExitRecord>(dir, path, ReadExitRecord, WriteExitRecord), 0;
    default:
      return FuzzSimulated(path), 0;
  }
}
