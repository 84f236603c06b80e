// Chunking, manifests and the chunk memo (transfer.h); the node cache is in transfer_cache.cc.
#include "src/os/transfer.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/os/crypto/token_crypto.h"
#include "src/os/fd.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/transfer_internal.h"
#include "src/os/user_file.h"

namespace trainq {

using nlohmann::json;

// ---- Chunker ----

namespace {

// splitmix64 from a fixed seed: the gear table, and so every boundary, is the same on every
// build and machine.
constexpr std::array<uint64_t, 256> MakeGearTable() {
  std::array<uint64_t, 256> table{};
  uint64_t x = 0x747261696e710001ull;
  for (uint64_t& v : table) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    v = z ^ (z >> 31);
  }
  return table;
}
constexpr std::array<uint64_t, 256> kGear = MakeGearTable();

// The gear hash's top bits depend on the last 64 bytes, its low bits on the last few only:
// masks take the top ones.
constexpr uint64_t TopBits(int bits) {
  if (bits <= 0) return 0;
  return bits >= 64 ? ~0ull : ~0ull << (64 - bits);
}
constexpr size_t kWindow = 64;

int Log2(size_t v) {
  int bits = 0;
  while (v > 1) {
    v >>= 1;
    ++bits;
  }
  return bits;
}

ChunkLimits Sane(ChunkLimits l) {
  l.min = std::max<size_t>(l.min, 1);
  l.avg = std::max(l.avg, l.min);
  l.max = std::max(l.max, l.avg);
  return l;
}

}  // namespace

struct Chunker::State {
  explicit State(ChunkLimits l)
      : limits(Sane(l)),
        hash_from(limits.min > kWindow ? limits.min - kWindow : 0),
        mask(TopBits(Log2(limits.avg > limits.min ? limits.avg - limits.min : 1))),
        sha(std::make_unique<Sha256>()) {}

  // Consumes `d` from `pos` while the current chunk lasts: where it stopped, and whether the
  // chunk ends there. Bytes more than a window before `min` cannot decide a cut: not hashed.
  std::pair<size_t, bool> Scan(std::string_view d, size_t pos) {
    if (n < hash_from) {
      size_t skip = std::min(hash_from - n, d.size() - pos);
      n += skip;
      pos += skip;
    }
    while (pos < d.size()) {
      h = (h << 1) + kGear[static_cast<uint8_t>(d[pos++])];
      ++n;
      if (n >= limits.max) return {pos, true};
      // One mask past `min`, not FastCDC's normalised two: after a change, a cut falls on the
      // first old boundary at least `min` past it, where normalised chunking skips old
      // boundaries closer than `avg` (a 1 MiB change cost 3.6 MiB with it, 1.4 without).
      if (n >= limits.min && (h & mask) == 0) {
        return {pos, true};
      }
    }
    return {pos, false};
  }

  ChunkRef Take() {
    ChunkRef c{sha->HexDigest(), n};
    sha = std::make_unique<Sha256>();
    h = 0;
    n = 0;
    return c;
  }

  const ChunkLimits limits;
  const size_t hash_from;
  const uint64_t mask;
  uint64_t h = 0;
  size_t n = 0;  // bytes of the current chunk so far
  std::unique_ptr<Sha256> sha;
};

Chunker::Chunker(ChunkLimits limits) : state_(std::make_unique<State>(limits)) {}
Chunker::~Chunker() = default;

void Chunker::Add(std::string_view data) {
  size_t pos = 0;
  while (pos < data.size()) {
    auto [end, cut] = state_->Scan(data, pos);
    state_->sha->Add(data.substr(pos, end - pos));
    pos = end;
    if (cut) chunks_.push_back(state_->Take());
  }
}

void Chunker::Finish() {
  if (state_->n > 0) chunks_.push_back(state_->Take());
}

