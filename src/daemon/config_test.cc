#include "src/daemon/config.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/core/preemption.h"

namespace trainq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ConfigTest, EmptyFileGivesDefaults) {
  Result<Config> c = ParseConfig("", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->policy.headroom_bytes, 256ull << 20);
  EXPECT_EQ(c->oom_backoff_ms, 30000);
  EXPECT_EQ(c->grace_ms, 10000);
  EXPECT_EQ(c->cpu_slots, 0);
}

TEST(ConfigTest, ReadsEveryKindOfValue) {
  Result<Config> c = ParseConfig(R"(
headroom = "1GiB"
oom_backoff = "1m30s"
cpu_slots = 12
fake_gpus = "/x/gpus.json"
oom_patterns = ["alloc failed", "device OOM"]
log_tail = 4096
)",
                                 "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->policy.headroom_bytes, 1ull << 30);
  EXPECT_EQ(c->oom_backoff_ms, 90000);
  EXPECT_EQ(c->cpu_slots, 12);
  EXPECT_EQ(c->fake_gpus, "/x/gpus.json");
  EXPECT_THAT(c->oom_patterns, ::testing::ElementsAre("alloc failed", "device OOM"));
  EXPECT_EQ(c->log_tail_bytes, 4096u);
}

TEST(ConfigTest, EveryProblemNamesItsOption) {
  Result<Config> c = ParseConfig(R"(
headroom = "lots"
cpu_slots = "four"
grace_period = 10
colour = "blue"
)",
                                 "config.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalid);
  EXPECT_THAT(c.status().message(), HasSubstr("headroom"));
  EXPECT_THAT(c.status().message(), HasSubstr("cpu_slots"));
  EXPECT_THAT(c.status().message(), HasSubstr("grace_period: expected a duration"));
  EXPECT_THAT(c.status().message(), HasSubstr("unknown config option 'colour'"));
}

TEST(ConfigTest, MaxHoldsIsACountOfJobs) {
  Result<Config> c = ParseConfig("max_holds = 3\n", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->policy.max_holds, 3);
  EXPECT_EQ(ParseConfig("", "config.toml")->policy.max_holds, 1);
  Result<Config> bad = ParseConfig("max_holds = -1\n", "config.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(
      bad.status().message(),
      HasSubstr("max_holds: expected a whole number of jobs from 0 (every aged job) to 100000"));
}

