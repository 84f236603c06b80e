// The API's route table (routes.cc): one row per route, saying who may call it. Read-only here,
// for the tests that hold docs/api.md and every row's rule to what the daemon does.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "src/daemon/authenticator.h"

namespace trainq {

struct RouteContext;  // routes.cc: the request, its caller, the daemon's roles

// One row: a method and a path pattern, who may call it, the handler.
struct Route {
  const char* method;
  // Literal segments and at most one placeholder, which matches one segment (any text
  // without '/', empty too), or with "..." ({name...}) the rest of the path, '/' and all.
  // {id} is a job's id: the job is found, or the request answered 400 or 404, before the
  // rule is judged and the handler runs.
  const char* pattern;
  // Who may call it. Dispatch judges it (Permit) before the handler runs, and no handler
  // judges the caller again; a Who::kOwnJobs handler applies MayActOn to each job it names.
  Rule rule;
  void (*handle)(RouteContext&);
};

// Every route of the API, in the order a request is matched against them. No path matches
// two rows.
std::span<const Route> RouteTable();

// Every route as "METHOD /pattern", one per row of the table, e.g. "POST /v1/jobs/{id}/cancel":
// a placeholder in braces stands for one path segment, or the rest of the path where the
// pattern says {name...} (written {name} here, as docs/api.md does).
std::vector<std::string> RouteNames();

}  // namespace trainq
