// docs/api.md is the API's reference: its table of routes and the daemon's are the same.
#include "src/daemon/routes.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace trainq {
namespace {

using MethodPath = std::pair<std::string, std::string>;

MethodPath Split(const std::string& text) {
  size_t space = text.find(' ');
  std::string path = text.substr(space + 1);
  return {text.substr(0, space), path.substr(0, path.find('?'))};
}

// "METHOD /path" of every backquoted route in the first cell of the table's rows.
std::vector<MethodPath> DocumentedRoutes() {
  std::ifstream in(std::string(TRAINQ_SOURCE_DIR) + "/docs/api.md");
  std::vector<MethodPath> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("| `")) continue;
    std::string cell = line.substr(2, line.find(" | ", 2) - 2);
    for (size_t open = cell.find('`'); open != std::string::npos;) {
      size_t close = cell.find('`', open + 1);
      std::string quoted = cell.substr(open + 1, close - open - 1);
      if (quoted.find(" /") != std::string::npos) out.push_back(Split(quoted));
      open = cell.find('`', close + 1);
    }
  }
  return out;
}

// A route whose path ends in '/' serves every path below it; another, its path alone.
bool Serves(const MethodPath& route, const MethodPath& doc) {
  if (route.first != doc.first) return false;
  if (!route.second.ends_with('/')) return route.second == doc.second;
  return doc.second.starts_with(route.second) && doc.second.size() > route.second.size();
}

TEST(RoutesTest, DocsApiNamesEveryRouteAndNoOther) {
  std::vector<MethodPath> docs = DocumentedRoutes();
  ASSERT_GT(docs.size(), 10u) << "docs/api.md's table of routes is missing";
  std::vector<MethodPath> routes;
  for (const std::string& name : RouteNames()) routes.push_back(Split(name));
  for (const MethodPath& route : routes) {
    bool documented = false;
    for (const MethodPath& doc : docs) documented = documented || Serves(route, doc);
    EXPECT_TRUE(documented) << "docs/api.md has no row for " << route.first << " " << route.second;
  }
  for (const MethodPath& doc : docs) {
    bool served = false;
    for (const MethodPath& route : routes) served = served || Serves(route, doc);
    EXPECT_TRUE(served) << "docs/api.md names " << doc.first << " " << doc.second
                        << ", which no route serves";
  }
}

}  // namespace
}  // namespace trainq
