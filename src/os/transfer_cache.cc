// ChunkCache (transfer.h): files assembled from chunks, linked into trees.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/os/crypto/token_crypto.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/transfer.h"
#include "src/os/transfer_internal.h"
#include "src/os/user_file.h"

namespace trainq {

using nlohmann::json;

namespace {

constexpr size_t kBatchChunks = 32;
constexpr uint64_t kBatchBytes = 8 << 20;

// The mode is part of a cached file: its links share it.
std::string CacheName(const ManifestEntry& e) { return FileId(e) + (e.kind == 'x' ? "x" : ""); }

bool IsCacheName(std::string_view name) {
  if (name.size() == 65 && name.back() == 'x') name.remove_suffix(1);
  return internal::IsHash(name);
}

bool IsFileEntry(const ManifestEntry& e) { return e.kind == 'f' || e.kind == 'x'; }

struct CachedFile {
  uint64_t size = 0, ino = 0, used = 0;
  int64_t mtime_ns = 0;
  std::vector<ChunkRef> chunks;
  // The inode's change time when the cache last knew its content: any write, utime or chmod
  // (and a link made or removed) moves it, so a file whose ctime moved is checked before use.
  int64_t ctime_ns = 0;
};

struct ChunkAt {
  std::string name;  // of the cached file
  uint64_t offset = 0, size = 0;
};

// A chunk's bytes if they are `hash`'s.
std::optional<std::string> Checked(Result<std::string> data, const ChunkRef& c) {
  if (!data.ok() || data->size() != c.size || Sha256Hex(*data) != c.hash) return std::nullopt;
  return std::move(*data);
}

// Fetches a Fill's chunks ahead of the files that need them, in the order they will be asked
// for, in batches that span files and with kFetchers requests out at once: a small file costs
// no round trip of its own, and the holder's reads and the network overlap this node's checks
// and writes. At most kAheadBytes wait to be taken. A chunk asked for again (it failed its
// check) or not planned is fetched on its own.
class Prefetcher {
 public:
  static constexpr int kFetchers = 2;
  static constexpr uint64_t kAheadBytes = 48 << 20;

  Prefetcher(std::vector<ChunkRef> plan, const ChunkCache::Fetch& fetch)
      : plan_(std::move(plan)), fetch_(fetch) {
    for (size_t i = 0; i < plan_.size(); ++i) position_.try_emplace(plan_[i].hash, i);
    for (size_t start = 0; start < plan_.size();) {
      size_t end = start;
      uint64_t bytes = 0;
      while (end < plan_.size() && end - start < kBatchChunks &&
             (end == start || bytes + plan_[end].size <= kBatchBytes)) {
        bytes += plan_[end++].size;
      }
      batches_.push_back(Batch{start, end, bytes, std::nullopt});
      start = end;
    }
    if (batches_.empty()) return;
    for (int i = 0; i < kFetchers; ++i) threads_.emplace_back([this] { Fetcher(); });
  }

  ~Prefetcher() { Finish(); }

  // Stops fetching, once what is out has come back.
  void Finish() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // As Fetch: the bytes of `chunks`, concatenated in order.
  Result<std::string> Get(const std::vector<ChunkRef>& chunks) {
    // Views into the batches' bytes, copied once into the answer: a batch this call reads
    // from is let go only after (one Get spans a batch or two, well within kAheadBytes).
    std::vector<std::string_view> views(chunks.size());
    std::vector<ChunkRef> direct;
    std::vector<size_t> direct_at;
    size_t first = batches_.size(), last = 0;
    {
      std::unique_lock lock(mu_);
      for (size_t k = 0; k < chunks.size(); ++k) {
        auto it = position_.find(chunks[k].hash);
        size_t b = it == position_.end() ? batches_.size() : BatchOf(it->second);
        if (b >= batches_.size() || b < taken_ || served_.count(it->second) != 0) {
          direct.push_back(chunks[k]);
          direct_at.push_back(k);
          continue;
        }
        served_.insert(it->second);
        first = std::min(first, b);
        last = std::max(last, b);
        // What lies before this call's batches was skipped (found here after all).
        for (; taken_ < first; ++taken_) Drop(batches_[taken_]);
        cv_.notify_all();
        cv_.wait(lock, [&] { return batches_[b].result.has_value(); });
        const Result<std::string>& got = *batches_[b].result;
        if (!got.ok()) return got.status();
        uint64_t at = 0;
        for (size_t i = batches_[b].start; i < it->second; ++i) at += plan_[i].size;
        if (at + chunks[k].size <= got->size()) {
          views[k] = std::string_view(*got).substr(at, chunks[k].size);
        }
        used_ += chunks[k].size;
      }
    }
    Result<std::string> fetched = std::string();
    if (!direct.empty()) {
      fetched = fetch_(direct);
      if (!fetched.ok()) return fetched.status();
      uint64_t at = 0;
      for (size_t k = 0; k < direct.size(); ++k) {
        if (at + direct[k].size <= fetched->size()) {
          views[direct_at[k]] = std::string_view(*fetched).substr(at, direct[k].size);
        }
        at += direct[k].size;
      }
    }
    std::string out;
    size_t size = 0;
    for (std::string_view v : views) size += v.size();
    out.reserve(size);
    for (std::string_view v : views) out += v;
    if (first < batches_.size()) {
      std::lock_guard lock(mu_);
      for (; taken_ < last; ++taken_) Drop(batches_[taken_]);
      cv_.notify_all();
    }
    return out;
  }

