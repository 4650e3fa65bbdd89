// The API's transport against the real binaries (issue 10: H4, R3, L2): the port is bound
// exclusively, a second server fails clearly and changes nothing, plain HTTP only on loopback,
// TLS that the agents and the CLI verify, and the Authorization header compared as sent.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

const NodeList kNoNodes = {};

class TransportTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNoNodes; }

  // Runs a command to its end (at most `seconds`): its exit status, -1 when it did not end.
  int RunToEnd(const std::vector<std::string>& args, const std::string& log, int seconds = 20) {
    pid_t pid = Spawn(args, log);
    int status = 0;
    if (!Eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, seconds)) {
      Kill(pid, SIGKILL);
      return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string Here() { return absl::StrCat("127.0.0.1:", port_); }

  // The files a second server must not touch.
  std::string ServerFiles() {
    std::string out;
    for (const char* f : {"server", "admin.token", "agent.token"}) {
      absl::StrAppend(&out, f, "=", Slurp((dir_ / "data" / f).string()), ";");
    }
    return out;
  }

  // GET /api/v1/nodes with this exact Authorization value: the HTTP status.
  int StatusWithAuthorization(const std::string& value) {
    httplib::Client client(url_);
    auto r = client.Get("/api/v1/nodes", {{"Authorization", value}});
    return r ? r->status : -1;
  }
};

// The job list in pages (after, limit, a Link header to the next page), streamed whole without a
// limit, and `carve ls` printing its table a page at a time. No nodes: every job stays queued.
TEST_F(TransportTest, TheJobListComesInPagesAndWholeListsStream) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 1001; ++i) ids.push_back(Submit({{"command", {"true"}}})["id"]);
  std::vector<int64_t> paged;
  for (int64_t after = 0;;) {
    auto page = Api().Get(absl::StrCat("/api/v1/jobs?all=true&limit=300&after=", after));
    ASSERT_TRUE(page.ok()) << page.status();
    for (const json& j : *page) paged.push_back(j["id"]);
    if (page->size() < 300) break;
    after = paged.back();
  }
  EXPECT_EQ(paged, ids);
  httplib::Client client(url_);
  auto linked = client.Get("/api/v1/jobs?limit=300", {{"Authorization", "Bearer " + token_}});
  ASSERT_TRUE(linked);
  EXPECT_EQ(linked->get_header_value("Link"),
            absl::StrCat("</api/v1/jobs?after=", ids[299], "&limit=300>; rel=\"next\""));

  // The audit export streams the same way (StreamPages): its 1,001 submissions are more than one
  // page of 1,000 records, each once and in order.
  auto audit = client.Get("/api/v1/audit?format=jsonl", {{"Authorization", "Bearer " + token_}});
  ASSERT_TRUE(audit);
  std::vector<std::string> records = absl::StrSplit(audit->body, '\n', absl::SkipEmpty());
  EXPECT_GT(records.size(), ids.size());
  int64_t seq = 0;
  for (const std::string& r : records) {
    int64_t next = json::parse(r).value("seq", int64_t{0});
    EXPECT_EQ(next, seq + 1);
    seq = next;
  }

  auto whole = Api().Get("/api/v1/jobs");  // more than one page of 1,000: streamed
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), ids.size());
  EXPECT_EQ((*whole)[1000]["id"], ids[1000]);

  std::string log = (dir_ / "ls.log").string();
  ASSERT_EQ(RunToEnd({CARVE_BINARY, "ls", "--server", url_, "--token", token_}, log), 0)
      << Slurp(log);
  std::vector<std::string> lines = absl::StrSplit(Slurp(log), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), ids.size() + 1) << "one header, then every job";
  EXPECT_TRUE(absl::StartsWith(lines[0], "ID "));
  EXPECT_TRUE(absl::StartsWith(lines[501], absl::StrCat(ids[500], " "))) << lines[501];

  for (const std::string bad : {"limit=0", "limit=10001", "limit=ten", "after=-1"}) {
    auto r = Api().Get("/api/v1/jobs?" + bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(
        r.status().message(),
        HasSubstr(absl::StartsWith(bad, "limit") ? "limit must be a number from 1 to 10000"
                                                 : "after: \"-1\" is not a non-negative integer"));
  }
}

