// The version trainq reports: `--version`, the API's status, a node's record, a snapshot's
// manifest, the database's schema writer. The project's version, or the one the release
// tree was configured with (`make deb VERSION=X`). Defined in a file the build writes
// (cmake/version.cc.in), so a new version recompiles that one file.
#pragma once

namespace trainq {

extern const char* const kVersion;

}  // namespace trainq