namespace internal {

Result<UniqueFd> OpenRegular(const std::string& path) {
  // A fifo, a device or a link put where a file was is named, never opened or waited for.
  Result<UniqueFd> fd = OpenUserFile(path, FileWant::kRegular);
  if (!fd.ok()) return Status::Io(fd.status().message());
  return fd;
}

Status WriteAt(int fd, uint64_t offset, std::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write " + path, errno);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

bool IsHash(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

json ChunksToJson(const std::vector<ChunkRef>& chunks) {
  json out = json::array();
  for (const ChunkRef& c : chunks) out.push_back(json::array({c.hash, c.size}));
  return out;
}

std::string ChunksFromJson(const json& j, std::vector<ChunkRef>& out) {
  if (!j.is_array()) return "chunks is not an array";
  for (size_t i = 0; i < j.size(); ++i) {
    const json& c = j[i];
    if (!c.is_array() || c.size() != 2 || !c[0].is_string() || !c[1].is_number_unsigned()) {
      return fmt::format("chunk {} is not [hash, size]", i);
    }
    std::string hash = c[0].get<std::string>();
    if (!IsHash(hash)) return fmt::format("chunk {}: hash is not 64 lowercase hex digits", i);
    uint64_t size = c[1].get<uint64_t>();
    if (size == 0) return fmt::format("chunk {} has 0 bytes", i);
    out.push_back({std::move(hash), size});
  }
  return "";
}

bool SumSizes(const std::vector<ChunkRef>& chunks, uint64_t& sum) {
  sum = 0;
  for (const ChunkRef& c : chunks) {
    if (__builtin_add_overflow(sum, c.size, &sum)) return false;
  }
  return true;
}

const json* Field(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

}  // namespace internal

using internal::Field;

Result<std::vector<ChunkRef>> ChunkFile(const std::string& path, ChunkLimits limits) {
  return internal::ChunkFileOwnedBy(path, limits, std::nullopt);
}

Result<std::vector<ChunkRef>> internal::ChunkFileOwnedBy(const std::string& path,
                                                         ChunkLimits limits,
                                                         std::optional<uid_t> owner) {
  Result<UniqueFd> fd = internal::OpenRegular(path);
  if (!fd.ok()) return fd.status();
  struct stat st = {};
  if (owner && (::fstat(fd->get(), &st) != 0 || st.st_uid != *owner)) {
    return Status::Permission(path + ": not the user's own file");
  }
  Chunker chunker(limits);
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(fd->get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path, errno);
    if (n == 0) break;
    chunker.Add(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  chunker.Finish();
  return chunker.chunks();
}

// ---- Manifests ----

std::string FileId(const ManifestEntry& e) {
  Sha256 h;
  for (const ChunkRef& c : e.chunks) h.Add(c.hash);
  return h.HexDigest();
}

namespace {

unsigned Rank(char c) { return c == '/' ? 0 : static_cast<unsigned char>(c) + 1u; }

// "/" before every other byte: "a", "a/b", "a.b" — a directory right before its content.
bool PathLess(std::string_view a, std::string_view b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](char x, char y) { return Rank(x) < Rank(y); });
}

bool IsFile(char kind) { return kind == 'f' || kind == 'x'; }

std::string PathProblem(std::string_view path) {
  if (path.find('\0') != std::string_view::npos) return "path holds a NUL byte";
  if (path.front() == '/') return "path is absolute";
  for (size_t start = 0;;) {
    size_t end = std::min(path.find('/', start), path.size());
    std::string_view part = path.substr(start, end - start);
    if (part.empty()) return "path has an empty part";
    if (part == "." || part == "..") return fmt::format("path has a \"{}\" part", part);
    if (end == path.size()) return "";
    start = end + 1;
  }
}

// What the entries before the current one established.
struct ManifestSoFar {
  std::set<std::string> seen, dirs;
  std::string prev;
  size_t count = 0;  // entries in the manifest
};

void CheckPlace(const std::string& path, ManifestSoFar& st, std::vector<std::string>& out) {
  if (path.empty()) {
    if (st.count > 1) out.push_back("an empty path (the root itself) beside other entries");
    return;
  }
  if (std::string p = PathProblem(path); !p.empty()) return out.push_back(p);
  if (!st.seen.insert(path).second) return out.push_back("path appears twice");
  if (!st.prev.empty() && !PathLess(st.prev, path)) {
    out.push_back(fmt::format("out of order (after \"{}\")", st.prev));
  }
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return;
  std::string parent = path.substr(0, slash);
  if (st.dirs.count(parent) == 0) {
    out.push_back(st.seen.count(parent) != 0
                      ? fmt::format("is below \"{}\", which is not a directory", parent)
                      : fmt::format("is below \"{}\", which is not listed before it", parent));
  }
}

void CheckFile(const json& e, ManifestEntry& entry, std::vector<std::string>& out) {
  const json* size = Field(e, "size");
  const json* chunks = Field(e, "chunks");
  if (size == nullptr || !size->is_number_unsigned()) {
    out.push_back("size is not a number of bytes");
  } else {
    entry.size = size->get<uint64_t>();
  }
  if (chunks == nullptr) return out.push_back("a file without chunks");
  if (std::string p = internal::ChunksFromJson(*chunks, entry.chunks); !p.empty()) {
    return out.push_back(p);
  }
  uint64_t sum = 0;
  if (!internal::SumSizes(entry.chunks, sum) || sum != entry.size) {
    out.push_back(fmt::format("chunk sizes do not add up to its size {}", entry.size));
  }
  if (Field(e, "target") != nullptr) out.push_back("a file with a target");
}

void CheckKind(const json& e, ManifestEntry& entry, std::vector<std::string>& out) {
  const json* kind = Field(e, "kind");
  std::string k = kind != nullptr && kind->is_string() ? kind->get<std::string>() : "";
  if (k.size() != 1 || std::string_view("fxld").find(k[0]) == std::string_view::npos) {
    return out.push_back("kind is not one of f, x, l, d");
  }
  entry.kind = k[0];
  if (IsFile(entry.kind)) return CheckFile(e, entry, out);
  if (Field(e, "size") != nullptr || Field(e, "chunks") != nullptr) {
    out.push_back("a size or chunks on an entry that is not a file");
  }
  const json* target = Field(e, "target");
  if (entry.kind == 'd') {
    if (target != nullptr) out.push_back("a directory with a target");
    if (entry.path.empty()) out.push_back("an empty path that is not a file");
    return;
  }
  if (target == nullptr || !target->is_string() || target->get<std::string>().empty()) {
    return out.push_back("a link without a target");
  }
  entry.target = target->get<std::string>();
  if (entry.target.find('\0') != std::string::npos) out.push_back("target holds a NUL byte");
  if (entry.path.empty()) out.push_back("an empty path that is not a file");
}

// The entry's problems, each prefixed by the entry's index and path.
void ParseEntry(const json& e, size_t i, ManifestSoFar& st, Manifest& m,
                std::vector<std::string>& problems) {
  const json* path = e.is_object() ? Field(e, "path") : nullptr;
  if (path == nullptr || !path->is_string()) {
    problems.push_back(fmt::format("entry {}: not an object with a path", i));
    return;
  }
  ManifestEntry entry;
  entry.path = path->get<std::string>();
  std::vector<std::string> out;
  CheckPlace(entry.path, st, out);
  CheckKind(e, entry, out);
  for (const std::string& p : out) {
    problems.push_back(fmt::format("entry {} (\"{}\"): {}", i, entry.path, p));
  }
  if (!entry.path.empty()) st.prev = entry.path;
  if (entry.kind == 'd') st.dirs.insert(entry.path);
  if (IsFile(entry.kind) && out.empty()) {
    if (__builtin_add_overflow(m.bytes, entry.size, &m.bytes)) {
      problems.push_back("the files add up to more than 2^64 bytes");
    }
    ++m.files;
  }
  m.entries.push_back(std::move(entry));
}

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

}  // namespace

std::string ManifestText(const Manifest& m) {
  json entries = json::array();
  for (const ManifestEntry& e : m.entries) {
    json j = {{"path", e.path}, {"kind", std::string(1, e.kind)}};
    if (IsFile(e.kind)) {
      j["size"] = e.size;
      j["chunks"] = internal::ChunksToJson(e.chunks);
    } else if (e.kind == 'l') {
      j["target"] = e.target;
    }
    entries.push_back(std::move(j));
  }
  json out = {{"root", m.root}, {"entries", std::move(entries)}};
  // MakeManifest refuses names that are not UTF-8, so `replace` never alters one of its.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Manifest> ParseManifest(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Invalid("manifest: not a JSON object");
  std::vector<std::string> problems;
  Manifest m;
  const json* root = Field(j, "root");
  if (root == nullptr || !root->is_string() || root->get<std::string>().empty() ||
      root->get<std::string>()[0] != '/') {
    problems.push_back("root is not an absolute path");
  } else {
    m.root = root->get<std::string>();
  }
  const json* entries = Field(j, "entries");
  if (entries == nullptr || !entries->is_array()) {
    problems.push_back("entries is not an array");
  } else {
    ManifestSoFar st;
    st.count = entries->size();
    for (size_t i = 0; i < entries->size(); ++i) ParseEntry((*entries)[i], i, st, m, problems);
  }
  if (!problems.empty()) return Status::Invalid("manifest: " + Joined(problems));
  return m;
}

// ---- ChunkMemo ----

namespace {

// What a stat says of a file: what the memo compares.
struct StatFacts {
  uint64_t size = 0, ino = 0, dev = 0;
  int64_t mtime_ns = 0;
  bool operator==(const StatFacts&) const = default;
};

StatFacts FactsOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_dev), MtimeNs(st)};
}

