// Code snapshots (docs/workflow.md, "Code snapshots and run records"): a copy of a working
// tree made at submit, which the job runs in, so editing the tree never changes a queued run.
// Files are stored by content once (store/objects), and each snapshot is a tree of hard
// links to them (store/trees/ID-...), so a second snapshot of the same code costs its
// hashing and linking, not another copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainq/status.h"

namespace trainq {

struct SnapshotFile {
  std::string path;  // relative to the tree's root
  uint64_t size = 0;
};

// What `git` says of a work tree.
struct GitState {
  std::string root;    // the top of the work tree
  std::string commit;  // HEAD, 40 hex digits; "" before the first commit
  std::string branch;  // "" when detached
  bool dirty = false;  // tracked files changed or untracked files present
  std::string diff;    // `git diff HEAD --binary`: what the tree holds beyond the commit
  std::vector<SnapshotFile> files;  // tracked and untracked-not-ignored regular files
  // The top-level directories git ignores ("data", "checkpoints"), sorted.
  std::vector<std::string> ignored_dirs;
};

// Whether `path` may name a link in a snapshot's tree (config snapshot_link): relative, inside
// the tree, with no "." or ".." part. Inline: the config's check links no snapshot code.
inline bool ValidSnapshotLink(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.back() == '/') return false;
  for (size_t start = 0; start <= path.size();) {
    size_t end = std::min(path.find('/', start), path.size());
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part == ".git") return false;
    start = end + 1;
  }
  return path.find('\0') == std::string_view::npos;
}

// Whether `dir` or a directory above it holds a `.git`: a check of the file system only, no
// git process (a submit outside any work tree pays nothing for snapshots).
bool InGitWorkTree(const std::string& dir);

// Runs git in `dir`. kInvalid naming --snapshot when git is missing or `dir` is not in a
// git work tree.
Result<GitState> ReadGitState(const std::string& dir);

struct SnapshotResult {
  std::string id;   // SHA-256 of the manifest (path, mode, content of every file)
  std::string dir;  // the snapshot's tree: the job runs here
  size_t files = 0;
  uint64_t bytes = 0;         // of all its files
  uint64_t bytes_stored = 0;  // of the files this snapshot stored anew
  std::string diff_sha256;    // the diff's content, stored as an object ("" if none)
  std::string diff_path;
  // Paths of the tree that are links to the work tree's own (`MakeSnapshot`'s `links`), and
  // where each points.
  std::vector<std::pair<std::string, std::string>> links;
};

// Stores `git.files` of `git.root` and `git.diff` in `store` (created 0700 if absent) and
// builds the snapshot's tree. Symbolic links are recreated as they are; files that vanished
// since git listed them are left out. Each of `links` the tree does not hold becomes a link to
// the same path in the work tree (a directory made there first if it is missing), so a job's
// data and outputs stay where the project keeps them. kIo naming the file that could not be
// read.
Result<SnapshotResult> MakeSnapshot(const GitState& git, const std::string& store,
                                    const std::vector<std::string>& links = {});

}  // namespace trainq
