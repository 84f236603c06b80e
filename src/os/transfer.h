// Moving a tree to another node (docs/cluster.md, "Code and data"): a manifest of the tree's
// files, each split at content-defined boundaries into chunks named by their SHA-256, and a
// node's cache of files assembled from those chunks. A changed file costs only its changed
// chunks; a file whose chunks a node holds costs nothing; every chunk is checked against its
// name before it is used.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq {

struct ChunkRef {
  std::string hash;  // SHA-256 of the chunk's bytes, 64 lowercase hex digits
  uint64_t size = 0;
  bool operator==(const ChunkRef&) const = default;
};

// Boundaries by a gear rolling hash (FastCDC's gear, one mask): no chunk below `min` or above
// `max` bytes but a file's last, between `min` and `avg` on average. Insert or change bytes in
// the middle of a file and only the chunks around the change differ.
struct ChunkLimits {
  size_t min = 64 << 10;
  size_t avg = 256 << 10;
  size_t max = 1 << 20;
  bool operator==(const ChunkLimits&) const = default;
};

// Splits a stream into chunks as its bytes arrive (any piece sizes give the same chunks).
class Chunker {
 public:
  explicit Chunker(ChunkLimits limits = {});
  ~Chunker();
  void Add(std::string_view data);
  // Ends the stream: the last chunk (if any bytes are left) joins `chunks()`.
  void Finish();
  const std::vector<ChunkRef>& chunks() const { return chunks_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::vector<ChunkRef> chunks_;
};

// The chunks of the regular file at `path` (not followed if a symbolic link). kIo naming it.
Result<std::vector<ChunkRef>> ChunkFile(const std::string& path, ChunkLimits limits = {});

struct ManifestEntry {
  std::string path;    // relative to the manifest's root, "/"-separated; "" for the root itself
  char kind = 'f';     // 'f' file, 'x' executable file, 'l' symbolic link, 'd' directory
  std::string target;  // a link's target, as it is
  uint64_t size = 0;   // a file's bytes
  std::vector<ChunkRef> chunks;  // a file's, in order; their sizes add up to `size`
  bool operator==(const ManifestEntry&) const = default;
};

// A tree (or one file) as it was when the manifest was made.
struct Manifest {
  std::string root;  // the absolute path the manifest was made from, on its node
  // Sorted by path with "/" before every other byte ("a", "a/b", "a.b"): a directory comes
  // right before what it holds.
  std::vector<ManifestEntry> entries;
  uint64_t bytes = 0;  // of all files
  uint64_t files = 0;
  bool operator==(const Manifest&) const = default;
};

// What a file is known by in a cache: the SHA-256 of its chunks' names in order (a file's
// content and nothing else).
std::string FileId(const ManifestEntry& e);

// The manifest as text (JSON, entries in order) and back. The parse refuses, with kInvalid
// naming what is wrong, anything MakeManifest could not have written: a path that is
// absolute, has an empty, "." or ".." part, or appears twice; an entry below a path that is
// not a directory; a kind other than f/x/l/d; a hash that is not 64 lowercase hex digits;
// chunk sizes not adding up to the size, or a chunk of 0 bytes; also a root that is not
// absolute, entries out of order, a path "" beside other entries, a NUL in a path or target,
// and fields of another kind (a directory's size). Every problem is named, each with its
// entry's index and path. `bytes` and `files` are counted, never read from the text.
std::string ManifestText(const Manifest& m);
Result<Manifest> ParseManifest(std::string_view text);

// What MakeManifest remembers between runs so an unchanged file is not read again (git's
// index, rsync's quick check): per absolute path, the size, mtime (ns), inode and device
// with the chunks. Kept as a file; a missing or damaged one is an empty cache. Chunks may be
// called from several threads at once.
class ChunkMemo {
 public:
  explicit ChunkMemo(std::string path) : path_(std::move(path)) {}
  // The chunks remembered for `path` when its stat still matches, else read and remembered.
  Result<std::vector<ChunkRef>> Chunks(const std::string& path, ChunkLimits limits = {});
  // Writes the file (atomically); only the paths asked for since it was loaded are kept,
  // and those below the roots passed to Keep (trees known unchanged, not walked for chunks).
  Status Save();
  void Keep(const std::string& root);
  uint64_t bytes_read() const { return bytes_read_; }  // hashed anew by Chunks