bool ReadU64(const json& object, const char* key, uint64_t& out) {
  const json* v = Field(object, key);
  if (v == nullptr || !v->is_number_unsigned()) return false;
  out = v->get<uint64_t>();
  return true;
}

}  // namespace

void ChunkMemo::Load() {
  loaded_ = true;
  Result<std::string> text = ReadFile(path_);
  if (!text.ok()) return;
  json j = json::parse(*text, nullptr, false);
  const json* files = j.is_object() ? Field(j, "files") : nullptr;
  if (files == nullptr || !files->is_object()) return;
  // A damaged record is forgotten (the file is read again), never trusted.
  for (const auto& [path, rec] : files->items()) {
    Known k;
    uint64_t mtime = 0, sum = 0;
    const json* limits = rec.is_object() ? Field(rec, "limits") : nullptr;
    const json* chunks = rec.is_object() ? Field(rec, "chunks") : nullptr;
    if (limits == nullptr || !limits->is_array() || limits->size() != 3 || chunks == nullptr ||
        !ReadU64(rec, "size", k.size) || !ReadU64(rec, "ino", k.ino) ||
        !ReadU64(rec, "dev", k.dev) || !ReadU64(rec, "mtime_ns", mtime)) {
      continue;
    }
    if (!(*limits)[0].is_number_unsigned() || !(*limits)[1].is_number_unsigned() ||
        !(*limits)[2].is_number_unsigned()) {
      continue;
    }
    k.limits = {(*limits)[0].get<size_t>(), (*limits)[1].get<size_t>(), (*limits)[2].get<size_t>()};
    k.mtime_ns = static_cast<int64_t>(mtime);
    if (!internal::ChunksFromJson(*chunks, k.chunks).empty() ||
        !internal::SumSizes(k.chunks, sum) || sum != k.size) {
      continue;
    }
    known_[path] = std::move(k);
  }
}

