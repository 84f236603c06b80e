#include "src/os/snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include <fmt/format.h>

#include "src/os/crypto/token_crypto.h"
#include "src/os/fd.h"
#include "src/os/run_dir.h"
#include "src/os/system.h"
#include "src/os/user_file.h"

namespace trainq {

namespace {

// A work tree's file, listed as a regular file: one swapped for a fifo or a link since is
// named, never waited for or followed.
Result<UniqueFd> OpenListed(const std::string& path) {
  Result<UniqueFd> fd = OpenUserFile(path, FileWant::kRegular);
  if (!fd.ok()) return Status::Io(fd.status().message());
  return fd;
}

Result<std::string> HashFile(const std::string& path) {
  Result<UniqueFd> fd = OpenListed(path);
  if (!fd.ok()) return fd.status();
  Sha256 h;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd->get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path, errno);
    if (n == 0) break;
    h.Add(std::string_view(buf, static_cast<size_t>(n)));
  }
  return h.HexDigest();
}

// Copies `from` to `to` (a new file of `mode`), through a temp file so a crash leaves no
// half object under its final name.
Status CopyFile(const std::string& from, const std::string& to, mode_t mode) {
  Result<UniqueFd> fd = OpenListed(from);
  if (!fd.ok()) return fd.status();
  struct stat st = {};
  if (::fstat(fd->get(), &st) != 0) return ErrnoStatus("stat " + from, errno);
  Result<std::string> data = ReadAtMost(fd->get(), 0, static_cast<uint64_t>(st.st_size), from);
  if (!data.ok()) return data.status();
  TRAINQ_RETURN_IF_ERROR(WriteFileAtomic(to, *data, Durability::kNoSync));
  if (::chmod(to.c_str(), mode) != 0) return ErrnoStatus("chmod " + to, errno);
  return Status::Ok();
}

