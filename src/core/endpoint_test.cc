#include "src/core/endpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainq {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ParseServerUrlTest, AcceptsUnixHttpAndHttps) {
  Result<Endpoint> unix_ep = ParseServerUrl("unix:/run/trainq/trainq.sock", "--server");
  ASSERT_TRUE(unix_ep.ok()) << unix_ep.status().message();
  EXPECT_EQ(unix_ep->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(unix_ep->path, "/run/trainq/trainq.sock");

  Result<Endpoint> http = ParseServerUrl("http://gpu1.lab:7070", "--server");
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->kind, Endpoint::Kind::kHttp);
  EXPECT_EQ(http->host, "gpu1.lab");
  EXPECT_EQ(http->port, 7070);

  Result<Endpoint> https = ParseServerUrl("https://10.0.0.7:443/", "--server");
  ASSERT_TRUE(https.ok());
  EXPECT_EQ(https->kind, Endpoint::Kind::kHttps);
  EXPECT_EQ(https->host, "10.0.0.7");
  EXPECT_EQ(https->port, 443);

  Result<Endpoint> v6 = ParseServerUrl("https://[::1]:7070", "--server");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->Describe(), "https://[::1]:7070");
}

TEST(ParseServerUrlTest, DescribeParsesBackToTheSameEndpoint) {
  for (const char* url : {"unix:/a/b.sock", "http://h:1", "https://[fe80::1]:65535/",
                          "https://Host-1.example.org:8443"}) {
    Result<Endpoint> ep = ParseServerUrl(url, "--server");
    ASSERT_TRUE(ep.ok()) << url;
    Result<Endpoint> again = ParseServerUrl(ep->Describe(), "--server");
    ASSERT_TRUE(again.ok()) << ep->Describe();
    EXPECT_EQ(*again, *ep) << url;
  }
}

TEST(ParseServerUrlTest, RefusesWhatIsNotTheFormNamingTheField) {
  for (const char* bad :
       {"", "unix:", "unix:relative.sock", "ftp://h:1", "http://h", "http://h:", "http://h:0",
        "http://h:65536", "http://h:+80", "http://:80", "http://h:80/v1", "http://h:80//",
        "http://user@h:80", "http://[::1:80", "http://[nothex]:80", "http://::1:80",
        "https://h:80?x", "http://h_x:80", "HTTP://h:80"}) {
    Result<Endpoint> ep = ParseServerUrl(bad, "--server");
    ASSERT_FALSE(ep.ok()) << bad;
    EXPECT_EQ(ep.status().code(), Code::kInvalid);
    EXPECT_THAT(ep.status().message(),
                AllOf(HasSubstr("--server"), HasSubstr("https://HOST:PORT"), HasSubstr("unix:")))
        << bad;
  }
}

TEST(ParseListenAddressTest, AcceptsHostPortAndBracketedIpv6) {
  Result<ListenAddress> any = ParseListenAddress("0.0.0.0:7070", "listen");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->host, "0.0.0.0");
  EXPECT_EQ(any->port, 7070);
  Result<ListenAddress> v6 = ParseListenAddress("[::1]:0", "listen");  // 0: any free port
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_EQ(v6->Describe(), "[::1]:0");
  ASSERT_TRUE(ParseListenAddress("localhost:80", "listen").ok());
}

TEST(ParseListenAddressTest, RefusesOtherFormsNamingTheField) {
  for (const char* bad : {"", "7070", ":7070", "0.0.0.0", "0.0.0.0:", "0.0.0.0:65536", "::1:80",
                          "[::1]", "[::1]80", "h:80x", "h:-1", "http://h:80"}) {
    Result<ListenAddress> a = ParseListenAddress(bad, "listen");
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().code(), Code::kInvalid);
    EXPECT_THAT(a.status().message(), AllOf(HasSubstr("listen"), HasSubstr("[IPv6]:PORT")));
  }
}

TEST(IsLoopbackHostTest, OnlyAddressesNoOtherMachineReaches) {
  for (const char* h : {"127.0.0.1", "127.255.0.9", "::1", "[::1]", "localhost", "LocalHost",
                        "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "localhost.evil.com", "gpu1",
                        "::2", "::ffff:10.0.0.1", "", "127.0.0.1.nip.io"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

}  // namespace
}  // namespace trainq