Result<std::vector<ChunkRef>> ChunkMemo::Chunks(const std::string& path, ChunkLimits limits) {
  struct stat st = {};
  if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  StatFacts now = FactsOf(st);
  {
    std::lock_guard lock(mu_);
    if (!loaded_) Load();
    auto it = known_.find(path);
    if (it != known_.end() && it->second.limits == limits &&
        StatFacts{it->second.size, it->second.ino, it->second.dev, it->second.mtime_ns} == now) {
      used_[path] = it->second;
      return it->second.chunks;
    }
  }
  Result<std::vector<ChunkRef>> chunks = ChunkFile(path, limits);
  if (!chunks.ok()) return chunks.status();
  uint64_t sum = 0;
  internal::SumSizes(*chunks, sum);
  // Remembered only when the file did not change while it was read.
  struct stat after = {};
  bool same = ::lstat(path.c_str(), &after) == 0 && FactsOf(after) == now && sum == now.size;
  std::lock_guard lock(mu_);
  bytes_read_ += sum;
  if (same) {
    Known k{now.size, now.ino, now.dev, now.mtime_ns, limits, *chunks};
    known_[path] = k;
    used_[path] = std::move(k);
  }
  return chunks;
}

void ChunkMemo::Keep(const std::string& root) {
  std::lock_guard lock(mu_);
  kept_.push_back(root);
}