// R3: `scripts/dev` twice said "the token is not valid": both servers bound 7070 and the second
// one's tokens met half of the connections. Now a second server stops before writing anything.
TEST_F(TransportTest, SecondServerOnTheApiPortFailsClearlyAndTheFirstKeepsServing) {
  const std::string data = (dir_ / "data").string();
  const std::string before = ServerFiles();
  std::string same = (dir_ / "same-data.log").string();
  EXPECT_NE(RunToEnd({CARVE_BINARY, "server", "--data", data, "--listen", Here()}, same), 0);
  EXPECT_THAT(
      Slurp(same),
      HasSubstr(absl::StrCat("port ", port_, " is in use (another carve server?); try --listen")));
  std::string other = (dir_ / "other-data.log").string();
  EXPECT_NE(
      RunToEnd({CARVE_BINARY, "server", "--data", (dir_ / "other").string(), "--listen", Here()},
               other),
      0);
  EXPECT_THAT(Slurp(other), HasSubstr("is in use"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "other")) << "a failed start wrote its data";
  // Another port, the same data directory: the data lock stops it before the store.
  std::string locked = (dir_ / "locked.log").string();
  EXPECT_NE(RunToEnd({CARVE_BINARY, "server", "--data", data, "--listen", "127.0.0.1:0"}, locked),
            0);
  EXPECT_THAT(Slurp(locked), HasSubstr("is in use by another carve server"));
  EXPECT_EQ(ServerFiles(), before);
  for (int i = 0; i < 50; ++i) {
    auto nodes = Api().Get("/api/v1/nodes");
    ASSERT_TRUE(nodes.ok()) << "request " << i << ": " << nodes.status() << ServerLog();
  }
}

// H4: cpp-httplib set SO_REUSEPORT on the API socket, so any process of the server's user (a job
// under `carve dev`) could bind the same port and receive part of the connections, tokens
// included. This process is of that user; it binds as such a job did.
TEST_F(TransportTest, NoSocketCanCoBindTheApiPort) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  int yes = 1;
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &yes, sizeof(yes)), 0);
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes)), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  ::close(fd);
  EXPECT_EQ(rc, -1) << "bound the API port beside the server";
  EXPECT_EQ(err, EADDRINUSE);
}

// L2: httplib percent-decodes header values and get_header_value cuts them at NUL, so
// "Bearer %63arve_..." and "Bearer TOKEN%00junk" authenticated. Only the exact bytes do now.
TEST_F(TransportTest, AuthorizationHeaderIsComparedAsSent) {
  ASSERT_FALSE(token_.empty());
  EXPECT_EQ(StatusWithAuthorization("Bearer " + token_), 200);
  std::string encoded =
      absl::StrFormat("Bearer %%%02x%s", static_cast<unsigned char>(token_[0]), token_.substr(1));
  EXPECT_EQ(StatusWithAuthorization(encoded), 401) << encoded;
  EXPECT_EQ(StatusWithAuthorization("Bearer " + token_ + "%00junk"), 401);
  EXPECT_EQ(StatusWithAuthorization("Bearer  " + token_), 401);
  EXPECT_EQ(StatusWithAuthorization("bearer " + token_), 401);
}

// H4: plain HTTP, where tokens travel in clear, is served on loopback only unless --insecure.
TEST_F(TransportTest, PlainHttpOffLoopbackNeedsInsecure) {
  std::string log = (dir_ / "open.log").string();
  EXPECT_NE(RunToEnd({CARVE_BINARY, "server", "--data", (dir_ / "open").string(), "--listen",
                      "0.0.0.0:0"},
                     log),
            0);
  EXPECT_THAT(Slurp(log), HasSubstr("refusing to serve plain HTTP on 0.0.0.0:0"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "open"));
  pid_t open = Spawn({CARVE_BINARY, "server", "--data", (dir_ / "insecure").string(), "--listen",
                      "0.0.0.0:0", "--insecure"},
                     (dir_ / "insecure.log").string());
  EXPECT_TRUE(Eventually([&] {
    return absl::EndsWith(Slurp((dir_ / "insecure/server").string()), "\n");
  })) << Slurp((dir_ / "insecure.log").string());
  Kill(open, SIGKILL);
}

