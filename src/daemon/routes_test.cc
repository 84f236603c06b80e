// docs/api.md is the API's reference: its table of routes and the daemon's are the same.
#include "src/daemon/routes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace trainq {
namespace {

// "METHOD /path" of every backquoted route in the first cell of the table's rows, without
// its query ("GET /v1/jobs?all=1" is "GET /v1/jobs").
std::vector<std::string> DocumentedRoutes() {
  std::ifstream in(std::string(TRAINQ_SOURCE_DIR) + "/docs/api.md");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("| `")) continue;
    std::string cell = line.substr(2, line.find(" | ", 2) - 2);
    for (size_t open = cell.find('`'); open != std::string::npos;) {
      size_t close = cell.find('`', open + 1);
      std::string quoted = cell.substr(open + 1, close - open - 1);
      if (quoted.find(" /") != std::string::npos) out.push_back(quoted.substr(0, quoted.find('?')));
      open = cell.find('`', close + 1);
    }
  }
  return out;
}

// A route as the docs write it: "POST /v1/jobs/{id}/cancel" is "POST /v1/jobs/ID/cancel".
std::string AsDocumented(std::string route) {
  for (size_t open = route.find('{'); open != std::string::npos; open = route.find('{')) {
    size_t close = route.find('}', open);
    std::string name = route.substr(open + 1, close - open - 1);
    for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    route.replace(open, close - open + 1, name);
  }
  return route;
}

std::vector<std::string> Minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

TEST(RoutesTest, DocsApiListsExactlyTheTablesRoutes) {
  std::vector<std::string> docs = DocumentedRoutes();
  ASSERT_GT(docs.size(), 10u) << "docs/api.md's table of routes is missing";
  std::vector<std::string> routes;
  for (const std::string& name : RouteNames()) routes.push_back(AsDocumented(name));
  std::sort(docs.begin(), docs.end());
  std::sort(routes.begin(), routes.end());
  for (const std::string& route : Minus(routes, docs)) {
    ADD_FAILURE() << "docs/api.md has no row for " << route;
  }
  for (const std::string& doc : Minus(docs, routes)) {
    ADD_FAILURE() << "docs/api.md names " << doc << ", which no route serves";
  }
  EXPECT_EQ(std::adjacent_find(docs.begin(), docs.end()), docs.end()) << "a route twice in docs";
  EXPECT_EQ(std::adjacent_find(routes.begin(), routes.end()), routes.end())
      << "a route twice in the table";
}

// The table's matcher takes one placeholder per pattern, a whole segment (or, as {name...},
// the rest of the path, which RouteNames writes as {name}).
TEST(RoutesTest, APatternHasAtMostOnePlaceholderASegmentLong) {
  for (const std::string& name : RouteNames()) {
    size_t open = name.find('{');
    if (open == std::string::npos) continue;
    size_t close = name.find('}', open);
    EXPECT_EQ(name[open - 1], '/') << name;
    EXPECT_TRUE(close + 1 == name.size() || name[close + 1] == '/') << name;
    EXPECT_EQ(name.find('{', close), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace trainq
