#include "src/daemon/cluster_key.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/job_fields_test_util.h"
#include "src/os/crypto/token_crypto.h"
#include "src/store/store.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;

const ClusterKey kKey(std::string(64, 'k'));

JobSpec AdasJob() {
  JobSpec s;
  s.user = "ada";
  s.command = {"python", "train.py"};
  s.env = {{"PATH", "/usr/bin"}, {"WANDB_API_KEY", "secret"}};
  s.cwd = "/home/ada/exp";
  s.notify_url = "https://hooks.example.org/x";
  s.mem_limit_bytes = 4ull << 30;
  s.max_procs = 256;
  return s;
}

TEST(ClusterKeyTest, ASignedJobVerifiesAndNamesItsNode) {
  JobSpec s = AdasJob();
  kKey.Sign(s, "gpu1");
  EXPECT_EQ(s.signed_by, "gpu1");
  EXPECT_EQ(s.signature.size(), 64u);
  EXPECT_TRUE(kKey.Verify(7, s).ok());
  // Fields that decide nothing about who runs what may change (the queue changes them).
  s.priority = 5;
  s.nodes_excluded = {"gpu2"};
  EXPECT_TRUE(kKey.Verify(7, s).ok());
}

TEST(ClusterKeyTest, EveryIdentityFieldChangedInTheStoreIsRefused) {
  std::vector<std::pair<std::string, std::function<void(JobSpec&)>>> edits = {
      {"user", [](JobSpec& s) { s.user = "root"; }},
      {"command", [](JobSpec& s) { s.command.push_back("--evil"); }},
      {"env", [](JobSpec& s) { s.env.emplace_back("LD_PRELOAD", "/tmp/x.so"); }},
      {"cwd", [](JobSpec& s) { s.cwd = "/root"; }},
      {"notify", [](JobSpec& s) { s.notify_url = "https://evil.example/"; }},
      {"mail", [](JobSpec& s) { s.mail = "evil@example.org"; }},
      {"gate", [](JobSpec& s) { s.gate_pid = 1; }},
      {"mem limit", [](JobSpec& s) { s.mem_limit_bytes = 0; }},
      {"procs", [](JobSpec& s) { s.max_procs = 1 << 20; }},
      {"node", [](JobSpec& s) { s.signed_by = "gpu2"; }},
      {"split", [](JobSpec& s) { s.command = {"pythontrain.py"}; }},
  };
  for (const auto& [what, edit] : edits) {
    JobSpec s = AdasJob();
    kKey.Sign(s, "gpu1");
    edit(s);
    Status st = kKey.Verify(12, s);
    EXPECT_EQ(st.code(), Code::kPermission) << what;
    EXPECT_THAT(st.message(), HasSubstr("job 12")) << what;
    EXPECT_THAT(st.message(), HasSubstr("refused to run it")) << what;
  }
}

