// Local users and groups from the password and group databases (NSS), and whether a user may
// enter a directory. A shared daemon runs each job as the user who submitted it
// (docs/operations.md, "Jobs run as their submitter"); these are the facts it needs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainq/status.h"

namespace trainq {

struct UserInfo {
  std::string name;
  int64_t uid = -1;
  int64_t gid = -1;  // the primary group
  std::string home;
  std::string shell;
  std::vector<int64_t> groups;  // every group the user is in (getgrouplist), gid included
};

// kNotFound "no local user 'NAME'" when the databases do not know the user.
Result<UserInfo> LookupUserByName(std::string_view name);
Result<UserInfo> LookupUserById(int64_t uid);

// The login name of `uid`, or its number as text ("unknown" for a negative uid).
std::string UserName(int64_t uid);
// The home directory of `uid` from the password database; "/" when it has none.
std::string HomeDir(int64_t uid);

// The groups of the user `name` whose primary group is `gid` (getgrouplist), `gid` first.
std::vector<int64_t> GroupList(const std::string& name, int64_t gid);

// The id of the group named `name`; kInvalid "no local group 'NAME'" when there is none.
Result<int64_t> LookupGroupId(std::string_view name);

// Whether `user` is a member of the group named `group_name` (its primary group counts);
// kInvalid naming the group when there is no such group.
Result<bool> UserInGroup(const UserInfo& user, std::string_view group_name);

// What stat said about one directory on the way to the one a user wants to enter; the input
// of JudgeMayEnter. `owner` and `group` are names, for the message only.
struct DirFacts {
  std::string path;
  bool exists = false;
  bool directory = false;
  int64_t uid = -1;
  int64_t gid = -1;
  mode_t mode = 0;  // permission bits only
  std::string owner;
  std::string group;
};

// Whether `user` may chdir into `dir`, given the facts of every directory on the way
// (root first, `dir` last): each must exist, be a directory and be searchable (x) by the
// user through the owner, group or other bits, in that order, as the kernel checks them.
// Root may enter any directory. kInvalid naming `field`, e.g.
// "cwd: user ada may not enter /srv/x (drwx------ root root)". POSIX ACLs are not read: the
// shim's own chdir as the user is the final word.
Status JudgeMayEnter(const std::string& dir, const std::vector<DirFacts>& chain,
                     const UserInfo& user, std::string_view field);

// JudgeMayEnter on the real file system. `dir` must be absolute. The directories checked are
// those of `dir` as written and of its real path (symbolic links resolved).
Status CheckMayEnter(const std::string& dir, const UserInfo& user, std::string_view field);

// Whether `user` may read `target` (a file: r; a directory: r and x), its directories
// already judged by JudgeMayEnter. kInvalid naming `field`, e.g. "--mount: user ada may not
// read /srv/x (-rw------- root root)".
Status JudgeMayRead(const DirFacts& target, const UserInfo& user, std::string_view field);

// CheckMayEnter on the directories above `path` (as written and resolved), then
// JudgeMayRead on `path` itself (links followed). `path` must be absolute. Stats only, never
// opens: it names what is in the way, while opening as the user (OpenUserFile,
// src/os/user_file.h) is the final word.
Status CheckMayRead(const std::string& path, const UserInfo& user, std::string_view field);

// "drwxr-x---" for a directory with mode 0750.
std::string DirModeString(mode_t mode);

}  // namespace trainq