Status ChunkMemo::Save() {
  std::lock_guard lock(mu_);
  // Never asked (each tree unchanged), or nothing read anew and nothing forgotten: the file
  // says it already (a submit of an unchanged tree writes nothing).
  if (!loaded_ || (bytes_read_ == 0 && used_.size() == known_.size())) return Status::Ok();
  for (const std::string& root : kept_) {
    for (auto it = known_.lower_bound(root); it != known_.end() && it->first.starts_with(root);
         ++it) {
      if (it->first.size() == root.size() || it->first[root.size()] == '/') used_.insert(*it);
    }
  }
  json files = json::object();
  for (const auto& [path, k] : used_) {
    files[path] = {{"size", k.size},
                   {"ino", k.ino},
                   {"dev", k.dev},
                   {"mtime_ns", static_cast<uint64_t>(k.mtime_ns)},
                   {"limits", {k.limits.min, k.limits.avg, k.limits.max}},
                   {"chunks", internal::ChunksToJson(k.chunks)}};
  }
  json out = {{"version", 1}, {"files", std::move(files)}};
  // A memo lost to a power cut costs one more read of each file: no fsync.
  return WriteFileAtomic(path_, out.dump(-1, ' ', false, json::error_handler_t::replace),
                         Durability::kNoSync);
}

// ---- MakeManifest ----

namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// JSON carries UTF-8 only; nlohmann's own check, so that ManifestText never alters a name.
bool IsUtf8(const std::string& s) {
  try {
    static_cast<void>(json(s).dump());
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

std::string Join(const std::string& root, const std::string& rel) {
  if (rel.empty()) return root;
  return root == "/" ? "/" + rel : root + "/" + rel;
}

Result<std::vector<std::string>> DirNames(const std::string& dir) {
  std::unique_ptr<DIR, DirCloser> d(::opendir(dir.c_str()));
  if (!d) return ErrnoStatus("open directory " + dir, errno);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(d.get())) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  if (errno != 0) return ErrnoStatus("read directory " + dir, errno);
  return names;
}

class Walker {
 public:
  Walker(std::string root, ChunkMemo* memo, ChunkLimits limits)
      : root_(std::move(root)), memo_(memo), limits_(limits) {}

  // From now on a file not owned by `uid` (checked on the file opened) is left out.
  void OnlyOwnedBy(std::optional<uid_t> uid) { owner_ = uid; }

  const std::string& root() const { return root_; }
  // From now on each entry's stat is noted (TreeFingerprint) and no file is read.
  void NoteStatsOnly() { stats_only_ = true; }
  std::vector<std::string>& noted() { return noted_; }

  // Adds what `rel` (a directory below the root, "" the root) holds, depth first.
  Status Dir(const std::string& rel) {
    Result<std::vector<std::string>> names = DirNames(Join(root_, rel));
    if (!names.ok()) return names.status();
    for (const std::string& name : *names) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      TRAINQ_RETURN_IF_ERROR(Entry(child));
    }
    return Status::Ok();
  }

  // The entry of `rel`, if it is one a manifest holds; "" is the root as one file.
  Status Entry(const std::string& rel) {
    std::string path = Join(root_, rel);
    struct stat st = {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::Ok();  // gone since the directory was read
      return ErrnoStatus("stat " + path, errno);
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      return Status::Ok();
    }
    if (!IsUtf8(rel)) return Status::Invalid(path + ": the name is not UTF-8");
    if (stats_only_) {
      // A link's target changes only with a new link (another inode and ctime).
      noted_.push_back(fmt::format("{:o} {} {} {} {} {} {}", st.st_mode, st.st_size, MtimeNs(st),
                                   CtimeNs(st), st.st_ino, st.st_dev, rel));
      return S_ISDIR(st.st_mode) ? Dir(rel) : Status::Ok();
    }
    ManifestEntry e;
    e.path = rel;
    if (S_ISDIR(st.st_mode)) {
      e.kind = 'd';
      out_.entries.push_back(std::move(e));
      return Dir(rel);
    }
    if (S_ISLNK(st.st_mode)) return Link(path, std::move(e));
    return File(path, st, std::move(e));
  }

  // The files' chunks, read by a few threads at once: hashing a dataset is what a submit
  // waits for, and it keeps more than one core busy. The first failure in walk order wins.
  Status ChunkFiles() {
    std::vector<Result<std::vector<ChunkRef>>> got(files_.size(), Status::Ok());
    std::atomic<size_t> next = 0;
    auto work = [&] {
      for (size_t i = next++; i < files_.size(); i = next++) {
        const std::string& path = files_[i].second;
        got[i] = memo_ != nullptr ? memo_->Chunks(path, limits_)
                                  : internal::ChunkFileOwnedBy(path, limits_, owner_);
      }
    };
    size_t threads = std::min<size_t>(
        {files_.size(), std::max(1u, std::thread::hardware_concurrency()), kHashThreads});
    std::vector<std::thread> helpers;
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
    work();
    for (std::thread& t : helpers) t.join();
    std::vector<bool> left_out(out_.entries.size(), false);
    for (size_t i = 0; i < files_.size(); ++i) {
      if (owner_ && got[i].status().code() == Code::kPermission) {
        left_out[files_[i].first] = true;
        continue;
      }
      if (!got[i].ok()) return got[i].status();
      ManifestEntry& e = out_.entries[files_[i].first];
      e.chunks = std::move(*got[i]);
      internal::SumSizes(e.chunks, e.size);  // what was read, should the file have changed
      out_.bytes += e.size;
      ++out_.files;
    }
    std::vector<ManifestEntry> kept;
    for (size_t i = 0; i < out_.entries.size(); ++i) {
      if (!left_out[i]) kept.push_back(std::move(out_.entries[i]));
    }
    out_.entries = std::move(kept);
    return Status::Ok();
  }

  Manifest Take() {
    std::sort(
        out_.entries.begin(), out_.entries.end(),
        [](const ManifestEntry& a, const ManifestEntry& b) { return PathLess(a.path, b.path); });
    out_.root = root_;
    return std::move(out_);
  }

 private:
  Status Link(const std::string& path, ManifestEntry e) {
    std::string target(4096, '\0');
    ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    if (n < 0) return ErrnoStatus("readlink " + path, errno);
    target.resize(static_cast<size_t>(n));
    if (!IsUtf8(target)) return Status::Invalid(path + ": the link's target is not UTF-8");
    e.kind = 'l';
    e.target = std::move(target);
    out_.entries.push_back(std::move(e));
    return Status::Ok();
  }

  // A file's entry now, its chunks once the walk is over (ChunkFiles).
  Status File(const std::string& path, const struct stat& st, ManifestEntry e) {
    e.kind = (st.st_mode & S_IXUSR) != 0 ? 'x' : 'f';
    files_.emplace_back(out_.entries.size(), path);
    out_.entries.push_back(std::move(e));
    return Status::Ok();
  }

  static constexpr size_t kHashThreads = 4;
  bool stats_only_ = false;
  std::optional<uid_t> owner_;
  std::vector<std::string> noted_;
  std::string root_;
  ChunkMemo* memo_;
  ChunkLimits limits_;
  Manifest out_;
  std::vector<std::pair<size_t, std::string>> files_;  // entry index, path
};

}  // namespace

