// Each path builder against the route docs/api.md gives for it.
#include "src/cli/api_paths.h"

#include <gtest/gtest.h>

namespace trainq::api {
namespace {

TEST(ApiPathsTest, JobPaths) {
  EXPECT_EQ(JobsPath(), "/v1/jobs");
  EXPECT_EQ(JobsPath("all=1&group=7"), "/v1/jobs?all=1&group=7");
  EXPECT_EQ(JobsActionPath("cancel"), "/v1/jobs/cancel");
  EXPECT_EQ(JobPath(12), "/v1/jobs/12");
  EXPECT_EQ(JobPath(12, "explain"), "/v1/jobs/12/explain");
  EXPECT_EQ(JobLogPath(12, 3), "/v1/jobs/12/log?attempt=3");
}

TEST(ApiPathsTest, DaemonTokenAndNodePaths) {
  EXPECT_EQ(GpusPath(), "/v1/gpus");
  EXPECT_EQ(StatusPath(), "/v1/status");
  EXPECT_EQ(ConfigPath(), "/v1/config");
  EXPECT_EQ(DaemonPath("backup"), "/v1/daemon/backup");
  EXPECT_EQ(TokensPath(), "/v1/tokens");
  EXPECT_EQ(TokenPath("ada-laptop"), "/v1/tokens/ada-laptop");
  EXPECT_EQ(NodesPath(), "/v1/nodes");
  EXPECT_EQ(NodePath("gpu3", "drain"), "/v1/nodes/gpu3/drain");
}

}  // namespace
}  // namespace trainq::api