  // Bytes fetched ahead that no file took (found here meanwhile, or fetched past a failure).
  uint64_t Unused() {
    std::lock_guard lock(mu_);
    return fetched_ > used_ ? fetched_ - used_ : 0;
  }

 private:
  struct Batch {
    size_t start = 0, end = 0;
    uint64_t bytes = 0;
    std::optional<Result<std::string>> result;
    bool counted = false;  // in ahead_
  };

  size_t BatchOf(size_t position) const {
    auto it = std::upper_bound(batches_.begin(), batches_.end(), position,
                               [](size_t p, const Batch& b) { return p < b.start; });
    return static_cast<size_t>(it - batches_.begin()) - 1;
  }

  void Uncount(Batch& b) {
    if (b.counted) ahead_ -= b.bytes;
    b.counted = false;
  }

  // A batch no file will take from: its bytes go (an error stays, for the record).
  void Drop(Batch& b) {
    Uncount(b);
    if (b.result && b.result->ok()) b.result = Result<std::string>(std::string());
  }

  void Fetcher() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] {
        next_ = std::max(next_, taken_);
        return stop_ || (next_ < batches_.size() && ahead_ + batches_[next_].bytes <= kAheadBytes);
      });
      if (stop_) return;
      Batch& b = batches_[next_++];
      std::vector<ChunkRef> chunks(plan_.begin() + static_cast<ptrdiff_t>(b.start),
                                   plan_.begin() + static_cast<ptrdiff_t>(b.end));
      ahead_ += b.bytes;
      b.counted = true;
      lock.unlock();
      // A refusal is kept for the file that needs the batch; the rest go on meanwhile.
      Result<std::string> got = fetch_(chunks);
      lock.lock();
      if (got.ok()) fetched_ += got->size();
      b.result = std::move(got);
      if (!b.result->ok()) Uncount(b);
      if (static_cast<size_t>(&b - batches_.data()) < taken_) Drop(b);
      cv_.notify_all();
    }
  }

  const std::vector<ChunkRef> plan_;
  const ChunkCache::Fetch& fetch_;
  std::map<std::string, size_t> position_;  // hash -> first place in plan_
  std::vector<Batch> batches_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t next_ = 0;   // the next batch to fetch
  size_t taken_ = 0;  // batches before this are done with
  uint64_t ahead_ = 0, fetched_ = 0, used_ = 0;
  std::set<size_t> served_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Writes one file's chunks into its partial file in order: those already there (checked),
// those held here, then the rest through `fetch` in batches.
class Assembler {
 public:
  using Held = std::function<std::optional<std::string>(const ChunkRef&)>;
  Assembler(const ManifestEntry& e, int fd, std::string partial, const ChunkCache::Fetch& fetch,
            Held held, ChunkCache::Progress& p,
            const std::function<void(const ChunkCache::Progress&)>& report)
      : e_(e),
        fd_(fd),
        partial_(std::move(partial)),
        fetch_(fetch),
        held_(std::move(held)),
        p_(p),
        report_(report) {}

  Status Run() {
    TRAINQ_RETURN_IF_ERROR(Resume());
    for (size_t i = next_; i < e_.chunks.size(); ++i) {
      const ChunkRef& c = e_.chunks[i];
      // A chunk repeated within a batch is copied from its first place once that is written.
      if (pending_hashes_.count(c.hash) != 0) TRAINQ_RETURN_IF_ERROR(Flush());
      if (std::optional<std::string> local = Local(c)) {
        TRAINQ_RETURN_IF_ERROR(Flush());
        TRAINQ_RETURN_IF_ERROR(Write(c, *local));
        p_.bytes_present += c.size;
        Report();
        continue;
      }
      if (!pending_.empty() && pending_bytes_ + c.size > kBatchBytes) {
        TRAINQ_RETURN_IF_ERROR(Flush());
      }
      pending_.push_back(c);
      pending_hashes_.insert(c.hash);
      pending_bytes_ += c.size;
      if (pending_.size() == kBatchChunks) TRAINQ_RETURN_IF_ERROR(Flush());
    }
    return Flush();
  }

 private:
  // Keeps the partial file's longest prefix of whole, correct chunks; drops the rest.
  Status Resume() {
    struct stat st = {};
    if (::fstat(fd_, &st) != 0) return ErrnoStatus("stat " + partial_, errno);
    auto have = static_cast<uint64_t>(st.st_size);
    for (; next_ < e_.chunks.size() && off_ + e_.chunks[next_].size <= have; ++next_) {
      const ChunkRef& c = e_.chunks[next_];
      if (!Checked(ReadAtMost(fd_, off_, c.size, partial_), c)) break;
      written_.try_emplace(c.hash, off_);
      off_ += c.size;
      p_.bytes_present += c.size;
    }
    if (have != off_ && ::ftruncate(fd_, static_cast<off_t>(off_)) != 0) {
      return ErrnoStatus("truncate " + partial_, errno);
    }
    if (off_ > 0) Report();
    return Status::Ok();
  }

  std::optional<std::string> Local(const ChunkRef& c) {
    auto it = written_.find(c.hash);
    if (it != written_.end()) {
      if (auto data = Checked(ReadAtMost(fd_, it->second, c.size, partial_), c)) return data;
    }
    return held_(c);
  }

  Status Write(const ChunkRef& c, std::string_view data) {
    TRAINQ_RETURN_IF_ERROR(internal::WriteAt(fd_, off_, data, partial_));
    written_.try_emplace(c.hash, off_);
    off_ += c.size;
    return Status::Ok();
  }

  Status Flush() {
    if (pending_.empty()) return Status::Ok();
    Result<std::string> got = fetch_(pending_);
    if (!got.ok()) return got.status();
    p_.bytes_fetched += got->size();
    std::string_view all = *got;
    uint64_t at = 0;
    for (const ChunkRef& c : pending_) {
      std::string_view piece = at + c.size <= all.size() ? all.substr(at, c.size) : "";
      at += c.size;
      if (piece.size() == c.size && Sha256Hex(piece) == c.hash) {
        TRAINQ_RETURN_IF_ERROR(Write(c, piece));
      } else {
        TRAINQ_RETURN_IF_ERROR(Refetch(c));
      }
    }
    pending_.clear();
    pending_hashes_.clear();
    pending_bytes_ = 0;
    Report();
    return Status::Ok();
  }

  // One more try for a chunk that failed its check: a bad transfer, not a changed source,
  // passes the second time.
  Status Refetch(const ChunkRef& c) {
    Result<std::string> again = fetch_({c});
    if (!again.ok()) return again.status();
    p_.bytes_refetched += again->size();
    if (again->size() != c.size || Sha256Hex(*again) != c.hash) {
      return Status::Io(
          fmt::format("chunk {} ({} bytes at offset {} of \"{}\") failed its check twice", c.hash,
                      c.size, off_, e_.path));
    }
    return Write(c, *again);
  }

  void Report() {
    if (report_) report_(p_);
  }

  const ManifestEntry& e_;
  int fd_;
  std::string partial_;
  const ChunkCache::Fetch& fetch_;
  Held held_;
  ChunkCache::Progress& p_;
  const std::function<void(const ChunkCache::Progress&)>& report_;
  size_t next_ = 0;                          // the first chunk not yet in the partial file
  uint64_t off_ = 0;                         // its offset there
  std::map<std::string, uint64_t> written_;  // hash -> offset in the partial file
  std::vector<ChunkRef> pending_;
  std::set<std::string> pending_hashes_;
  uint64_t pending_bytes_ = 0;
};

Status CopyFile(const std::string& from, const std::string& to, mode_t mode) {
  Result<UniqueFd> in = internal::OpenRegular(from);
  if (!in.ok()) return in.status();
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out.valid()) return ErrnoStatus("create " + to, errno);
  for (uint64_t off = 0;;) {
    Result<std::string> data = ReadAtMost(in->get(), off, 1 << 20, from);
    if (!data.ok()) return data.status();
    if (data->empty()) break;
    TRAINQ_RETURN_IF_ERROR(internal::WriteAt(out.get(), off, *data, to));
    off += data->size();
  }
  if (::fchmod(out.get(), mode) != 0) return ErrnoStatus("chmod " + to, errno);
  return Status::Ok();
}

}  // namespace

namespace {

// Whether the file at `path` holds exactly `chunks`, each checked against its name.
bool ContentMatches(const std::string& path, const std::vector<ChunkRef>& chunks) {
  Result<UniqueFd> fd = internal::OpenRegular(path);
  if (!fd.ok()) return false;
  uint64_t offset = 0;
  for (const ChunkRef& c : chunks) {
    Result<std::string> bytes = ReadAtMost(fd->get(), offset, c.size, path);
    if (!bytes.ok()) return false;
    Sha256 h;
    h.Add(*bytes);
    if (h.HexDigest() != c.hash) return false;
    offset += c.size;
  }
  return true;
}

}  // namespace

struct ChunkCache::Impl {
  std::string dir;
  uint64_t cap = 0;
  mutable std::mutex mu;
  std::condition_variable built;                      // a file left `building`
  std::map<std::string, CachedFile> files;            // by cache name
  std::map<std::string, ChunkAt> chunks;              // hash -> the first file holding it
  std::map<std::string, std::set<std::string>> pins;  // pin -> cache names
  std::set<std::string> building;
  // Files a Fill fetches ahead for, by the Fill's number: another Fill waits for them.
  std::map<std::string, uint64_t> claimed;
  uint64_t fills = 0;
  uint64_t clock = 0, bytes = 0;
  bool dirty = false;  // the index on disk is behind

  std::string FilePath(const std::string& name) const { return dir + "/files/" + name; }
  std::string PartialPath(const std::string& name) const { return dir + "/partial/" + name; }
  std::string IndexPath() const { return dir + "/chunks.idx"; }

  void AddLocked(const std::string& name, CachedFile f) {
    bytes += f.size;
    uint64_t offset = 0;
    for (const ChunkRef& c : f.chunks) {
      chunks.try_emplace(c.hash, ChunkAt{name, offset, c.size});
      offset += c.size;
    }
    files[name] = std::move(f);
    dirty = true;
  }

  void RebuildChunksLocked() {
    chunks.clear();
    for (const auto& [name, f] : files) {
      uint64_t offset = 0;
      for (const ChunkRef& c : f.chunks) {
        chunks.try_emplace(c.hash, ChunkAt{name, offset, c.size});
        offset += c.size;
      }
    }
  }

  void DropLocked(const std::string& name, bool rebuild = true) {
    auto it = files.find(name);
    if (it == files.end()) return;
    ::unlink(FilePath(name).c_str());  // a link elsewhere keeps its copy
    bytes -= it->second.size;
    files.erase(it);
    dirty = true;
    if (rebuild) RebuildChunksLocked();
  }

  // Whether `name` is here as the index recorded it; a file changed through one of its links
  // is dropped.
  bool IntactLocked(const std::string& name) {
    auto it = files.find(name);
    if (it == files.end()) return false;
    struct stat st = {};
    if (::lstat(FilePath(name).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) == it->second.size &&
        static_cast<uint64_t>(st.st_ino) == it->second.ino && MtimeNs(st) == it->second.mtime_ns) {
      return true;
    }
    DropLocked(name);
    return false;
  }

  // Whether `name`'s ctime moved since the cache last knew its content.
  bool ChangedLocked(const std::string& name) const {
    struct stat st = {};
    auto it = files.find(name);
    return it == files.end() || ::lstat(FilePath(name).c_str(), &st) != 0 ||
           CtimeNs(st) != it->second.ctime_ns;
  }

  // The cache knows `name`'s content as it is now (checked, or changed by the cache itself).
  // `persist`: the index on disk should say so too (a link the cache made need not: after a
  // restart the file is checked once more).
  void RestatLocked(const std::string& name, bool persist = true) {
    struct stat st = {};
    auto it = files.find(name);
    if (it == files.end() || ::lstat(FilePath(name).c_str(), &st) != 0) return;
    it->second.ctime_ns = CtimeNs(st);
    dirty = dirty || persist;
  }

  bool PinnedLocked(const std::string& name) const {
    return std::any_of(pins.begin(), pins.end(),
                       [&](const auto& p) { return p.second.count(name) != 0; });
  }

  Status SaveLocked() {
    if (!dirty) return Status::Ok();
    json out = json::object();
    for (const auto& [name, f] : files) {
      out[name] = {{"size", f.size},
                   {"ino", f.ino},
                   {"mtime_ns", static_cast<uint64_t>(f.mtime_ns)},
                   {"ctime_ns", static_cast<uint64_t>(f.ctime_ns)},
                   {"used", f.used},
                   {"chunks", internal::ChunksToJson(f.chunks)}};
    }
    json doc = {{"version", 1}, {"files", std::move(out)}};
    // The files are never fsynced either: after a power cut the checks at Open and the
    // size/mtime comparison catch what the index got wrong.
    Status st = WriteFileAtomic(IndexPath(), doc.dump(), Durability::kNoSync);
    if (st.ok()) dirty = false;
    return st;
  }

  std::optional<CachedFile> RecordFromJson(const std::string& name, const json& rec) const {
    CachedFile f;
    const json* size = rec.is_object() ? internal::Field(rec, "size") : nullptr;
    const json* ino = rec.is_object() ? internal::Field(rec, "ino") : nullptr;
    const json* mtime = rec.is_object() ? internal::Field(rec, "mtime_ns") : nullptr;
    const json* used = rec.is_object() ? internal::Field(rec, "used") : nullptr;
    const json* list = rec.is_object() ? internal::Field(rec, "chunks") : nullptr;
    for (const json* v : {size, ino, mtime, used}) {
      if (v == nullptr || !v->is_number_unsigned()) return std::nullopt;
    }
    f.size = size->get<uint64_t>();
    f.ino = ino->get<uint64_t>();
    f.mtime_ns = static_cast<int64_t>(mtime->get<uint64_t>());
    if (const json* c = internal::Field(rec, "ctime_ns"); c != nullptr && c->is_number_unsigned()) {
      f.ctime_ns = static_cast<int64_t>(c->get<uint64_t>());
    }
    f.used = used->get<uint64_t>();
    uint64_t sum = 0;
    if (list == nullptr || !internal::ChunksFromJson(*list, f.chunks).empty() ||
        !internal::SumSizes(f.chunks, sum) || sum != f.size) {
      return std::nullopt;
    }
    ManifestEntry e;
    e.kind = name.back() == 'x' ? 'x' : 'f';
    e.chunks = f.chunks;
    if (!IsCacheName(name) || CacheName(e) != name) return std::nullopt;
    return f;
  }

  // The index as it was written, less what no longer matches its file; files it does not
  // name are removed (nothing says which chunks they hold).
  void Load() {
    std::lock_guard lock(mu);
    Result<std::string> text = ReadFile(IndexPath());
    json doc = text.ok() ? json::parse(*text, nullptr, false) : json();
    const json* list = doc.is_object() ? internal::Field(doc, "files") : nullptr;
    if (list != nullptr && list->is_object()) {
      for (const auto& [name, rec] : list->items()) {
        std::optional<CachedFile> f = RecordFromJson(name, rec);
        if (!f) continue;
        clock = std::max(clock, f->used);
        files[name] = std::move(*f);
        bytes += files[name].size;
      }
    }
    for (auto it = files.begin(); it != files.end();) {
      std::string name = (it++)->first;
      IntactLocked(name);
    }
    if (Result<std::vector<std::string>> names = ListFiles(dir + "/files"); names.ok()) {
      for (const std::string& name : *names) {
        if (files.count(name) == 0) ::unlink(FilePath(name).c_str());
      }
    }
    RebuildChunksLocked();
  }

  // A held chunk's bytes, checked; nullopt when no file here has them intact.
  std::optional<std::string> Held(const ChunkRef& c) const {
    ChunkAt at;
    {
      std::lock_guard lock(mu);
      auto it = chunks.find(c.hash);
      if (it == chunks.end()) return std::nullopt;
      at = it->second;
    }
    Result<UniqueFd> fd = internal::OpenRegular(FilePath(at.name));
    if (!fd.ok()) return std::nullopt;  // evicted meanwhile
    return Checked(ReadAtMost(fd->get(), at.offset, c.size, FilePath(at.name)), c);
  }

  Result<CachedFile> Assemble(const std::string& name, const ManifestEntry& e, const Fetch& fetch,
                              Progress& p, const std::function<void(const Progress&)>& report) {
    std::string partial = PartialPath(name);
    UniqueFd fd(::open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd.valid()) return ErrnoStatus("open " + partial, errno);
    Assembler a(
        e, fd.get(), partial, fetch, [this](const ChunkRef& c) { return Held(c); }, p, report);
    TRAINQ_RETURN_IF_ERROR(a.Run());
    std::string path = FilePath(name);
    if (::fchmod(fd.get(), e.kind == 'x' ? 0555 : 0444) != 0) {
      return ErrnoStatus("chmod " + partial, errno);
    }
    if (::rename(partial.c_str(), path.c_str()) != 0)
      return ErrnoStatus("rename " + partial, errno);
    struct stat st = {};
    if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path, errno);
    return CachedFile{static_cast<uint64_t>(st.st_size),
                      static_cast<uint64_t>(st.st_ino),
                      0,
                      MtimeNs(st),
                      e.chunks,
                      CtimeNs(st)};
  }

  // The chunks Fill number `fill` will fetch ahead, in the order its files ask for them: those
  // of files neither whole here, partly assembled (a partial file resumes on its own) nor
  // claimed by another Fill, held nowhere here, each once. The files are claimed: another Fill
  // that needs one waits until it is built (or this Fill ends), so each is fetched once.
  std::vector<ChunkRef> Plan(const std::vector<std::pair<std::string, const ManifestEntry*>>& todo,
                             uint64_t fill) {
    std::vector<ChunkRef> plan;
    std::set<std::string> planned;
    std::lock_guard lock(mu);
    for (const auto& [name, e] : todo) {
      if (claimed.count(name) != 0 || building.count(name) != 0 || files.count(name) != 0 ||
          ::access(PartialPath(name).c_str(), F_OK) == 0) {
        continue;
      }
      claimed[name] = fill;
      for (const ChunkRef& c : e->chunks) {
        if (chunks.count(c.hash) == 0 && planned.insert(c.hash).second) plan.push_back(c);
      }
    }
    return plan;
  }

  bool ClaimedByOtherLocked(const std::string& name, uint64_t fill) const {
    auto it = claimed.find(name);
    return it != claimed.end() && it->second != fill;
  }

  void UnclaimLocked(uint64_t fill) {
    std::erase_if(claimed, [fill](const auto& c) { return c.second == fill; });
    built.notify_all();
  }

  // Makes `name` whole here, unless another thread is at it: then waits for that one.
  Status Ensure(const std::string& name, const ManifestEntry& e, const Fetch& fetch, Progress& p,
                const std::function<void(const Progress&)>& report, uint64_t fill) {
    {
      std::unique_lock lock(mu);
      built.wait(lock,
                 [&] { return building.count(name) == 0 && !ClaimedByOtherLocked(name, fill); });
      bool intact = IntactLocked(name);
      if (intact && !ChangedLocked(name)) {
        files[name].used = ++clock;
        p.bytes_present += e.size;
        lock.unlock();
        if (report) report(p);
        return Status::Ok();
      }
      building.insert(name);
      if (intact) {
        lock.unlock();
        // Touched since: its bytes decide (a byte flipped and its mtime put back, say).
        bool same = ContentMatches(FilePath(name), e.chunks);
        lock.lock();
        building.erase(name);
        built.notify_all();
        if (same) {
          RestatLocked(name);
          files[name].used = ++clock;
          p.bytes_present += e.size;
          lock.unlock();
          if (report) report(p);
          return Status::Ok();
        }
        DropLocked(name);
        building.insert(name);
      }
    }
    Result<CachedFile> f = Assemble(name, e, fetch, p, report);
    std::lock_guard lock(mu);
    building.erase(name);
    if (!ClaimedByOtherLocked(name, fill)) claimed.erase(name);
    built.notify_all();
    if (!f.ok()) return f.status();
    f->used = ++clock;
    AddLocked(name, std::move(*f));
    return Status::Ok();
  }
};

ChunkCache::ChunkCache(std::string dir, uint64_t cap) : impl_(std::make_unique<Impl>()) {
  impl_->dir = std::move(dir);
  impl_->cap = cap;
}

ChunkCache::~ChunkCache() = default;

Result<std::unique_ptr<ChunkCache>> ChunkCache::Open(const std::string& dir, uint64_t cap_bytes) {
  for (const std::string& d : {dir, dir + "/files", dir + "/partial"}) {
    TRAINQ_RETURN_IF_ERROR(MakeDirs(d));
  }
  // The constructor is private: Open is the way in.
  std::unique_ptr<ChunkCache> cache(new ChunkCache(dir, cap_bytes));
  cache->impl_->Load();
  return cache;
}

uint64_t ChunkCache::MissingBytes(const Manifest& m) const {
  std::lock_guard lock(impl_->mu);
  std::set<std::string> names, counted;
  uint64_t missing = 0;
  for (const ManifestEntry& e : m.entries) {
    if (!IsFileEntry(e)) continue;
    std::string name = CacheName(e);
    if (impl_->files.count(name) != 0 || !names.insert(name).second) continue;
    for (const ChunkRef& c : e.chunks) {
      if (impl_->chunks.count(c.hash) == 0 && counted.insert(c.hash).second) missing += c.size;
    }
  }
  return missing;
}

