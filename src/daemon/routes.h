// The API's route table as text, for the test that holds docs/api.md to it.
#pragma once

#include <string>
#include <vector>

namespace trainq {

// Every route as "METHOD /pattern", one per row of the table, e.g. "POST /v1/jobs/{id}/cancel":
// a placeholder in braces stands for one path segment.
std::vector<std::string> RouteNames();

}  // namespace trainq