// A self-signed certificate for 127.0.0.1 and localhost, made with OpenSSL in the test.
void WriteSelfSigned(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  ASSERT_NE(key, nullptr);
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("carve-test"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost"},
                            std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    ASSERT_NE(ext, nullptr);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  ASSERT_GT(X509_sign(x, key, EVP_sha256()), 0);
  FILE* f = std::fopen(cert_path.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(key_path.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(key);
}

class TlsTest : public TransportTest {
 protected:
  const NodeList& Nodes() const override { return kNodes; }

  void SetUp() override {
    certs_ = std::filesystem::path(::testing::TempDir()) /
             absl::StrCat("carve-tls-", getpid(), "-", counter_);
    std::filesystem::create_directories(certs_);
    WriteSelfSigned((certs_ / "cert.pem").string(), (certs_ / "key.pem").string());
    WriteSelfSigned((certs_ / "other.pem").string(), (certs_ / "other-key.pem").string());
    server_args_ = {"--tls-cert", (certs_ / "cert.pem").string(), "--tls-key",
                    (certs_ / "key.pem").string()};
    ca_ = (certs_ / "cert.pem").string();
    PlatformTest::SetUp();  // the agents register over TLS with --ca
  }

  std::filesystem::path certs_;
};

// H4: with --tls-cert/--tls-key the API is HTTPS only; agents (SetUp) and the CLI verify it with
// --ca; a client that does not trust the certificate is refused, and plain HTTP gets nothing.
TEST_F(TlsTest, AgentsAndCliVerifyTheServerAndOthersAreRefused) {
  ASSERT_TRUE(absl::StartsWith(url_, "https://")) << url_;
  json job = Submit({{"command", {"sh", "-c", "echo over tls"}}});
  ASSERT_TRUE(job.contains("id")) << job.dump();
  EXPECT_EQ(WaitFinal(job["id"].get<int64_t>())["state"], "succeeded");
  EXPECT_THAT(Logs(job["id"].get<int64_t>()), HasSubstr("over tls"));

  std::string ok = (dir_ / "cli-ca.log").string();
  EXPECT_EQ(RunToEnd({CARVE_BINARY, "ls", "--server", url_, "--token", token_, "--ca", ca_}, ok), 0)
      << Slurp(ok);
  for (const std::string& ca : {std::string(), (certs_ / "other.pem").string()}) {
    std::string log = (dir_ / absl::StrCat("cli-", ca.empty() ? "none" : "other", ".log")).string();
    std::vector<std::string> args = {CARVE_BINARY, "ls", "--server", url_, "--token", token_};
    if (!ca.empty()) args.insert(args.end(), {"--ca", ca});
    EXPECT_NE(RunToEnd(args, log), 0);
    EXPECT_THAT(Slurp(log), HasSubstr("is not trusted")) << ca;
    EXPECT_FALSE(ApiClient(url_, token_, ca).Get("/api/v1/nodes").ok()) << ca;
  }
  std::string plain = "http://" + url_.substr(std::string("https://").size());
  EXPECT_FALSE(ApiClient(plain, token_).Get("/api/v1/nodes").ok());
}

// Bad TLS files are refused at start, naming the file, before anything is written.
TEST_F(TlsTest, BadTlsFilesAreRefusedByName) {
  const std::string cert = (certs_ / "cert.pem").string();
  struct Case {
    std::string cert, key, says;
  };
  for (const Case& c : {Case{(certs_ / "none.pem").string(), (certs_ / "key.pem").string(),
                             "not a readable PEM certificate"},
                        Case{cert, (certs_ / "other-key.pem").string(), "is not the key of"},
                        Case{cert, "", "TLS needs both --tls-cert and --tls-key"}}) {
    std::string log = (dir_ / "bad-tls.log").string();
    std::filesystem::remove(log);
    std::vector<std::string> args = {
        CARVE_BINARY, "server",      "--data",     (dir_ / "bad").string(),
        "--listen",   "127.0.0.1:0", "--tls-cert", c.cert};
    if (!c.key.empty()) args.insert(args.end(), {"--tls-key", c.key});
    EXPECT_EQ(RunToEnd(args, log), 1) << c.says;
    EXPECT_THAT(Slurp(log), HasSubstr(c.says));
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad"));
}

}  // namespace
}  // namespace carve
