// The API's route table as text, for the test that holds docs/api.md to it.
#pragma once

#include <string>
#include <vector>

namespace trainq {

// Every route as "METHOD /path", in the order requests are matched; a path ending in '/' is
// a prefix ("GET /v1/jobs/" serves /v1/jobs/ID, /v1/jobs/ID/log, ...).
std::vector<std::string> RouteNames();

}  // namespace trainq