// The signature covers every row kJobFields signs and no other: each field changed alone
// in the store is refused exactly when its row says it is signed.
TEST(ClusterKeyTest, EachFieldOfTheTableIsSignedExactlyAsItsRowSays) {
  const JobSpec full = FullSpec(11, 12);
  int signed_rows = 0;
  ForEachJobField([&](const auto& field) {
    if (field.info.name == "signature" || field.info.name == "signed_by") return;
    SCOPED_TRACE(std::string(field.info.name));
    JobSpec s = AdasJob();
    s.collect = {"out"};  // collect_to is kept only with something to collect
    kKey.Sign(s, "gpu1");
    field.Of(s) = field.Of(full);
    Status st = kKey.Verify(12, s);
    if (field.info.signed_) {
      ++signed_rows;
      EXPECT_EQ(st.code(), Code::kPermission);
    } else {
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  });
  EXPECT_GE(signed_rows, 20);
}

// A job an earlier trainq signed still runs after an upgrade, unless Redis gave it a
// container, which the old signature did not cover.
TEST(ClusterKeyTest, AnEarlierSignatureHoldsForAJobWithoutAContainer) {
  const std::string secret(64, 'k');
  JobSpec s = AdasJob();
  s.signed_by = "gpu1";
  s.signature = HmacSha256Hex(secret, SignedJobTextV1(s, "gpu1"));
  EXPECT_TRUE(kKey.Verify(4, s).ok());
  s.container.image = "docker.io/evil:1";
  EXPECT_EQ(kKey.Verify(4, s).code(), Code::kPermission);
  s.container = {};
  s.command.push_back("--evil");
  EXPECT_EQ(kKey.Verify(4, s).code(), Code::kPermission);
}

TEST(ClusterKeyTest, AnUnsignedOrOtherKeysJobIsRefused) {
  JobSpec s = AdasJob();
  EXPECT_THAT(kKey.Verify(3, s).message(), HasSubstr("carries no signature"));
  ClusterKey(std::string(64, 'o')).Sign(s, "gpu1");
  EXPECT_THAT(kKey.Verify(3, s).message(), HasSubstr("another cluster key"));
}

TEST(ClusterKeyTest, TokensVerifyOnlyAsMade) {
  TokenRecord t{"laptop", std::string(64, 'a'), Role::kRead, "ada", 1, 0, 0, "root", ""};
  EXPECT_FALSE(kKey.VerifyToken(t));  // written by another hand: no signature
  t.signature = kKey.SignToken(t);
  EXPECT_TRUE(kKey.VerifyToken(t));
  t.revoked_at = 5;  // revoking is not signed: any node may do it
  EXPECT_TRUE(kKey.VerifyToken(t));
  TokenRecord promoted = t;
  promoted.role = Role::kAdmin;
  EXPECT_FALSE(kKey.VerifyToken(promoted));
  TokenRecord other = t;
  other.user = "root";
  EXPECT_FALSE(kKey.VerifyToken(other));
}

TEST(ClusterKeyTest, AStepHoldsOnlyForItsJobAttemptRankAndText) {
  const std::string text = R"({"argv":["torchrun","train.py"],"step":0})";
  std::string sig = kKey.SignStep(12, 1, 1, text);
  EXPECT_TRUE(kKey.VerifyStep(12, 1, 1, text, sig));
  EXPECT_FALSE(kKey.VerifyStep(13, 1, 1, text, sig));
  EXPECT_FALSE(kKey.VerifyStep(12, 2, 1, text, sig));
  EXPECT_FALSE(kKey.VerifyStep(12, 1, 2, text, sig));
  EXPECT_FALSE(kKey.VerifyStep(12, 1, 1, R"({"argv":["sh","-c","id"],"step":0})", sig));
  EXPECT_FALSE(ClusterKey(std::string(64, 'o')).VerifyStep(12, 1, 1, text, sig));
  EXPECT_FALSE(ClusterKey().VerifyStep(12, 1, 1, text, ""));
}

TEST(ClusterKeyTest, APeersRequestHoldsForItsOwnMethodTargetAndTime) {
  const int64_t now = 1'700'000'000'000;
  std::string target = CanonicalTarget("/v1/jobs/4/log", {{"offset", "0"}, {"attempt", "1"}});
  EXPECT_EQ(target, "/v1/jobs/4/log?attempt=1&offset=0");
  std::string header = kKey.PeerAuthorization("gpu2", now, "GET", target);
  Result<std::string> node = kKey.VerifyPeer(header, now + 1000, "GET", target);
  ASSERT_TRUE(node.ok()) << node.status().message();
  EXPECT_EQ(*node, "gpu2");
  EXPECT_FALSE(kKey.VerifyPeer(header, now, "POST", target).ok());
  EXPECT_FALSE(kKey.VerifyPeer(header, now, "GET", "/v1/jobs/5/log?attempt=1&offset=0").ok());
  EXPECT_THAT(
      kKey.VerifyPeer(header, now + ClusterKey::kPeerSkewMs + 1, "GET", target).status().message(),
      HasSubstr("clocks"));
  EXPECT_FALSE(ClusterKey(std::string(64, 'o')).VerifyPeer(header, now, "GET", target).ok());
  EXPECT_FALSE(kKey.VerifyPeer("TrainqNode gpu2 x y", now, "GET", target).ok());
  EXPECT_FALSE(kKey.VerifyPeer("Bearer tq_x", now, "GET", target).ok());
}

class ClusterKeyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tq-key-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/cluster.key";
  }
  void TearDown() override {
    std::remove(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

TEST_F(ClusterKeyFileTest, CreateWritesAPrivateKeyOnceThatLoads) {
  ASSERT_TRUE(ClusterKey::Create(path_).ok());
  struct stat st = {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<ClusterKey> key = ClusterKey::Load(path_, "cluster_key_file");
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_FALSE(key->empty());
  Status again = ClusterKey::Create(path_);
  EXPECT_EQ(again.code(), Code::kConflict);
  EXPECT_THAT(again.message(), HasSubstr("exists"));
}

TEST_F(ClusterKeyFileTest, LoadRefusesAMissingShortOrReadableKeyNamingTheOption) {
  Result<ClusterKey> missing = ClusterKey::Load(path_, "cluster_key_file");
  EXPECT_THAT(missing.status().message(), HasSubstr("cluster_key_file: cannot read"));
  EXPECT_THAT(missing.status().message(), HasSubstr("trainqd --new-cluster-key"));
  std::ofstream(path_) << "short\n";
  ::chmod(path_.c_str(), 0600);
  EXPECT_THAT(ClusterKey::Load(path_, "cluster_key_file").status().message(),
              HasSubstr("holds 5 bytes"));
  std::ofstream(path_) << std::string(64, 'x') << "\n";
  ::chmod(path_.c_str(), 0644);
  EXPECT_THAT(ClusterKey::Load(path_, "cluster_key_file").status().message(),
              HasSubstr("mode 0600"));
  ::chmod(path_.c_str(), 0600);
  EXPECT_TRUE(ClusterKey::Load(path_, "cluster_key_file").ok());
}

}  // namespace
}  // namespace trainq