Status ChunkCache::Fill(const Manifest& m, const std::string& pin, const Fetch& fetch,
                        const std::function<void(const Progress&)>& progress) {
  std::vector<std::pair<std::string, const ManifestEntry*>> todo;
  {
    std::lock_guard lock(impl_->mu);
    std::set<std::string>& pinned = impl_->pins[pin];
    for (const ManifestEntry& e : m.entries) {
      if (!IsFileEntry(e)) continue;
      todo.emplace_back(CacheName(e), &e);
      pinned.insert(todo.back().first);
    }
  }
  uint64_t fill = 0;
  {
    std::lock_guard lock(impl_->mu);
    fill = ++impl_->fills;
  }
  std::vector<ChunkRef> plan = impl_->Plan(todo, fill);
  {
    // Its own claims first: a Fill waits for another's files only once it holds none unbuilt,
    // so two never wait for each other.
    std::lock_guard lock(impl_->mu);
    std::stable_partition(todo.begin(), todo.end(), [&](const auto& t) {
      auto it = impl_->claimed.find(t.first);
      return it != impl_->claimed.end() && it->second == fill;
    });
  }
  Progress p;
  p.bytes_total = m.bytes;
  Prefetcher ahead(std::move(plan), fetch);
  Fetch from_ahead = [&ahead](const std::vector<ChunkRef>& chunks) { return ahead.Get(chunks); };
  std::set<std::string> done;
  Status st;
  for (size_t i = 0; i < todo.size(); ++i) {
    const auto& [name, e] = todo[i];
    if (!done.insert(name).second) {  // the same file twice: assembled once
      p.bytes_present += e->size;
      if (progress) progress(p);
      continue;
    }
    st = impl_->Ensure(name, *e, from_ahead, p, progress, fill);
    if (!st.ok()) break;
  }
  ahead.Finish();
  p.bytes_fetched += ahead.Unused();
  if (progress) progress(p);
  std::lock_guard lock(impl_->mu);
  impl_->UnclaimLocked(fill);
  Status saved = impl_->SaveLocked();
  return st.ok() ? saved : st;
}

namespace {

// A cached file at `dst`: a hard link, or a copy where the file system cannot make one.
Status LinkOrCopy(const std::string& from, const std::string& dst, mode_t mode) {
  if (::link(from.c_str(), dst.c_str()) == 0) return Status::Ok();
  if (errno != EXDEV && errno != EMLINK && errno != EPERM) return ErrnoStatus("link " + dst, errno);
  return CopyFile(from, dst, mode);
}

struct Owner {
  bool give = false;  // only root can, and only another owner needs it
  uid_t uid = 0;
  gid_t gid = 0;
};

Status MakeTreeDir(const std::string& path, const Owner& owner) {
  if (::mkdir(path.c_str(), 0755) != 0) return ErrnoStatus("mkdir " + path, errno);
  if (::chmod(path.c_str(), 0755) != 0) return ErrnoStatus("chmod " + path, errno);  // umask
  if (owner.give && ::chown(path.c_str(), owner.uid, owner.gid) != 0) {
    return ErrnoStatus("chown " + path, errno);
  }
  return Status::Ok();
}

Status MakeTreeEntry(const ManifestEntry& e, const std::string& path, const std::string& cached,
                     const Owner& owner) {
  if (e.kind == 'd') return MakeTreeDir(path, owner);
  if (IsFileEntry(e)) return LinkOrCopy(cached, path, e.kind == 'x' ? 0555 : 0444);
  if (::symlink(e.target.c_str(), path.c_str()) != 0) return ErrnoStatus("symlink " + path, errno);
  if (owner.give && ::lchown(path.c_str(), owner.uid, owner.gid) != 0) {
    return ErrnoStatus("chown " + path, errno);
  }
  return Status::Ok();
}

}  // namespace

