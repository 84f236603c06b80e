// libFuzzer target for ParseManifest: a manifest arrives from another node. Whatever it
// accepts must write back as text that parses to the same manifest, with the counts it
// computed itself. Build and run: `make fuzz`.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "src/os/transfer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainq;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<Manifest> m = ParseManifest(text);
  if (!m.ok()) {
    FUZZ_CHECK(m.status().code() == Code::kInvalid);
    FUZZ_CHECK(!m.status().message().empty());
    return 0;
  }
  uint64_t bytes = 0, files = 0;
  for (const ManifestEntry& e : m->entries) {
    FUZZ_CHECK(e.path.empty() || (e.path[0] != '/' && e.path.back() != '/'));
    if (e.kind != 'f' && e.kind != 'x') continue;
    uint64_t sum = 0;
    for (const ChunkRef& c : e.chunks) {
      FUZZ_CHECK(c.size > 0 && c.hash.size() == 64);
      sum += c.size;
    }
    FUZZ_CHECK(sum == e.size);
    FUZZ_CHECK(FileId(e).size() == 64);
    bytes += e.size;
    ++files;
  }
  FUZZ_CHECK(bytes == m->bytes && files == m->files);
  FUZZ_CHECK(!ChunkSources(*m).empty() || m->bytes == 0);
  Result<Manifest> back = ParseManifest(ManifestText(*m));
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == *m);
  return 0;
}
