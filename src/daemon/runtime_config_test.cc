// RuntimeConfig on its own: a settings file in a temporary dir, GPUs given by hand.
#include "src/daemon/runtime_config.h"

#include <unistd.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "src/os/run_dir.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

class RuntimeConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "trainq_runtime_config_test_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/settings.json";
    file_.policy.max_jobs_per_user = 4;  // as the config file says
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RuntimeConfig Make() {
    return RuntimeConfig(file_, path_, [this] { return gpus_; });
  }

  std::string dir_, path_;
  Config file_;
  std::vector<int> gpus_ = {0, 1};
};

TEST_F(RuntimeConfigTest, ASetIsPersistedAppliedAndReadBackAfterARestart) {
  RuntimeConfig settings = Make();
  const Config& config = settings.config();
  Result<std::string> changes = settings.Set(R"({"max_jobs_per_user": 2})", "root");
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  EXPECT_EQ(*changes, "max_jobs_per_user = 2 (was 4)");
  EXPECT_EQ(config.policy.max_jobs_per_user, 2);  // the same object every part reads
  json shown = json::parse(settings.Json());
  EXPECT_EQ(shown["max_jobs_per_user"], 2);
  EXPECT_EQ(shown["settings_file"], path_);

  RuntimeConfig again = Make();  // a restart: the file's value until Load
  EXPECT_EQ(again.config().policy.max_jobs_per_user, 4);
  ASSERT_TRUE(again.Load().ok());
  EXPECT_EQ(again.config().policy.max_jobs_per_user, 2);
}

TEST_F(RuntimeConfigTest, ARefusedSetChangesNothing) {
  RuntimeConfig settings = Make();
  Result<std::string> bad = settings.Set(R"({"max_jobs_per_user": 2, "devices": [0, 5]})", "root");
  EXPECT_EQ(bad.status().code(), Code::kInvalid);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("devices: this node has no GPU 5; its GPUs are 0,1"));
  EXPECT_EQ(settings.config().policy.max_jobs_per_user, 4);
  EXPECT_FALSE(std::filesystem::exists(path_));
  Result<std::string> unknown = settings.Set(R"({"node_name": "x"})", "root");
  EXPECT_FALSE(unknown.ok());
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(RuntimeConfigTest, ADamagedSettingsFileIsRefusedAtLoadNamingTheFix) {
  ASSERT_TRUE(WriteFileAtomic(path_, "{not json").ok());
  RuntimeConfig settings = Make();
  Status st = settings.Load();
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_THAT(st.message(), HasSubstr("fix or remove it"));
}

}  // namespace
}  // namespace trainq