namespace {

// What MakeManifest and TreeFingerprint walk: `root` without trailing slashes, checked to be
// an absolute path to a directory or a regular file, walked by `walker`.
Status WalkRoot(const std::string& root, Walker& walker) {
  const std::string& r = walker.root();
  struct stat st = {};
  if (root.empty() || root[0] != '/') return Status::Invalid(root + ": not an absolute path");
  if (::lstat(r.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::Invalid(r + ": no such file");
    return ErrnoStatus("stat " + r, errno);
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    return Status::Invalid(fmt::format("{} is {}, neither a directory nor a regular file", r,
                                       FileKindName(st.st_mode)));
  }
  return S_ISDIR(st.st_mode) ? walker.Dir("") : walker.Entry("");
}

std::string WithoutTrailingSlashes(std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

}  // namespace

Result<Manifest> MakeManifest(const std::string& root, ChunkMemo* memo, ChunkLimits limits) {
  Walker walker(WithoutTrailingSlashes(root), memo, limits);
  TRAINQ_RETURN_IF_ERROR(WalkRoot(root, walker));
  TRAINQ_RETURN_IF_ERROR(walker.ChunkFiles());
  return walker.Take();
}

Result<std::string> TreeFingerprint(const std::string& root) {
  std::string r = WithoutTrailingSlashes(root);
  Walker walker(r, nullptr, {});
  walker.NoteStatsOnly();
  TRAINQ_RETURN_IF_ERROR(WalkRoot(root, walker));
  std::vector<std::string>& noted = walker.noted();
  std::sort(noted.begin(), noted.end());
  Sha256 h;
  h.Add(r);
  for (const std::string& line : noted) {
    h.Add("\n");
    h.Add(line);
  }
  return h.HexDigest();
}

Result<Manifest> MakeManifestOfMatches(const std::string& root,
                                       const std::vector<std::string>& patterns, ChunkLimits limits,
                                       std::optional<uid_t> owner) {
  std::map<std::string, ManifestEntry> found;  // by path: overlapping patterns list once
  auto add_dirs_above = [&](const std::string& rel) {
    for (size_t at = rel.find('/'); at != std::string::npos; at = rel.find('/', at + 1)) {
      found.try_emplace(rel.substr(0, at), ManifestEntry{rel.substr(0, at), 'd', "", 0, {}});
    }
  };
  for (const std::string& pattern : patterns) {
    glob_t g = {};
    int rc = ::glob((root + "/" + pattern).c_str(), GLOB_NOSORT, nullptr, &g);
    std::unique_ptr<glob_t, void (*)(glob_t*)> free_later(&g, ::globfree);
    if (rc == GLOB_NOMATCH) continue;
    if (rc != 0) return Status::Io(fmt::format("{}: cannot list what matches it", pattern));
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      std::string path = g.gl_pathv[i];
      struct stat st = {};
      if (!path.starts_with(root + "/") || ::lstat(path.c_str(), &st) != 0) continue;
      if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) continue;  // links, fifos
      std::string rel = path.substr(root.size() + 1);
      Walker walker(WithoutTrailingSlashes(path), nullptr, limits);
      walker.OnlyOwnedBy(owner);
      Status walked = WalkRoot(path, walker);
      if (walked.ok()) walked = walker.ChunkFiles();
      if (!walked.ok()) return walked;
      Result<Manifest> m = walker.Take();
      add_dirs_above(rel);
      if (S_ISDIR(st.st_mode)) found.try_emplace(rel, ManifestEntry{rel, 'd', "", 0, {}});
      for (ManifestEntry& e : m->entries) {
        e.path = e.path.empty() ? rel : rel + "/" + e.path;
        found[e.path] = std::move(e);
      }
    }
  }
  Manifest out;
  out.root = root;
  for (auto& [path, e] : found) {
    if (e.kind == 'f' || e.kind == 'x') {
      out.bytes += e.size;
      ++out.files;
    }
    out.entries.push_back(std::move(e));
  }
  std::sort(
      out.entries.begin(), out.entries.end(),
      [](const ManifestEntry& a, const ManifestEntry& b) { return PathLess(a.path, b.path); });
  return out;
}

