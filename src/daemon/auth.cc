// Who is calling: the Unix socket's peer credentials (docs/operations.md, "A shared server").
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <vector>

#include "src/daemon/daemon_impl.h"
#include "src/os/system.h"

namespace trainq {

bool DaemonImpl::IsAdminUid(int64_t uid) const {
  if (uid == 0 || (!config_.shared && uid == static_cast<int64_t>(::geteuid()))) return true;
  if (!config_.shared || config_.admin_group.empty()) return false;
  Result<int64_t> admin = GroupId(config_.admin_group);
  if (!admin.ok()) return false;
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) != 0 || !found) {
    return false;
  }
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  while (::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
  }
  for (int i = 0; i < n; ++i) {
    if (static_cast<int64_t>(groups[static_cast<size_t>(i)]) == *admin) return true;
  }
  return false;
}

Result<Caller> DaemonImpl::Authenticate(const HttpRequest& req) {
  if (req.peer_uid < 0) return Status::Unauthenticated("no credentials: the caller is unknown");
  Caller caller;
  caller.uid = req.peer_uid;
  caller.user = UserName(req.peer_uid);
  caller.role = IsAdminUid(req.peer_uid) ? Role::kAdmin : Role::kSubmit;
  return caller;
}

}  // namespace trainq