TEST(ConfigTest, SyntaxErrorGivesTheLine) {
  Result<Config> c = ParseConfig("headroom = \n", "my.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("my.toml:1"));
}

// toml++ 3.3 has undefined behaviour on some non-ASCII characters (found by
// fuzz/config_fuzz.cc with "hea\u00e9droom"): refused before it reads them.
TEST(ConfigTest, NonAsciiIsRefusedNamingTheLine) {
  Result<Config> c = ParseConfig(
      "max_holds = 2\nhea\xc3\xa9"
      "droom = \"1GiB\"\n",
      "my.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalid);
  EXPECT_THAT(c.status().message(), HasSubstr("my.toml:2: a non-ASCII character"));
}

TEST(ConfigTest, ControlCharactersAreRefusedNamingTheLine) {
  Result<Config> c = ParseConfig("max_holds = 2\nx = \x01\n", "my.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("my.toml:2: control character 0x01"));
}

TEST(ConfigTest, ATableIsRefusedButAnArrayIsNot) {
  Result<Config> c = ParseConfig("max_holds = 2\n  [?\n", "my.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("my.toml:2: a [table]"));
  Result<Config> array = ParseConfig("max_holds = [\n 2]\n", "my.toml");
  ASSERT_FALSE(array.ok());  // an array is no count, but it is read as one
  EXPECT_THAT(array.status().message(), Not(HasSubstr("[table]")));
}

TEST(ConfigTest, NonAsciiInACommentIsRefusedToo) {
  Result<Config> c = ParseConfig("# caf\xc3\xa9\nheadroom = \"1GiB\"\n", "my.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("my.toml:1: a non-ASCII character"));
  Result<Config> escaped = ParseConfig("devices = \"\\u00e9\"\n", "my.toml");
  ASSERT_FALSE(escaped.ok());  // read, and refused as a device list
  EXPECT_THAT(escaped.status().message(), HasSubstr("devices"));
}

TEST(ConfigTest, MissingFileGivesDefaults) {
  Result<Config> c = LoadConfig("/nonexistent/trainq/config.toml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sample_interval_ms, 1000);
}

// It used to be read as no config at all: the daemon ran on defaults its operator never chose.
TEST(ConfigTest, UnreadableFileIsAnError) {
  std::string dir = ::testing::TempDir() + "/trainq_config_is_a_dir";
  std::filesystem::create_directories(dir);
  Result<Config> c = LoadConfig(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("config file " + dir + " cannot be read"));
}

// "0s" was accepted and sampled the GPUs in a busy loop at 100 % CPU.
TEST(ConfigTest, ASampleIntervalTooShortToWorkIsRefused) {
  for (const char* text : {"0s", "0ms", "99ms"}) {
    Result<Config> c = ParseConfig(fmt::format("sample_interval = \"{}\"\n", text), "config.toml");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_THAT(c.status().message(),
                HasSubstr(fmt::format("config option sample_interval: '{}' is too short; expected "
                                      "a duration",
                                      text)));
    EXPECT_THAT(c.status().message(), HasSubstr("of at least 100ms"));
  }
  Result<Config> c = ParseConfig("sample_interval = \"100ms\"\n", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sample_interval_ms, 100);
}

TEST(ConfigTest, DurationsThatDoNotFitAreRefusedNamingTheOption) {
  Result<Config> c = ParseConfig("aging_limit = \"9999999999999h\"\n", "config.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("aging_limit"));
  EXPECT_THAT(c.status().message(), HasSubstr("too long"));
}

TEST(ConfigTest, SchedulingOptionsHaveTheirDefaults) {
  Result<Config> c = ParseConfig("", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->policy.aging_ms, 2 * 3600 * 1000);
  EXPECT_EQ(c->fair_share_half_life_ms, 7 * 24 * 3600 * 1000ll);
  EXPECT_EQ(c->master_port_first, 29500);
  EXPECT_EQ(c->master_port_last, 29999);
  EXPECT_TRUE(c->policy.devices.empty());
  EXPECT_EQ(c->policy.max_jobs_per_gpu, 0);
  EXPECT_EQ(c->policy.max_gpus_per_user, 0);
  EXPECT_EQ(c->policy.max_jobs_per_user, 0);
  EXPECT_TRUE(c->from_file.empty());
}

TEST(ConfigTest, ReadsEverySchedulingOption) {
  Result<Config> c = ParseConfig(R"(
aging_limit = "30m"
fair_share_half_life = "2d12h"
master_port_range = "31000-31010"
devices = [3, 0, 1, 3]
max_jobs_per_gpu = 2
max_gpus_per_user = 4
max_jobs_per_user = 3
)",
                                 "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->policy.aging_ms, 30 * 60 * 1000);
  EXPECT_EQ(c->fair_share_half_life_ms, 60 * 3600 * 1000ll);
  EXPECT_EQ(c->master_port_first, 31000);
  EXPECT_EQ(c->master_port_last, 31010);
  EXPECT_THAT(c->policy.devices, ::testing::ElementsAre(0, 1, 3));  // sorted, once each
  EXPECT_EQ(c->policy.max_jobs_per_gpu, 2);
  EXPECT_EQ(c->policy.max_gpus_per_user, 4);
  EXPECT_EQ(c->policy.max_jobs_per_user, 3);
  EXPECT_THAT(c->from_file, ::testing::ElementsAre("aging_limit", "devices", "fair_share_half_life",
                                                   "master_port_range", "max_gpus_per_user",
                                                   "max_jobs_per_gpu", "max_jobs_per_user"));
}

TEST(ConfigTest, DevicesTakeTextOrAll) {
  Result<Config> text = ParseConfig("devices = \"2, 0\"\n", "config.toml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_THAT(text->policy.devices, ::testing::ElementsAre(0, 2));
  Result<Config> all = ParseConfig("devices = \"all\"\n", "config.toml");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(all->policy.devices.empty());
  Result<Config> single = ParseConfig("master_port_range = \"29500-29500\"\n", "config.toml");
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ(single->master_port_first, single->master_port_last);
}

TEST(ConfigTest, BadSchedulingValuesNameTheOptionAndTheForm) {
  struct Case {
    const char* toml;
    const char* expected;
  };
  const Case cases[] = {
      {"aging_limit = \"soon\"", "config option aging_limit: 'soon' is not a duration"},
      {"aging_limit = 7200", "aging_limit: expected a duration"},
      {"fair_share_half_life = \"7y\"", "fair_share_half_life: '7y' is not a duration"},
      {"master_port_range = \"29999-29500\"",
       "master_port_range: '29999-29500' is not a port range"},
      {"master_port_range = \"80-90\"",
       "master_port_range: '80-90' is not a port range \"FIRST-LAST\" "
       "with 1024 <= FIRST <= LAST <= 65535"},
      {"master_port_range = \"29500-70000\"",
       "master_port_range: '29500-70000' is not a port range"},
      {"master_port_range = \"29500\"", "master_port_range: expected a port range"},
      {"master_port_range = 29500", "master_port_range: expected a port range"},
      {"master_port_range = \"a-b\"", "master_port_range: 'a-b' is not a port range"},
      {"devices = \"0,x\"",
       "devices: '0,x' is not a GPU list; use GPU indices separated by commas"},
      {"devices = \"0,,1\"", "devices: '0,,1' is not a GPU list"},
      {"devices = [-1]", "devices: expected GPU indices like [0, 1, 3]"},
      {"devices = [\"0\"]", "devices: expected GPU indices"},
      {"devices = 3", "devices: expected GPU indices"},
      {"max_jobs_per_gpu = -1", "max_jobs_per_gpu: expected a whole number from 0 (no limit)"},
      {"max_jobs_per_gpu = \"2\"", "max_jobs_per_gpu: expected a whole number"},
      {"max_jobs_per_gpu = 1.5", "max_jobs_per_gpu: expected a whole number"},
  };
  for (const Case& c : cases) {
    Result<Config> r = ParseConfig(c.toml, "config.toml");
    ASSERT_FALSE(r.ok()) << c.toml;
    EXPECT_EQ(r.status().code(), Code::kInvalid) << c.toml;
    EXPECT_THAT(r.status().message(), HasSubstr(c.expected)) << c.toml;
  }
}

TEST(ConfigTest, ShownValuesReadBackToTheSameConfig) {
  Result<Config> c = ParseConfig(R"(
headroom = "512MiB"
log_tail = 1000
aging_limit = "90m"
master_port_range = "30000-30100"
devices = "1,3"
max_jobs_per_gpu = 4
max_gpus_per_user = 8
max_jobs_per_user = 2
oom_patterns = ["x \"y\""]
)",
                                 "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(OptionValueText(*c, "headroom"), "\"512MiB\"");
  EXPECT_EQ(OptionValueText(*c, "log_tail"), "1000");  // a bare "1000" would be MiB
  EXPECT_EQ(OptionValueText(*c, "devices"), "\"1,3\"");
  EXPECT_EQ(OptionValueText(*c, "max_jobs_per_gpu"), "4");
  EXPECT_EQ(OptionValueText(*c, "colour"), std::nullopt);
  std::string again;
  for (const OptionInfo& o : ConfigOptions()) {
    if (o.name == "node_name" || o.name == "fake_gpus") continue;
    again += std::string(o.name) + " = " + *OptionValueText(*c, o.name) + "\n";
  }
  Result<Config> back = ParseConfig(again, "again.toml");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << again;
  EXPECT_EQ(back->policy.headroom_bytes, c->policy.headroom_bytes);
  EXPECT_EQ(back->log_tail_bytes, 1000u);
  EXPECT_EQ(back->policy.aging_ms, c->policy.aging_ms);
  EXPECT_EQ(back->fair_share_half_life_ms, c->fair_share_half_life_ms);
  EXPECT_EQ(back->master_port_first, 30000);
  EXPECT_EQ(back->master_port_last, 30100);
  EXPECT_EQ(back->policy.devices, c->policy.devices);
  EXPECT_EQ(back->policy.max_jobs_per_gpu, 4);
  EXPECT_EQ(back->policy.max_gpus_per_user, 8);
  EXPECT_EQ(back->policy.max_jobs_per_user, 2);
  EXPECT_EQ(back->oom_patterns, c->oom_patterns);
}

TEST(RuntimeSettingsTest, DeviceListForms) {
  EXPECT_THAT(*ParseDeviceList("0,1,3", "devices"), ::testing::ElementsAre(0, 1, 3));
  EXPECT_THAT(*ParseDeviceList(" 3 , 1 ", "devices"), ::testing::ElementsAre(1, 3));
  EXPECT_TRUE(ParseDeviceList("all", "devices")->empty());
  Result<std::vector<int>> none = ParseDeviceList(" ", "devices");
  ASSERT_FALSE(none.ok()) << "an empty list must not silently mean every GPU";
  EXPECT_THAT(none.status().message(), HasSubstr("empty; name GPU indices like 0,1,3, or all"));
  EXPECT_TRUE(ParseRuntimeUpdate(R"({"devices": []})").ok()) << "the API's form of all";
  EXPECT_FALSE(ParseRuntimeUpdate(R"({"devices": ""})").ok());
  for (const char* bad : {"0,", ",1", "1-3", "x", "-1", "0;1", "2000", "ALL"}) {
    Result<std::vector<int>> r = ParseDeviceList(bad, "devices");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("devices: '") + bad +
                                                "' is not a GPU list; use GPU indices"));
  }
  EXPECT_EQ(FormatDeviceList({}), "all");
  EXPECT_EQ(FormatDeviceList({0, 1, 3}), "0,1,3");
}

TEST(RuntimeSettingsTest, MaxJobsPerGpuForms) {
  EXPECT_EQ(*ParseMaxJobsPerGpu("2", "max_jobs_per_gpu"), 2);
  EXPECT_EQ(*ParseMaxJobsPerGpu("0", "max_jobs_per_gpu"), 0);
  for (const char* bad : {"-1", "two", "1.5", "", "10001"}) {
    Result<int> r = ParseMaxJobsPerGpu(bad, "max_jobs_per_gpu");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("use a whole number from 0 (no limit) to 10000"));
  }
}

TEST(RuntimeSettingsTest, UpdateTakesArraysTextAndDashedNames) {
  Result<RuntimeUpdate> u = ParseRuntimeUpdate(R"({"devices": [3, 0], "max-jobs-per-gpu": "2"})");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_THAT(u->set.values.policy.devices, ::testing::ElementsAre(0, 3));
  EXPECT_EQ(u->set.values.policy.max_jobs_per_gpu, 2);
  EXPECT_THAT(u->set.names, ::testing::ElementsAre("devices", "max_jobs_per_gpu"));
  Result<RuntimeUpdate> text = ParseRuntimeUpdate(R"({"devices": "all", "max_jobs_per_gpu": 0})");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_TRUE(text->set.Has("devices") && text->set.values.policy.devices.empty());
  EXPECT_TRUE(text->set.Has("max_jobs_per_gpu"));
  EXPECT_EQ(text->set.values.policy.max_jobs_per_gpu, 0);
  Result<RuntimeUpdate> reset = ParseRuntimeUpdate(R"({"devices": null})");
  ASSERT_TRUE(reset.ok());
  EXPECT_THAT(reset->reset, ::testing::ElementsAre("devices"));
  EXPECT_FALSE(reset->set.Has("devices"));
}

TEST(RuntimeSettingsTest, UpdateRefusesEveryBadKeyAtOnce) {
  Result<RuntimeUpdate> u = ParseRuntimeUpdate(
      R"({"devices": "0,x", "max_jobs_per_gpu": -2, "colour": 1, "headroom": "1GiB"})");
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), Code::kInvalid);
  const std::string& m = u.status().message();
  EXPECT_THAT(m, HasSubstr("devices: '0,x' is not a GPU list"));
  EXPECT_THAT(m, HasSubstr("max_jobs_per_gpu: '-2' is not a job count"));
  EXPECT_THAT(m, HasSubstr("unknown setting 'colour'; the settings that change at run time are "
                           "cpu_slots, placement, devices, paused, paused_gpus, max_jobs_per_gpu, "
                           "max_gpus_per_user, max_jobs_per_user"));
  EXPECT_THAT(m, HasSubstr("headroom cannot change while the daemon runs; set it in the config "
                           "file and restart"));
  for (const char* bad : {"", "[]", "{}", "{\"devices\": true}", "{\"devices\": [0.5]}",
                          "{\"max_jobs_per_gpu\": 1.5}", "{\"max_jobs_per_gpu\": true}"}) {
    EXPECT_FALSE(ParseRuntimeUpdate(bad).ok()) << bad;
  }
}

TEST(RuntimeSettingsTest, PerUserLimitsRoundTripThroughTheApiAndTheSettingsFile) {
  Result<RuntimeUpdate> u =
      ParseRuntimeUpdate(R"({"max_gpus_per_user": 4, "max-jobs-per-user": "2"})");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->set.values.policy.max_gpus_per_user, 4);
  EXPECT_EQ(u->set.values.policy.max_jobs_per_user, 2);
  EXPECT_EQ(RuntimeSettingsToJson(u->set),
            "{\n  \"max_gpus_per_user\": 4,\n  \"max_jobs_per_user\": 2\n}\n");
  Result<RuntimeSettings> back = RuntimeSettingsFromJson(RuntimeSettingsToJson(u->set), "s.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  Config effective = WithRuntime(Config{}, *back);
  EXPECT_EQ(effective.policy.max_gpus_per_user, 4);
  EXPECT_EQ(effective.policy.max_jobs_per_user, 2);
  EXPECT_EQ(SettableValueJson(effective, "max_gpus_per_user"), "4");
  EXPECT_EQ(PolicyOf(effective).max_gpus_per_user, 4);
  EXPECT_EQ(PolicyOf(effective).max_jobs_per_user, 2);

  Result<RuntimeUpdate> bad =
      ParseRuntimeUpdate(R"({"max_gpus_per_user": "four", "max_jobs_per_user": -1})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("max_gpus_per_user: 'four' is not a GPU count; use a whole number from 0 "
                        "(no limit) to 10000"));
  EXPECT_THAT(bad.status().message(), HasSubstr("max_jobs_per_user: '-1' is not a job count"));
}

TEST(RuntimeSettingsTest, PersistedFormRoundTripsAndOverridesTheFile) {
  RuntimeSettings s;
  s.values.policy.devices = {0, 2};
  s.names = {"devices"};
  EXPECT_EQ(RuntimeSettingsToJson(s), "{\n  \"devices\": [\n    0,\n    2\n  ]\n}\n");
  Result<RuntimeSettings> back = RuntimeSettingsFromJson(RuntimeSettingsToJson(s), "settings.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->values.policy.devices, s.values.policy.devices);
  EXPECT_FALSE(back->Has("max_jobs_per_gpu"));
  Result<RuntimeSettings> none =
      RuntimeSettingsFromJson(RuntimeSettingsToJson({}), "settings.json");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->Has("devices"));

  Config file;
  file.policy.devices = {1};
  file.policy.max_jobs_per_gpu = 3;
  Config effective = WithRuntime(file, *back);
  EXPECT_THAT(effective.policy.devices, ::testing::ElementsAre(0, 2));
  EXPECT_EQ(effective.policy.max_jobs_per_gpu, 3);  // not set at run time: the file's value

  RuntimeUpdate all;
  all.set.names = {"devices"};  // values.policy.devices: empty, i.e. all
  EXPECT_TRUE(
      WithRuntime(file, Updated(*back, all)).policy.devices.empty());  // "all" overrides too
  RuntimeUpdate reset;
  reset.reset = {"devices"};
  EXPECT_FALSE(Updated(*back, reset).Has("devices"));

  Result<RuntimeSettings> bad = RuntimeSettingsFromJson("{\"devices\": \"x\"}", "/s/settings.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("/s/settings.json: devices: 'x' is not a GPU list"));
}

// ---- API connections ----

TEST(ConfigTest, MailDomainsAreDomainNames) {
  Result<Config> c =
      ParseConfig("mail_domains = [\"lab.example.org\", \"CS.example.org\"]\n", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mail_domains, (std::vector<std::string>{"lab.example.org", "CS.example.org"}));
  EXPECT_TRUE(CheckWorkflow(*c).ok());
  EXPECT_TRUE(Config{}.mail_domains.empty());
  for (const char* bad : {"ada@lab.example.org", "-x", ".org", "lab example"}) {
    Config config;
    config.mail_domains = {bad};
    Status st = CheckWorkflow(config);
    EXPECT_EQ(st.code(), Code::kInvalid) << bad;
    EXPECT_THAT(st.message(), HasSubstr(fmt::format("mail_domains: '{}'", bad)));
  }
}

TEST(ConfigTest, ConnectionCapLeavesAReserveOfTheFdLimit) {
  EXPECT_EQ(ConnectionCap(1024, 1u << 20), 1024u);  // max_connections when fds abound
  EXPECT_EQ(ConnectionCap(1024, 1024), 768u);       // a quarter kept back
  EXPECT_EQ(ConnectionCap(1024, 256), 192u);        // at least 64 kept back
  EXPECT_EQ(ConnectionCap(1024, 100), 36u);
  EXPECT_EQ(ConnectionCap(1024, 20), 8u);  // a few, whatever the limit
  EXPECT_EQ(ConnectionCap(10, 256), 10u);
}

TEST(ConfigTest, TimeoutsAndTheConnectionCapRefuseWhatCannotWork) {
  Result<Config> zero = ParseConfig("request_timeout = \"0s\"\n", "c.toml");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(),
              HasSubstr("config option request_timeout: '0s' is too short; expected a duration"));
  EXPECT_THAT(zero.status().message(), HasSubstr("of at least 100ms"));
  Result<Config> none = ParseConfig("max_connections = 0\n", "c.toml");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(),
              HasSubstr("config option max_connections: expected a whole number of connections "
                        "from 1 to 100000"));
  Result<Config> ok = ParseConfig(
      "request_timeout = \"2s\"\nidle_timeout = \"100ms\"\nmax_connections = 5\n", "c.toml");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->request_timeout_ms, 2000);
  EXPECT_EQ(ok->idle_timeout_ms, 100);
  EXPECT_EQ(ok->max_connections, 5);
}

