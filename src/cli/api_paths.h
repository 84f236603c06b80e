// The daemon's API paths as the client addresses them (docs/api.md, "Routes"). Every request
// the client sends names its path through these, so a route that moves is changed here alone.
// Names (tokens, nodes) go in as given: the daemon judges them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace trainq::api {

// /v1/jobs, or /v1/jobs?QUERY when `query` is given (without its '?').
std::string JobsPath(std::string_view query = {});
// A request about many jobs at once: /v1/jobs/cancel, /v1/jobs/retry, /v1/jobs/clean.
std::string JobsActionPath(std::string_view action);
// /v1/jobs/ID, or /v1/jobs/ID/ACTION (explain, cancel, ...).
std::string JobPath(int64_t id, std::string_view action = {});
// /v1/jobs/ID/log?attempt=N; callers add "&size=1" or "&offset=B&length=L".
std::string JobLogPath(int64_t id, int64_t attempt);
std::string GpusPath();
std::string StatusPath();
std::string ConfigPath();
// /v1/daemon/ACTION: stop, backup.
std::string DaemonPath(std::string_view action);
std::string TokensPath();
std::string DashboardTokenPath();
std::string TokenPath(std::string_view name);
std::string NodesPath();
// /v1/acct?QUERY (`trainq acct`).
std::string AcctPath(std::string_view query);
// /v1/nodes/NAME/ACTION: drain, resume.
std::string NodePath(std::string_view name, std::string_view action);

}  // namespace trainq::api
