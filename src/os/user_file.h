// Files a request names, on paths their users control (docs/architecture.md, "Paths users
// control"): `--image` archives, `--mount` and `--stage` sources, manifests. Opened so that
// nothing a user can put at such a path holds the caller: a FIFO waits for no writer, a device's
// driver is never called, a link is never followed, and the type is read from the very file
// opened.
#pragma once

#include <sys/types.h>

#include <string>

#include "src/os/fd.h"
#include "src/os/users.h"
#include "trainq/status.h"

namespace trainq {

enum class FileWant { kRegular, kDirectory, kRegularOrDirectory };

// Opens `path` for reading without blocking. Its last part is looked up without following a
// link and without opening it (O_PATH|O_NOFOLLOW); the type is read from that descriptor
// (fstat), and only a file of the type `want` names is then opened, through that descriptor
// (/proc/self/fd), so a path swapped after the check opens nothing else. The descriptor returned
// is O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_NOCTTY (O_DIRECTORY for a directory).
//
// With `as`, the lookup and the open are made with that user's file-system ids and groups, on a
// short thread of their own (setfsuid and the raw setgroups act on one thread), so the kernel
// judges every permission, ACLs and root-squashed NFS included, as it would for the user; the
// process must be root then, unless `as` is itself. Without `as`, this process's own ids.
//
// Errors say what is there, never what the caller wants (its option says that):
// kNotFound "PATH does not exist"; kPermission "user U may not read PATH" (without `as`,
// "PATH: permission denied"); kInvalid "PATH is a FIFO (named pipe)", "... a character device",
// "... a block device", "... a socket", "... a symbolic link", "... a directory", "... a
// regular file".
Result<UniqueFd> OpenUserFile(const std::string& path, FileWant want, const UserInfo* as = nullptr);

// The whole of the regular file at `path`, opened as OpenUserFile does; kInvalid "PATH holds N
// bytes, more than M" (nothing read) when it is larger than `max_bytes`. Errors as above.
Result<std::string> ReadUserFile(const std::string& path, uint64_t max_bytes,
                                 const UserInfo* as = nullptr);

// "a regular file", "a directory", "a FIFO (named pipe)", ... for a stat's st_mode.
std::string FileKindName(mode_t mode);

// Up to `max_bytes` from `fd` at `offset` (pread: the descriptor's own offset is left alone);
// fewer at the end of the file. `max_bytes` is allocated first: keep it bounded. kIo naming
// `path`.
Result<std::string> ReadAtMost(int fd, uint64_t offset, uint64_t max_bytes,
                               const std::string& path);

}  // namespace trainq