TEST(ConfigTest, TheHeadDeadlineAndThePerPeerCapRefuseWhatCannotWork) {
  Config defaults;
  EXPECT_EQ(defaults.header_timeout_ms, 5000);
  EXPECT_EQ(defaults.max_connections_per_peer, 64);
  for (const char* bad : {"header_timeout = \"50ms\"\n", "header_timeout = 5\n"}) {
    Result<Config> r = ParseConfig(bad, "c.toml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("config option header_timeout:")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("a duration like \"30s\"")) << bad;
  }
  for (const char* bad :
       {"max_connections_per_peer = 0\n", "max_connections_per_peer = -1\n",
        "max_connections_per_peer = \"64\"\n", "max_connections_per_peer = 100001\n"}) {
    Result<Config> r = ParseConfig(bad, "c.toml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(),
                HasSubstr("config option max_connections_per_peer: expected a whole number of "
                          "connections from 1 to 100000"))
        << bad;
  }
  Result<Config> ok =
      ParseConfig("header_timeout = \"2s\"\nmax_connections_per_peer = 8\n", "c.toml");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->header_timeout_ms, 2000);
  EXPECT_EQ(ok->max_connections_per_peer, 8);
  EXPECT_EQ(OptionValueText(*ok, "header_timeout"), "\"2s\"");
  EXPECT_EQ(OptionValueText(*ok, "max_connections_per_peer"), "8");
}

// ---- The option table itself ----

// The default as a config file spells it: sizes and durations are TOML strings.
std::string DefaultInToml(const OptionInfo& o) {
  bool quoted = o.type == "size" || o.type == "duration";
  return quoted ? "\"" + std::string(o.default_text) + "\"" : std::string(o.default_text);
}

// Whoever can write to the store decides what every node queues and cancels: outside
// loopback it must ask for a password.
TEST(CheckClusterTest, AStoreWithoutAPasswordIsRefusedOutsideLoopback) {
  auto judge = [](const std::string& toml) {
    Result<Config> c = ParseConfig(toml, "c.toml");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? CheckCluster(*c) : c.status();
  };
  Status open = judge("store = \"redis://10.0.0.10:6379/0\"\n");
  EXPECT_EQ(open.code(), Code::kInvalid);
  EXPECT_THAT(open.message(), HasSubstr("store: Redis on 10.0.0.10 without a password"));
  EXPECT_THAT(open.message(), HasSubstr("store_password_file"));
  EXPECT_TRUE(judge("store = \"redis://127.0.0.1:6379/0\"\n").ok());
  EXPECT_TRUE(judge("store = \"redis://localhost/0\"\n").ok());
  EXPECT_TRUE(judge("store = \"redis://node:pw@10.0.0.10/0\"\n").ok());
  EXPECT_TRUE(judge("store = \"redis://node@10.0.0.10/0\"\nstore_password_file = \"/x\"\n").ok());
}

// redis+sentinel://: the password rule holds for the sentinels' hosts; the sentinels' own
// password file and the replica count only mean something with a store that has them.
TEST(CheckClusterTest, SentinelOptionsAreJudgedWithTheStore) {
  auto judge = [](const std::string& toml) {
    Result<Config> c = ParseConfig(toml, "c.toml");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? CheckCluster(*c) : c.status();
  };
  EXPECT_TRUE(judge("store = \"redis+sentinel://127.0.0.1,127.0.0.1:26380/tq/0\"\n").ok());
  Status open = judge("store = \"redis+sentinel://127.0.0.1,10.0.0.12/tq\"\n");
  EXPECT_EQ(open.code(), Code::kInvalid);
  EXPECT_THAT(open.message(), HasSubstr("store: Redis on 10.0.0.12 without a password"));
  EXPECT_TRUE(judge("store = \"redis+sentinel://node@10.0.0.11,10.0.0.12,10.0.0.13/tq/0\"\n"
                    "store_password_file = \"/x\"\nstore_sentinel_password_file = \"/y\"\n")
                  .ok());
  Status stray = judge("store = \"redis://127.0.0.1/0\"\nstore_sentinel_password_file = \"/y\"\n");
  EXPECT_EQ(stray.code(), Code::kInvalid);
  EXPECT_THAT(stray.message(),
              HasSubstr("store_sentinel_password_file: set, but store is not a redis+sentinel://"));
  Status embedded = judge("store_min_replicas_acked = 1\n");
  EXPECT_EQ(embedded.code(), Code::kInvalid);
  EXPECT_THAT(embedded.message(), HasSubstr("store_min_replicas_acked: the embedded store"));
  EXPECT_TRUE(judge("store = \"redis://127.0.0.1/0\"\nstore_min_replicas_acked = 1\n").ok());
  EXPECT_TRUE(judge("store_min_replicas_acked = 0\n").ok());
}

TEST(ConfigOptionsTest, MinReplicasAckedIsOneWithSentinelsUnlessSet) {
  Config c;
  EXPECT_EQ(MinReplicasAcked(c), 0);
  EXPECT_EQ(OptionValueText(c, "store_min_replicas_acked"), "\"auto\"");
  c.store = "redis://127.0.0.1/0";
  EXPECT_EQ(MinReplicasAcked(c), 0);
  c.store = "redis+sentinel://127.0.0.1/tq";
  EXPECT_EQ(MinReplicasAcked(c), 1);
  for (auto [text, want] : {std::pair{"0", 0}, std::pair{"2", 2}, std::pair{"\"auto\"", 1}}) {
    Result<Config> set = ParseConfig(
        fmt::format("store = \"redis+sentinel://127.0.0.1/tq\"\nstore_min_replicas_acked = {}\n",
                    text),
        "c.toml");
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_EQ(MinReplicasAcked(*set), want) << text;
    EXPECT_EQ(OptionValueText(*set, "store_min_replicas_acked"), text);
  }
  for (const char* bad : {"-1", "101", "\"two\"", "1.5"}) {
    Result<Config> refused =
        ParseConfig(fmt::format("store_min_replicas_acked = {}\n", bad), "c.toml");
    EXPECT_EQ(refused.status().code(), Code::kInvalid) << bad;
    EXPECT_THAT(refused.status().message(),
                HasSubstr("store_min_replicas_acked: expected a whole number of replicas"))
        << bad;
  }
}

TEST(ConfigOptionsTest, AStorePasswordIsNeverShown) {
  Result<Config> c =
      ParseConfig("store = \"redis://node:hun%40ter2@10.0.0.10:6379/0\"\n", "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->store, "redis://node:hun%40ter2@10.0.0.10:6379/0");  // what the daemon uses
  EXPECT_EQ(OptionValueText(*c, "store"), "\"redis://node:***@10.0.0.10:6379/0\"");
  c = ParseConfig("store = \"redis+sentinel://node:pw@10.0.0.11,10.0.0.12:26380/tq/0\"\n",
                  "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(OptionValueText(*c, "store"),
            "\"redis+sentinel://node:***@10.0.0.11,10.0.0.12:26380/tq/0\"");
  for (const char* url : {"redis://node@10.0.0.10:6379/0", "redis://10.0.0.10"}) {
    c = ParseConfig(fmt::format("store = \"{}\"\n", url), "c.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(OptionValueText(*c, "store"), fmt::format("\"{}\"", url));
  }
}

TEST(ConfigOptionsTest, EveryDefaultParsesToTheBuiltInValue) {
  const Config defaults;
  for (const OptionInfo& o : ConfigOptions()) {
    SCOPED_TRACE(std::string(o.name));
    if (o.name == "node_name") {  // "the host name": filled in at start
      EXPECT_EQ(defaults.node_name, "");
      continue;
    }
    std::string toml = std::string(o.name) + " = " + DefaultInToml(o) + "\n";
    Result<Config> c = ParseConfig(toml, "defaults.toml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(OptionValueText(*c, o.name), OptionValueText(defaults, o.name));
    // And the value shown reads back to itself.
    Result<Config> again =
        ParseConfig(std::string(o.name) + " = " + *OptionValueText(*c, o.name), "again.toml");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(OptionValueText(*again, o.name), OptionValueText(*c, o.name));
  }
}

TEST(ConfigOptionsTest, AWrongValueNamesTheOptionAndItsForm) {
  for (const OptionInfo& o : ConfigOptions()) {
    SCOPED_TRACE(std::string(o.name));
    ASSERT_FALSE(o.form.empty());
    // A boolean option is given a string instead.
    std::string wrong = o.type == "boolean" ? "\"yes\"" : "true";
    Result<Config> c = ParseConfig(std::string(o.name) + " = " + wrong + "\n", "bad.toml");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Code::kInvalid);
    EXPECT_THAT(c.status().message(),
                HasSubstr(fmt::format("bad.toml: config option {}: expected {}", o.name, o.form)));
  }
}

TEST(ConfigOptionsTest, SettableOptionsRoundTripThroughTheApiAndTheSettingsFile) {
  int settable = 0;
  for (const OptionInfo& o : ConfigOptions()) {
    SCOPED_TRACE(std::string(o.name));
    std::string name(o.name);
    EXPECT_EQ(IsSettable(name), o.settable);
    EXPECT_TRUE(IsOption(name));
    std::string wrong = o.type == "boolean" ? "\"maybe\"" : "true";
    Result<RuntimeUpdate> bad = ParseRuntimeUpdate(fmt::format("{{\"{}\": {}}}", name, wrong));
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr(name));
    if (!o.settable) {
      EXPECT_THAT(bad.status().message(), HasSubstr("set it in the config file"));
      continue;
    }
    ++settable;
    EXPECT_THAT(SettableKeys(), HasSubstr(name));
    // The default, as the API shows it, is accepted back and persists.
    std::string body = fmt::format("{{\"{}\": {}}}", name, SettableValueJson(Config{}, name));
    Result<RuntimeUpdate> u = ParseRuntimeUpdate(body);
    ASSERT_TRUE(u.ok()) << body << ": " << u.status().ToString();
    ASSERT_TRUE(u->set.Has(name));
    Result<RuntimeSettings> back =
        RuntimeSettingsFromJson(RuntimeSettingsToJson(u->set), "settings.json");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(OptionValueText(WithRuntime(Config{}, *back), name), OptionValueText(Config{}, name));
  }
  // cpu_slots, placement, devices, paused, paused_gpus, max_jobs_per_gpu, max_gpus_per_user,
  // max_jobs_per_user (docs/config.md says which)
  EXPECT_EQ(settable, 8);
}

TEST(ConfigOptionsTest, PolicyDefaultsAreThePlacementPolicys) {
  PolicyConfig from_config = PolicyOf(Config{});
  PolicyConfig policy;
  EXPECT_EQ(from_config.headroom_bytes, policy.headroom_bytes);
  EXPECT_EQ(from_config.ramp_up_ms, policy.ramp_up_ms);
  EXPECT_EQ(from_config.devices, policy.devices);
  EXPECT_EQ(from_config.max_jobs_per_gpu, policy.max_jobs_per_gpu);
  EXPECT_EQ(from_config.max_gpus_per_user, policy.max_gpus_per_user);
  EXPECT_EQ(from_config.max_jobs_per_user, policy.max_jobs_per_user);
  EXPECT_EQ(from_config.aging_ms, policy.aging_ms);
  EXPECT_EQ(from_config.max_holds, policy.max_holds);
  EXPECT_EQ(from_config.pack, policy.pack);
  EXPECT_EQ(from_config.paused, policy.paused);
  EXPECT_EQ(from_config.paused_gpus, policy.paused_gpus);
  EXPECT_EQ(from_config.whole_max_used_bytes, policy.whole_max_used_bytes);
  EXPECT_EQ(from_config.stale_after_ms, policy.stale_after_ms);

  Config c;
  c.policy.whole_max_used_bytes = 9;
  c.policy.stale_after_ms = 30000;
  c.policy.headroom_bytes = 1;
  c.policy.ramp_up_ms = 2;
  c.policy.devices = {3};
  c.policy.max_jobs_per_gpu = 4;
  c.policy.max_gpus_per_user = 7;
  c.policy.max_jobs_per_user = 8;
  c.policy.aging_ms = 5;
  c.policy.max_holds = 6;
  c.policy.pack = true;
  c.policy.paused = true;
  c.policy.paused_gpus = {1};
  PolicyConfig p = PolicyOf(c);
  EXPECT_EQ(p.headroom_bytes, 1u);
  EXPECT_EQ(p.ramp_up_ms, 2);
  EXPECT_THAT(p.devices, ::testing::ElementsAre(3));
  EXPECT_EQ(p.max_jobs_per_gpu, 4);
  EXPECT_EQ(p.max_gpus_per_user, 7);
  EXPECT_EQ(p.max_jobs_per_user, 8);
  EXPECT_EQ(p.aging_ms, 5);
  EXPECT_EQ(p.whole_max_used_bytes, 9u);
  EXPECT_EQ(p.stale_after_ms, 30000);
  // Facts are never called stale between two good samples.
  c.sample_interval_ms = 20000;
  EXPECT_EQ(PolicyOf(c).stale_after_ms, 40000);
  EXPECT_EQ(p.max_holds, 6);
  EXPECT_TRUE(p.pack);
  EXPECT_TRUE(p.paused);
  EXPECT_THAT(p.paused_gpus, ::testing::ElementsAre(1));
}

// The row docs/config.md must have for `o`.
std::string DocRow(const OptionInfo& o) {
  std::string def = o.default_text == "the host name" ? std::string(o.default_text)
                                                      : "`" + std::string(o.default_text) + "`";
  return fmt::format("| `{}` | {} | {} | {} | {} |", o.name, o.type, def, o.settable ? "yes" : "no",
                     o.help);
}

// docs/config.md is the user's reference: its option table is the table's rows, exactly,
// and nothing else.
TEST(ConfigOptionsTest, DocsListEveryOptionExactly) {
  std::ifstream in(std::string(TRAINQ_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md is missing";
  std::set<std::string> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("| `")) rows.insert(line);
  }
  std::set<std::string> expected;
  for (const OptionInfo& o : ConfigOptions()) expected.insert(DocRow(o));
  for (const std::string& row : expected) {
    EXPECT_TRUE(rows.count(row)) << "docs/config.md lacks the row\n" << row;
  }
  for (const std::string& row : rows) {
    EXPECT_TRUE(expected.count(row)) << "docs/config.md has a row the table lacks\n" << row;
  }
}

}  // namespace
}  // namespace trainq

namespace trainq {
namespace {

Config ListenConfig(std::vector<std::string> listen) {
  Config c;
  c.listen = std::move(listen);
  return c;
}

TEST(CheckListenTest, LoopbackWithoutTlsAndAnyAddressWithTlsAreServed) {
  EXPECT_TRUE(CheckListen(Config{}).ok());
  EXPECT_TRUE(CheckListen(ListenConfig({"127.0.0.1:7070", "[::1]:7070", "localhost:0"})).ok());
  Config tls = ListenConfig({"0.0.0.0:7070", "[::]:7071"});
  tls.tls_cert = "/etc/trainq/cert.pem";
  tls.tls_key = "/etc/trainq/key.pem";
  EXPECT_TRUE(CheckListen(tls).ok());
}

// Bearer tokens in clear on the network: refused unless the operator says the network is
// trusted.
TEST(CheckListenTest, AnExposedAddressWithoutTlsNeedsAllowPlaintext) {
  Config c = ListenConfig({"127.0.0.1:7070", "0.0.0.0:7070"});
  Status st = CheckListen(c);
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_THAT(st.message(), HasSubstr("0.0.0.0:7070"));
  EXPECT_THAT(st.message(), Not(HasSubstr("127.0.0.1:7070")));
  EXPECT_THAT(st.message(), HasSubstr("in clear"));
  EXPECT_THAT(st.message(), HasSubstr("tls_cert and tls_key"));
  EXPECT_THAT(st.message(), HasSubstr("allow_plaintext = true"));
  c.allow_plaintext = true;
  EXPECT_TRUE(CheckListen(c).ok());
}

TEST(CheckListenTest, TlsCertAndKeyGoTogether) {
  Config c = ListenConfig({"127.0.0.1:7070"});
  c.tls_cert = "/c.pem";
  Status st = CheckListen(c);
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_THAT(st.message(), HasSubstr("tls_cert is set but tls_key is not"));
  c.tls_cert.clear();
  c.tls_key = "/k.pem";
  EXPECT_THAT(CheckListen(c).message(), HasSubstr("tls_key is set but tls_cert is not"));
}

TEST(CheckListenTest, EveryBadAddressIsNamedAtOnce) {
  Status st = CheckListen(ListenConfig({"7070", "127.0.0.1:7070", "::1:80"}));
  EXPECT_EQ(st.code(), Code::kInvalid);
  EXPECT_THAT(st.message(), HasSubstr("listen: '7070'"));
  EXPECT_THAT(st.message(), HasSubstr("listen: '::1:80'"));
  EXPECT_THAT(st.message(), HasSubstr("HOST:PORT"));
}

TEST(CheckListenTest, ReadFromTheConfigFile) {
  Result<Config> c =
      ParseConfig("listen = [\"0.0.0.0:7070\"]\nallow_plaintext = true\n", "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(CheckListen(*c).ok());
}

// The preemption options reach the scheduler's PreemptConfig through PreemptConfigFrom, the
// function the simulator builds its own with (src/sim/replay_preempt_test.cc checks its side:
// the same defaults, every setting read).
TEST(ConfigTest, PreemptionOptionsMakeThePreemptConfig) {
  EXPECT_EQ(PreemptConfigFrom(*ParseConfig("", "config.toml")), PreemptConfig{});
  Result<Config> c = ParseConfig(
      "preempt_priority_gap = 0\npreempt_for_fair_share = true\npreempt_for_aging = true\n"
      "min_runtime = \"5m\"\npreempt_spare = \"2h\"\nattained_service = \"1h\"\n"
      "preempt_for_attained_service = true\n",
      "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  PreemptConfig p = PreemptConfigFrom(*c);
  EXPECT_EQ(p.priority_gap, 0);
  EXPECT_TRUE(p.for_fair_share);
  EXPECT_TRUE(p.for_aging);
  EXPECT_EQ(p.min_runtime_ms, 5 * 60 * 1000);
  EXPECT_EQ(p.spare_ms, 2 * 3600 * 1000);
  EXPECT_TRUE(p.for_attained_service);
  EXPECT_EQ(p.attained_service_ms, 3600 * 1000);
}

}  // namespace
}  // namespace trainq