Result<std::string> Git(const std::string& git, const std::string& dir,
                        std::vector<std::string> args) {
  std::vector<std::string> argv = {git, "-C", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  Result<CommandOutput> out = RunCommand(argv);
  if (!out.ok()) return out.status();
  if (out->exit_code != 0) {
    return Status::Invalid(
        fmt::format("git {}: {}", args.front(), out->output.substr(0, out->output.find('\n'))));
  }
  return std::move(out->output);
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// One line of the manifest: fields each ended by a NUL, which no path holds.
std::string Entry(std::initializer_list<std::string_view> fields) {
  std::string out;
  for (std::string_view f : fields) {
    out += f;
    out += '\0';
  }
  return out;
}

Status MakeParents(const std::string& root, const std::string& rel) {
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return Status::Ok();
  return MakeDirs(root + "/" + rel.substr(0, slash));
}

}  // namespace

bool InGitWorkTree(const std::string& dir) {
  std::string at = dir;
  while (!at.empty()) {
    if (FileExists(at + "/.git")) return true;
    size_t slash = at.rfind('/');
    if (slash == std::string::npos) break;
    at.resize(slash);
  }
  return FileExists("/.git");
}

Result<GitState> ReadGitState(const std::string& dir) {
  Result<std::string> git = FindOnPath("git");
  if (!git.ok()) {
    return Status::Invalid("--snapshot: git is not installed; snapshots copy what git tracks");
  }
  GitState state;
  Result<std::string> root = Git(*git, dir, {"rev-parse", "--show-toplevel"});
  if (!root.ok()) {
    return Status::Invalid(fmt::format(
        "--snapshot: {} is not in a git work tree; snapshots copy the files git tracks (and "
        "untracked ones it does not ignore)",
        dir));
  }
  state.root = Trimmed(*root);
  if (Result<std::string> head = Git(*git, state.root, {"rev-parse", "--verify", "-q", "HEAD"});
      head.ok()) {
    state.commit = Trimmed(*head);
  }
  if (Result<std::string> branch = Git(*git, state.root, {"symbolic-ref", "-q", "--short", "HEAD"});
      branch.ok()) {
    state.branch = Trimmed(*branch);
  }
  Result<std::string> status = Git(*git, state.root, {"status", "--porcelain"});
  if (!status.ok()) return status.status();
  state.dirty = !status->empty();
  if (!state.commit.empty() && state.dirty) {
    Result<std::string> diff = Git(*git, state.root, {"diff", "HEAD", "--binary"});
    if (!diff.ok()) return diff.status();
    state.diff = std::move(*diff);
  }
  Result<std::string> listed =
      Git(*git, state.root, {"ls-files", "-z", "--cached", "--others", "--exclude-standard"});
  if (!listed.ok()) return listed.status();
  std::vector<std::string> names;
  for (size_t start = 0; start < listed->size();) {
    size_t end = listed->find('\0', start);
    if (end == std::string::npos) end = listed->size();
    names.push_back(listed->substr(start, end - start));
    start = end + 1;
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (std::string& name : names) {
    struct stat st;
    if (::lstat((state.root + "/" + name).c_str(), &st) != 0) continue;  // deleted
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;          // a submodule
    state.files.push_back({std::move(name), static_cast<uint64_t>(st.st_size)});
  }
  // A wholly ignored directory is listed once, as "name/", without reading what it holds.
  Result<std::string> ignored = Git(*git, state.root,
                                    {"ls-files", "-z", "--others", "--ignored",
                                     "--exclude-standard", "--directory", "--no-empty-directory"});
  if (!ignored.ok()) return ignored.status();
  for (size_t start = 0; start < ignored->size();) {
    size_t end = ignored->find('\0', start);
    if (end == std::string::npos) end = ignored->size();
    std::string name = ignored->substr(start, end - start);
    start = end + 1;
    if (name.size() > 1 && name.back() == '/' && name.find('/') == name.size() - 1) {
      name.pop_back();
      if (ValidSnapshotLink(name)) state.ignored_dirs.push_back(std::move(name));
    }
  }
  std::sort(state.ignored_dirs.begin(), state.ignored_dirs.end());
  return state;
}

Result<SnapshotResult> MakeSnapshot(const GitState& git, const std::string& store,
                                    const std::vector<std::string>& links) {
  std::string objects = store + "/objects", trees = store + "/trees";
  TRAINQ_RETURN_IF_ERROR(MakeDirs(objects));
  TRAINQ_RETURN_IF_ERROR(MakeDirs(trees));
  SnapshotResult out;
  std::string tmpl = trees + "/.new-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return ErrnoStatus("mkdtemp in " + trees, errno);
  std::string tree = tmpl;
  Sha256 manifest;
  for (const SnapshotFile& f : git.files) {
    std::string src = git.root + "/" + f.path, dst = tree + "/" + f.path;
    TRAINQ_RETURN_IF_ERROR(MakeParents(tree, f.path));
    struct stat st;
    if (::lstat(src.c_str(), &st) != 0) continue;  // gone since git listed it
    if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      ssize_t n = ::readlink(src.c_str(), target.data(), target.size());
      if (n < 0) return ErrnoStatus("readlink " + src, errno);
      target.resize(static_cast<size_t>(n));
      if (::symlink(target.c_str(), dst.c_str()) != 0) return ErrnoStatus("symlink " + dst, errno);
      manifest.Add(Entry({f.path, "l", target}));
      continue;
    }
    Result<std::string> hash = HashFile(src);
    if (!hash.ok()) return hash.status();
    bool exec = (st.st_mode & S_IXUSR) != 0;
    // The mode is part of what is stored: the same bytes as a script and as data differ.
    std::string object = fmt::format("{}/{}{}", objects, *hash, exec ? "x" : "");
    if (!FileExists(object)) {
      TRAINQ_RETURN_IF_ERROR(CopyFile(src, object, exec ? 0555 : 0444));
      out.bytes_stored += static_cast<uint64_t>(st.st_size);
    }
    if (::link(object.c_str(), dst.c_str()) != 0) return ErrnoStatus("link " + dst, errno);
    manifest.Add(Entry({f.path, exec ? "x" : "f", *hash}));
    out.bytes += static_cast<uint64_t>(st.st_size);
    ++out.files;
  }
  out.id = manifest.HexDigest();
  if (!git.diff.empty()) {
    Sha256 h;
    h.Add(git.diff);
    out.diff_sha256 = h.HexDigest();
    out.diff_path = fmt::format("{}/{}", objects, out.diff_sha256);
    if (!FileExists(out.diff_path)) {
      TRAINQ_RETURN_IF_ERROR(WriteFileAtomic(out.diff_path, git.diff, Durability::kNoSync));
    }
  }
  for (const std::string& path : links) {
    std::string in_tree = tree + "/" + path, target = git.root + "/" + path;
    struct stat st;
    if (!ValidSnapshotLink(path) || ::lstat(in_tree.c_str(), &st) == 0) continue;  // it has it
    // Made in the work tree as the user's umask says, as `mkdir -p` would.
    for (size_t end = path.find('/');; end = path.find('/', end + 1)) {
      std::string dir = git.root + "/" + path.substr(0, end);
      if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
        return ErrnoStatus("mkdir " + dir, errno);
      }
      if (end == std::string::npos) break;
    }
    TRAINQ_RETURN_IF_ERROR(MakeParents(tree, path));
    if (::symlink(target.c_str(), in_tree.c_str()) != 0) {
      return ErrnoStatus("symlink " + in_tree, errno);
    }
    out.links.emplace_back(path, target);
  }
  // Each submit gets its own tree: a job writes its outputs there, and two runs of the same
  // code must not share them.
  out.dir = fmt::format("{}/{}-{}", trees, out.id.substr(0, 16), tree.substr(tree.size() - 6));
  if (::rename(tree.c_str(), out.dir.c_str()) != 0) return ErrnoStatus("rename " + tree, errno);
  return out;
}

}  // namespace trainq
