// docs/architecture.md, "Layers and what each may use", checked against the tree: each
// production file of a layer includes only the layers and libraries its row names.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace trainq {
namespace {

namespace fs = std::filesystem;

struct Layer {
  std::vector<std::string> may_use;  // include prefixes ("src/core/", "trainq/", "<fmt/")
  std::vector<std::string> never;    // prefixes refused even where a broader one allows
};

// A project header's prefix is its folder; a library's is "<name".
const std::map<std::string, Layer>& Rules() {
  static const std::map<std::string, Layer> rules = {
      {"core", {{"trainq/", "src/core/"}, {"<spdlog", "<boost", "<sqlite3", "<hiredis", "<toml"}}},
      {"os", {{"trainq/", "src/core/", "src/os/", "src/os/crypto/"}, {"src/os/gpu/"}}},
      {"os/gpu", {{"trainq/", "src/core/", "src/os/", "src/os/gpu/"}, {}}},
      {"os/crypto", {{"trainq/", "src/core/", "src/os/crypto/"}, {}}},
      {"store",
       {{"trainq/", "src/core/", "src/os/", "src/store/"},
        {"src/store/sqlite/", "src/store/redis/"}}},
      {"store/sqlite",
       {{"trainq/", "src/core/", "src/os/", "src/store/", "src/store/sqlite/"}, {}}},
      {"store/redis", {{"trainq/", "src/core/", "src/os/", "src/store/", "src/store/redis/"}, {}}},
      {"api", {{"trainq/", "src/core/", "src/os/", "src/api/"}, {"<spdlog"}}},
      {"sim", {{"trainq/", "src/core/", "src/sim/"}, {"<spdlog"}}},
      {"cli",
       {{"trainq/", "src/core/", "src/os/", "src/os/crypto/", "src/api/", "src/sim/", "src/cli/"},
        {"src/os/gpu/", "src/store/", "src/daemon/", "<spdlog", "<sqlite3", "<hiredis"}}},
      {"daemon", {{"trainq/", "src/"}, {"src/cli/", "src/sim/", "src/man/"}}},
      {"man",
       {{"trainq/", "src/core/", "src/os/", "src/cli/", "src/daemon/", "src/man/"},
        {"<spdlog", "<sqlite3", "<hiredis"}}},
  };
  return rules;
}

// Tests, their helpers and fakes may use more than the layer they test.
bool Production(const std::string& name) {
  for (const char* part : {"_test.cc", "_test_util.h", "_test_fixture.h", "test_rig.h", "fake_",
                           "faulty_", "store_conformance"}) {
    if (name.find(part) != std::string::npos) return false;
  }
  return true;
}

// The project includes ("src/os/fd.h") and libraries ("<fmt/format.h>") a file names.
std::vector<std::string> Includes(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("#include ")) continue;
    std::string what = line.substr(9);
    if (what.starts_with('"')) {
      out.push_back(what.substr(1, what.find('"', 1) - 1));
    } else if (what.starts_with('<')) {
      out.push_back(what.substr(0, what.find('>')));
    }
  }
  return out;
}

bool StartsWithAny(const std::string& text, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes) {
    if (text.starts_with(p)) return true;
  }
  return false;
}

// A library include (<...>) is judged only by `never`; a project one must match `may_use`,
// and a folder's own subfolders count as other layers ("src/os/" does not admit os/gpu).
bool Allowed(const Layer& layer, const std::string& inc) {
  if (StartsWithAny(inc, layer.never)) return false;
  if (inc.starts_with('<')) return true;
  for (const std::string& p : layer.may_use) {
    if (!inc.starts_with(p)) continue;
    if (p == "src/" || p == "trainq/") return true;
    std::string rest = inc.substr(p.size());
    if (rest.find('/') == std::string::npos) return true;
  }
  return false;
}

TEST(LayersTest, EachLayerIncludesOnlyWhatItsRowAllows) {
  fs::path src = fs::path(TRAINQ_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::is_directory(src));
  int files = 0;
  for (const auto& [name, layer] : Rules()) {
    fs::path dir = src / name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      std::string file = e.path().filename().string();
      if (!e.is_regular_file() || !Production(file)) continue;
      if (!file.ends_with(".cc") && !file.ends_with(".h")) continue;
      ++files;
      for (const std::string& inc : Includes(e.path())) {
        EXPECT_TRUE(Allowed(layer, inc)) << "src/" << name << "/" << file << " includes " << inc;
      }
    }
  }
  EXPECT_GT(files, 200);
}

// The rule can fail: what the layers must never include is refused.
TEST(LayersTest, TheRulesRefuseWhatTheDocsForbid) {
  EXPECT_FALSE(Allowed(Rules().at("core"), "src/os/fd.h"));
  EXPECT_FALSE(Allowed(Rules().at("core"), "<spdlog/spdlog.h"));
  EXPECT_FALSE(Allowed(Rules().at("cli"), "src/daemon/config.h"));
  EXPECT_FALSE(Allowed(Rules().at("cli"), "src/os/gpu/gpu_probe.h"));
  EXPECT_FALSE(Allowed(Rules().at("os"), "src/os/gpu/gpu_probe.h"));
  EXPECT_FALSE(Allowed(Rules().at("store"), "src/store/redis/records.h"));
  EXPECT_TRUE(Allowed(Rules().at("cli"), "src/os/crypto/sha256.h"));
  EXPECT_TRUE(Allowed(Rules().at("daemon"), "src/store/redis/redis_store.h"));
  EXPECT_FALSE(Allowed(Rules().at("daemon"), "src/man/man_pages.h"));
  EXPECT_TRUE(Allowed(Rules().at("man"), "src/daemon/config.h"));
}

}  // namespace
}  // namespace trainq