// ---- Chunk sources ----

std::map<std::string, ChunkSource> ChunkSources(const Manifest& m) {
  std::map<std::string, ChunkSource> out;
  for (const ManifestEntry& e : m.entries) {
    uint64_t offset = 0;
    for (const ChunkRef& c : e.chunks) {
      out.try_emplace(c.hash, ChunkSource{Join(m.root, e.path), offset, c.size});
      offset += c.size;
    }
  }
  return out;
}

Result<std::string> ReadChunk(const ChunkSource& at, const std::string& hash) {
  // A manifest is its user's text: a chunk it says is huge is never allocated.
  constexpr uint64_t kMaxChunkBytes = 64 << 20;
  if (at.size > kMaxChunkBytes) {
    return Status::Invalid(
        fmt::format("{}: a chunk of {} bytes at offset {}; chunks are at most {}", at.path, at.size,
                    at.offset, kMaxChunkBytes));
  }
  Result<UniqueFd> fd = internal::OpenRegular(at.path);
  if (!fd.ok()) return fd.status();
  Result<std::string> data = ReadAtMost(fd->get(), at.offset, at.size, at.path);
  if (!data.ok()) return data.status();
  if (data->size() != at.size || Sha256Hex(*data) != hash) {
    return Status::Conflict(
        fmt::format("{} changed since it was staged (chunk at offset {})", at.path, at.offset));
  }
  return data;
}

}  // namespace trainq
