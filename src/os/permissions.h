// Who may read and enter trainq's directories (docs/operations.md, "Files and permissions").
// A job's environment (API keys, tokens) is stored in the state dir and sent over the
// socket, so both must be the user's alone. Every refusal is kPermission, naming the path,
// what is wrong and how to fix it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "src/os/state_paths.h"
#include "trainq/status.h"

namespace trainq {

// What lstat or stat said about a path; the input of the pure judgements below.
struct PathFacts {
  bool exists = false;
  bool symlink = false;
  bool directory = false;
  int64_t uid = -1;
  mode_t mode = 0;  // permission bits only
  int64_t gid = -1;
  int64_t ctime_ns = 0;  // the inode's change time (a mode, an entry added or removed)
};

PathFacts LstatFacts(const std::string& path);
PathFacts StatFacts(const std::string& path);
PathFacts FdFacts(int fd);  // what fstat says of an open file

// A directory only `euid` may enter (the socket's directory): it exists, is not a symbolic
// link, is a directory owned by `euid` and has no group or other permission bits.
Status JudgePrivateDir(const std::string& dir, const PathFacts& facts, int64_t euid);
// A state dir (links followed: it may live on another disk): owned by `euid` and writable
// by no one else. Others may read it (0755); the files inside are 0600.
Status JudgeStateDir(const std::string& dir, const PathFacts& facts, int64_t euid);

// JudgePrivateDir on the real directory, for this process's euid.
Status CheckPrivateDir(const std::string& dir);
// Creates `dir` (its parent must exist) with mode 0700 unless it exists, then checks it.
Status MakePrivateDir(const std::string& dir);
// The state dir as JudgeStateDir says, and none of the files trainq opens there by name
// (database, -wal, -shm, settings.json, daemon.log, daemon.lock) a symbolic link: trainq
// would write through it into whatever file it points at.
Status CheckStateDir(const StatePaths& paths);
// The files above that trainq creates, for CheckStateDir and TightenStateFiles.
std::vector<std::string> StateFiles(const StatePaths& paths);
// chmod 0600 on each of `files` that exists with group or other bits (made by an older
// trainq, or SQLite under another umask). Never follows a link.
Status TightenStateFiles(const std::vector<std::string>& files);

// Takes the group and other bits off every entry of `dir` but those named in `open` (links
// are left alone: chmod would follow them). A shared daemon's state dir lets users pass
// through (0711) to the trees staged for them: every other entry must then be root's alone.
Status CloseEntriesToOthers(const std::string& dir, const std::vector<std::string>& open);

// chmod `path` to `mode`; the error names both ("chmod 0755 PATH").
Status ChangeMode(const std::string& path, mode_t mode);
// Gives `path` to the group `gid`, its owner unchanged (a shared daemon's socket_group).
Status ChangeGroup(const std::string& path, int64_t gid);
// Gives `path` (links followed) to `uid` and `gid`; the error names it ("chown PATH").
Status ChangeOwner(const std::string& path, int64_t uid, int64_t gid);
// Creates the directory `path` with `mode` (less the umask); one already there is Ok.
Status MakeDir(const std::string& path, mode_t mode);

// Sets the process's umask to 077 (every file trainqd creates is 0600, every directory
// 0700) and returns the one it had, which jobs get back (RunSpec::umask).
mode_t RestrictUmask();
// Sets the process's umask to `mask` and returns the one it had, for the caller to put back.
mode_t SetUmask(mode_t mask);
// The process's umask, left as it is.
mode_t CurrentUmask();

}  // namespace trainq