Status ChunkCache::Materialize(const Manifest& m, const std::string& dst, uid_t uid, gid_t gid) {
  std::vector<std::string> cached(m.entries.size());
  {
    std::lock_guard lock(impl_->mu);
    for (size_t i = 0; i < m.entries.size(); ++i) {
      const ManifestEntry& e = m.entries[i];
      if (!IsFileEntry(e)) continue;
      std::string name = CacheName(e);
      if (!impl_->IntactLocked(name)) {
        return Status::NotFound(fmt::format("\"{}\" ({}) is not in the cache", e.path, name));
      }
      impl_->files[name].used = ++impl_->clock;
      cached[i] = impl_->FilePath(name);
    }
  }
  // Each link made moves its file's ctime: the cache made that change, not someone else,
  // and says so in the index (after a restart, a file whose ctime moved is read again).
  auto restat = [&] {
    std::lock_guard lock(impl_->mu);
    for (size_t i = 0; i < m.entries.size(); ++i) {
      if (IsFileEntry(m.entries[i])) impl_->RestatLocked(CacheName(m.entries[i]));
    }
    static_cast<void>(impl_->SaveLocked());  // best effort, as Trim's
  };
  if (m.entries.size() == 1 && m.entries[0].path.empty()) {
    Status st = MakeTreeEntry(m.entries[0], dst, cached[0], {});
    restat();
    return st;
  }
  Owner owner{::geteuid() == 0 && (uid != ::geteuid() || gid != ::getegid()), uid, gid};
  TRAINQ_RETURN_IF_ERROR(MakeTreeDir(dst, owner));
  for (size_t i = 0; i < m.entries.size(); ++i) {
    Status st = MakeTreeEntry(m.entries[i], dst + "/" + m.entries[i].path, cached[i], owner);
    if (!st.ok()) {
      std::error_code ignored;
      std::filesystem::remove_all(dst, ignored);  // links only: the cache keeps its files
      restat();
      return st;
    }
  }
  restat();
  return Status::Ok();
}

bool ChunkCache::Linked(const Manifest& m, const std::string& tree, const std::string& pin) {
  struct Known {
    uint64_t size = 0, ino = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
  };
  std::vector<Known> known(m.entries.size());
  std::vector<std::string> names;
  {
    std::lock_guard lock(impl_->mu);
    for (size_t i = 0; i < m.entries.size(); ++i) {
      if (!IsFileEntry(m.entries[i])) continue;
      names.push_back(CacheName(m.entries[i]));
      auto it = impl_->files.find(names.back());
      if (it == impl_->files.end()) return false;
      const CachedFile& f = it->second;
      known[i] = {f.size, f.ino, f.mtime_ns, f.ctime_ns};
    }
  }
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const ManifestEntry& e = m.entries[i];
    struct stat st = {};
    std::string path = e.path.empty() ? tree : tree + "/" + e.path;
    if (::lstat(path.c_str(), &st) != 0) return false;
    // A file there is the cache's own inode, as the cache last knew it (IntactLocked and
    // ChangedLocked, through the copy's link).
    bool same = e.kind == 'd' ? S_ISDIR(st.st_mode)
                : e.kind == 'l'
                    ? S_ISLNK(st.st_mode) && static_cast<uint64_t>(st.st_size) == e.target.size()
                    : S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_ino) == known[i].ino &&
                          static_cast<uint64_t>(st.st_size) == known[i].size &&
                          MtimeNs(st) == known[i].mtime_ns && CtimeNs(st) == known[i].ctime_ns;
    if (!same) return false;
  }
  if (m.entries.empty()) return false;
  if (!pin.empty()) {
    std::lock_guard lock(impl_->mu);
    std::set<std::string>& pinned = impl_->pins[pin];
    for (const std::string& name : names) {
      pinned.insert(name);
      if (auto it = impl_->files.find(name); it != impl_->files.end()) {
        it->second.used = ++impl_->clock;
      }
    }
  }
  return true;
}

Result<std::string> ChunkCache::ReadChunk(const std::string& hash) const {
  std::optional<uint64_t> size;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->chunks.find(hash);
    if (it != impl_->chunks.end()) size = it->second.size;
  }
  std::optional<std::string> data;
  if (size) data = impl_->Held({hash, *size});
  if (!data) return Status::NotFound("chunk " + hash + " is not in the cache");
  return std::move(*data);
}

void ChunkCache::Unpin(const std::string& pin) {
  std::lock_guard lock(impl_->mu);
  impl_->pins.erase(pin);
}

void ChunkCache::Trim() {
  std::lock_guard lock(impl_->mu);
  Impl& c = *impl_;
  bool dropped = false;
  while (c.cap != 0 && c.bytes > c.cap) {
    const std::string* victim = nullptr;
    uint64_t oldest = UINT64_MAX;
    for (const auto& [name, f] : c.files) {
      if (f.used < oldest && !c.PinnedLocked(name)) {
        oldest = f.used;
        victim = &name;
      }
    }
    if (victim == nullptr) break;  // all pinned: over the cap until they are unpinned
    c.DropLocked(std::string(*victim), false);
    dropped = true;
  }
  if (!dropped) return;
  c.RebuildChunksLocked();
  // Best effort: an index left behind names files that are gone, which Open drops.
  static_cast<void>(c.SaveLocked());
}

uint64_t ChunkCache::bytes() const {
  std::lock_guard lock(impl_->mu);
  return impl_->bytes;
}

}  // namespace trainq