 private:
  void Load();
  std::string path_;
  bool loaded_ = false;
  struct Known {
    uint64_t size = 0, ino = 0, dev = 0;
    int64_t mtime_ns = 0;
    ChunkLimits limits;  // the chunks of other limits are other chunks
    std::vector<ChunkRef> chunks;
  };
  std::mutex mu_;  // Chunks is called from several threads at once
  std::map<std::string, Known> known_, used_;
  std::vector<std::string> kept_;
  uint64_t bytes_read_ = 0;
};

// What `root` (walked as MakeManifest does) is now, as the SHA-256 of each entry's path,
// type, mode, size, mtime, ctime, inode and device, without reading a file: equal
// fingerprints mean an unchanged tree, as far as stat can tell (git's index relies on the
// same), so its manifest can be used again. Errors as MakeManifest's.
Result<std::string> TreeFingerprint(const std::string& root);

// The manifest of `root` (a directory, walked without following links, or one regular
// file). Special files (sockets, fifos, devices) are left out. kIo naming a path that could
// not be read; kInvalid when `root` is not absolute, does not exist or is neither a directory
// nor a regular file, or a name is not UTF-8 (JSON cannot carry it). `memo` may be null.
Result<Manifest> MakeManifest(const std::string& root, ChunkMemo* memo, ChunkLimits limits = {});

// The manifest of what below `root` (a directory) matches `patterns` (glob(3), relative to
// `root`): each matching file, and each matching directory whole, with the directories above
// them; links that match are left out (never followed). With `owner`, so are files (as
// opened) another user owns: a root daemon lists only what a job's user could give away.
// No match: an empty manifest.
Result<Manifest> MakeManifestOfMatches(const std::string& root,
                                       const std::vector<std::string>& patterns,
                                       ChunkLimits limits = {},
                                       std::optional<uid_t> owner = std::nullopt);

// Where the bytes of each chunk of `m` are on the node that made it: the chunk's hash to
// (absolute file path, offset). The first place wins.
struct ChunkSource {
  std::string path;
  uint64_t offset = 0;
  uint64_t size = 0;
};
std::map<std::string, ChunkSource> ChunkSources(const Manifest& m);

// Reads a chunk from its source and checks it against its name: kConflict saying the file
// changed since the manifest was made when the bytes differ, kIo when it cannot be read or is no
// longer a regular file (opened with OpenUserFile: a fifo or link swapped in is named, never
// waited for), kInvalid for a chunk said to be over 64 MiB.
Result<std::string> ReadChunk(const ChunkSource& at, const std::string& hash);

// A node's cache of files assembled from chunks, kept in `dir` (0700): `files/ID` each
// file by its FileId (mode 0444), `files/IDx` an executable one (0555: links share their
// mode, so the same bytes as a script and as data are two files), `chunks.idx` naming which
// chunks each holds (JSON, rewritten at the end of each Fill and Trim), `partial/ID` a file
// being assembled. A file under files/ that the index does not name (a crash before the index
// was written) is removed at Open; one whose size, mtime or inode differs from the index's
// (written to through a link) counts as absent and is built anew. Pins live in memory only.
// Safe to use from several threads of one process.
class ChunkCache {
 public:
  // kIo when `dir` cannot be made. `cap_bytes` 0: no cap.
  static Result<std::unique_ptr<ChunkCache>> Open(const std::string& dir, uint64_t cap_bytes);
  ~ChunkCache();

  // Bytes of `m`'s files whose content is here neither as a file nor as chunks of other files.
  uint64_t MissingBytes(const Manifest& m) const;

  // Fetches up to some bytes' worth of chunks at once (their bytes concatenated, in order);
  // called with at most 32 chunks and 8 MiB, from up to three threads at once (Fill fetches
  // ahead of the files that need the chunks, batching small files together).
  using Fetch = std::function<Result<std::string>(const std::vector<ChunkRef>&)>;

  struct Progress {
    uint64_t bytes_total = 0;      // of the manifest's files
    uint64_t bytes_present = 0;    // found here (files or chunks)
    uint64_t bytes_fetched = 0;    // received through Fetch
    uint64_t bytes_refetched = 0;  // received again after a chunk failed its check
  };

  // Makes every file of `m` whole here: a chunk already held (in any file) is copied from
  // there, after checking it; the others are fetched, checked, and written to the partial
  // file, which survives a failed call so the next one goes on where it stopped. A fetched
  // chunk whose bytes do not match its name is asked for once more, then kIo naming it. A
  // file two calls need is assembled by one while the other waits. Calls `progress` after
  // each write (may be null). The files stay pinned under `pin` (see Trim), from the start of
  // the call, whatever its result.
  Status Fill(const Manifest& m, const std::string& pin, const Fetch& fetch,
              const std::function<void(const Progress&)>& progress);

  // Builds `m`'s tree at `dst` (which must not exist): directories mode 0755 owned by
  // `uid`:`gid`, files hard links to the cache's (a copy where a link cannot be made),
  // links as they are. A single-file manifest makes `dst` that file. kNotFound naming a file
  // not here (Fill first); kIo naming what failed, `dst` then removed. Ownership is given only
  // when running as root (directories and links; a file shared with the cache keeps its owner).
  Status Materialize(const Manifest& m, const std::string& dst, uid_t uid, gid_t gid);

  // Whether `tree` is `m`'s tree as Materialize made it from this cache's files as they are
  // now: every entry there, of its kind, each file the very file the cache holds, unchanged
  // since the cache knew it (inode, size, mtime, ctime). A file rebuilt or touched since, or
  // an entry removed, makes it false. Stats each entry once; when true, `m`'s files are
  // pinned under `pin` (if not empty) as Fill would: the tree is ready without a Fill.
  bool Linked(const Manifest& m, const std::string& tree, const std::string& pin = "");

  // The bytes of chunk `hash` if a file here holds it (checked); kNotFound otherwise.
  Result<std::string> ReadChunk(const std::string& hash) const;

  // Pins keep files from eviction: a waiting or running job's. Unpin drops them.
  void Unpin(const std::string& pin);
  // Removes the least recently used files not pinned until the cache holds at most its cap.
  // Fill and Materialize use a manifest's files.
  void Trim();
  uint64_t bytes() const;  // of the files held

 private:
  ChunkCache(std::string dir, uint64_t cap);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainq
