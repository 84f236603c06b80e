#include "src/os/users.h"

#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>

#include <fmt/format.h>

namespace trainq {
namespace {

// Calls a getpw*_r/getgr*_r function with a buffer that grows while it is too small.
template <class Entry, class Call>
Result<bool> LookupWithBuffer(Entry& entry, std::vector<char>& buffer, Call call) {
  buffer.resize(1024);
  for (;;) {
    Entry* found = nullptr;
    int err = call(&entry, buffer.data(), buffer.size(), &found);
    if (err == ERANGE && buffer.size() < (1u << 24)) {
      buffer.resize(buffer.size() * 4);
      continue;
    }
    // ENOENT, ESRCH, EBADF and EPERM also mean "not found" (getpwnam_r(3)).
    if (err == 0 || err == ENOENT || err == ESRCH || err == EBADF || err == EPERM) {
      return found != nullptr;
    }
    return ErrnoStatus("reading the user and group databases", err);
  }
}

// The entry's fields, `groups` left empty: getgrouplist may ask a directory server, and a
// name or a home directory does not need it.
UserInfo FromPasswd(const struct passwd& pw) {
  UserInfo u;
  u.name = pw.pw_name;
  u.uid = pw.pw_uid;
  u.gid = pw.pw_gid;
  u.home = pw.pw_dir != nullptr ? pw.pw_dir : "";
  u.shell = pw.pw_shell != nullptr ? pw.pw_shell : "";
  return u;
}

bool ValidUid(int64_t uid) { return uid >= 0 && uid <= static_cast<int64_t>(UINT32_MAX) - 1; }

// The password database's entry for `uid`, groups not looked up; nullopt when there is none.
Result<std::optional<UserInfo>> PasswdById(int64_t uid) {
  if (!ValidUid(uid)) return std::optional<UserInfo>();
  struct passwd pw;
  std::vector<char> buffer;
  auto found = LookupWithBuffer(pw, buffer, [uid](auto* e, char* b, size_t n, auto** r) {
    return ::getpwuid_r(static_cast<uid_t>(uid), e, b, n, r);
  });
  if (!found.ok()) return found.status();
  if (!*found) return std::optional<UserInfo>();
  return std::optional<UserInfo>(FromPasswd(pw));
}

UserInfo WithGroups(UserInfo u) {
  u.groups = GroupList(u.name, u.gid);
  return u;
}

std::string NameOfGroup(int64_t gid) {
  struct group gr;
  std::vector<char> buffer;
  auto found = LookupWithBuffer(gr, buffer, [gid](auto* e, char* b, size_t n, auto** r) {
    return ::getgrgid_r(static_cast<gid_t>(gid), e, b, n, r);
  });
  return found.ok() && *found ? gr.gr_name : std::to_string(gid);
}

// The x bit that applies to `user` for a directory with these facts.
bool MaySearch(const DirFacts& d, const UserInfo& user) {
  if (user.uid == 0) return true;  // CAP_DAC_READ_SEARCH
  if (d.uid == user.uid) return (d.mode & S_IXUSR) != 0;
  bool member = std::find(user.groups.begin(), user.groups.end(), d.gid) != user.groups.end();
  if (member || d.gid == user.gid) return (d.mode & S_IXGRP) != 0;
  return (d.mode & S_IXOTH) != 0;
}

// "/a/b/c" -> "/", "/a", "/a/b", "/a/b/c".
std::vector<std::string> Prefixes(const std::string& path) {
  std::vector<std::string> out = {"/"};
  for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
    if (at > 0 && path[at - 1] != '/') out.push_back(path.substr(0, at));
  }
  if (path.size() > 1 && path.back() != '/') out.push_back(path);
  return out;
}

DirFacts StatDir(const std::string& path) {
  DirFacts d;
  d.path = path;
  struct stat st = {};
  if (::stat(path.c_str(), &st) != 0) return d;
  d.exists = true;
  d.directory = S_ISDIR(st.st_mode);
  d.uid = st.st_uid;
  d.gid = st.st_gid;
  d.mode = st.st_mode & 07777;
  d.owner = UserName(d.uid);
  d.group = NameOfGroup(d.gid);
  return d;
}

}  // namespace

std::vector<int64_t> GroupList(const std::string& name, int64_t gid) {
  std::vector<gid_t> groups(32);
  auto primary = static_cast<gid_t>(gid);
  for (;;) {
    int n = static_cast<int>(groups.size());
    if (::getgrouplist(name.c_str(), primary, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      break;
    }
    if (groups.size() >= 65536) break;  // NGROUPS_MAX: the kernel takes no more
    groups.resize(static_cast<size_t>(std::max(n, static_cast<int>(groups.size()) * 2)));
  }
  std::vector<int64_t> out(groups.begin(), groups.end());
  out.erase(std::remove(out.begin(), out.end(), gid), out.end());
  out.insert(out.begin(), gid);
  return out;
}

Result<UserInfo> LookupUserByName(std::string_view name) {
  std::string n(name);
  struct passwd pw;
  std::vector<char> buffer;
  auto found = LookupWithBuffer(pw, buffer, [&n](auto* e, char* b, size_t size, auto** r) {
    return ::getpwnam_r(n.c_str(), e, b, size, r);
  });
  if (!found.ok()) return found.status();
  if (!*found) return Status::NotFound(fmt::format("no local user '{}'", n));
  return WithGroups(FromPasswd(pw));
}

Result<UserInfo> LookupUserById(int64_t uid) {
  Result<std::optional<UserInfo>> entry = PasswdById(uid);
  if (!entry.ok()) return entry.status();
  if (!entry->has_value()) return Status::NotFound(fmt::format("no local user with uid {}", uid));
  return WithGroups(std::move(**entry));
}

std::string UserName(int64_t uid) {
  if (uid < 0) return "unknown";
  Result<std::optional<UserInfo>> entry = PasswdById(uid);
  return entry.ok() && entry->has_value() ? (*entry)->name : std::to_string(uid);
}

std::string HomeDir(int64_t uid) {
  Result<std::optional<UserInfo>> entry = PasswdById(uid);
  if (entry.ok() && entry->has_value() && (*entry)->home.starts_with('/')) return (*entry)->home;
  return "/";
}

Result<int64_t> LookupGroupId(std::string_view name) {
  std::string n(name);
  struct group gr;
  std::vector<char> buffer;
  auto found = LookupWithBuffer(gr, buffer, [&n](auto* e, char* b, size_t size, auto** r) {
    return ::getgrnam_r(n.c_str(), e, b, size, r);
  });
  if (!found.ok()) return found.status();
  if (!*found) return Status::Invalid(fmt::format("no local group '{}'", n));
  return static_cast<int64_t>(gr.gr_gid);
}

Result<bool> UserInGroup(const UserInfo& user, std::string_view group_name) {
  Result<int64_t> group = LookupGroupId(group_name);
  if (!group.ok()) return group.status();
  int64_t gid = *group;
  return gid == user.gid ||
         std::find(user.groups.begin(), user.groups.end(), gid) != user.groups.end();
}

std::string DirModeString(mode_t mode) {
  std::string s = "d---------";
  const char* letters = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) {
    if (mode & (0400 >> i)) s[1 + i] = letters[i];
  }
  if (mode & S_ISUID) s[3] = (mode & S_IXUSR) ? 's' : 'S';
  if (mode & S_ISGID) s[6] = (mode & S_IXGRP) ? 's' : 'S';
  if (mode & S_ISVTX) s[9] = (mode & S_IXOTH) ? 't' : 'T';
  return s;
}

Status JudgeMayEnter(const std::string& dir, const std::vector<DirFacts>& chain,
                     const UserInfo& user, std::string_view field) {
  for (const DirFacts& d : chain) {
    if (!d.exists) return Status::Invalid(fmt::format("{}: {} does not exist", field, d.path));
    if (!d.directory) {
      return Status::Invalid(fmt::format("{}: {} is not a directory", field, d.path));
    }
    if (MaySearch(d, user)) continue;
    std::string facts = fmt::format("{} {} {}", DirModeString(d.mode), d.owner, d.group);
    if (d.path != dir) facts = d.path + " is " + facts;
    return Status::Invalid(
        fmt::format("{}: user {} may not enter {} ({})", field, user.name, dir, facts));
  }
  return Status::Ok();
}

Status CheckMayEnter(const std::string& dir, const UserInfo& user, std::string_view field) {
  if (dir.empty() || dir[0] != '/') {
    return Status::Invalid(fmt::format("{}: must be an absolute path, got '{}'", field, dir));
  }
  std::vector<std::string> paths = Prefixes(dir);
  std::unique_ptr<char, decltype(&::free)> real(::realpath(dir.c_str(), nullptr), &::free);
  if (real != nullptr) {
    for (std::string& p : Prefixes(real.get())) {
      if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(std::move(p));
    }
  }
  std::vector<DirFacts> chain;
  for (const std::string& p : paths) {
    chain.push_back(StatDir(p));
    if (!chain.back().exists) break;  // what follows cannot exist either
  }
  return JudgeMayEnter(dir, chain, user, field);
}

Status JudgeMayRead(const DirFacts& target, const UserInfo& user, std::string_view field) {
  if (!target.exists)
    return Status::Invalid(fmt::format("{}: {} does not exist", field, target.path));
  mode_t want = target.directory ? 05 : 04;  // r, and x to list a directory
  mode_t bits = target.mode & 07;            // others'
  bool member = std::find(user.groups.begin(), user.groups.end(), target.gid) != user.groups.end();
  if (target.uid == user.uid) {
    bits = (target.mode >> 6) & 07;
  } else if (member || target.gid == user.gid) {
    bits = (target.mode >> 3) & 07;
  }
  if (user.uid == 0 || (bits & want) == want) return Status::Ok();
  std::string mode = DirModeString(target.mode);
  if (!target.directory) mode[0] = '-';
  return Status::Invalid(fmt::format("{}: user {} may not read {} ({} {} {})", field, user.name,
                                     target.path, mode, target.owner, target.group));
}

Status CheckMayRead(const std::string& path, const UserInfo& user, std::string_view field) {
  if (path.empty() || path[0] != '/') {
    return Status::Invalid(fmt::format("{}: must be an absolute path, got '{}'", field, path));
  }
  std::string parent = path.substr(0, std::max<size_t>(path.find_last_of('/'), 1));
  std::unique_ptr<char, decltype(&::free)> real(::realpath(path.c_str(), nullptr), &::free);
  if (real != nullptr) {
    std::string r = real.get();
    TRAINQ_RETURN_IF_ERROR(
        CheckMayEnter(r.substr(0, std::max<size_t>(r.find_last_of('/'), 1)), user, field));
  }
  TRAINQ_RETURN_IF_ERROR(CheckMayEnter(parent, user, field));
  return JudgeMayRead(StatDir(path), user, field);
}

}  // namespace trainq
