// A private PostgreSQL server for tests, from Debian's packages: initdb and pg_ctl in a temporary
// directory, on a free port of 127.0.0.1, stopped (immediately) and removed at the end. As root
// it runs as the `postgres` user (initdb refuses root). `scripts/deps` installs the server.
#ifndef CARVE_TESTS_ADAPTERS_PRIVATE_POSTGRES_H_
#define CARVE_TESTS_ADAPTERS_PRIVATE_POSTGRES_H_

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <pqxx/pqxx>
#include <string>

#include "absl/strings/str_cat.h"

namespace carve::testing_pg {

// A port the kernel just handed out, free again.
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class PrivatePostgres {
 public:
  // "" when it runs; else why not ("no PostgreSQL server installed", a failed initdb).
  std::string Start(const std::string& dir) {
    dir_ = dir;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec_)) {
      if (std::filesystem::exists(e.path() / "bin/pg_ctl") && e.path().string() > bin_) {
        bin_ = e.path().string();
      }
    }
    if (bin_.empty()) return "no PostgreSQL server installed (scripts/deps installs it)";
    bin_ += "/bin";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    as_ = geteuid() == 0 && getpwnam("postgres") != nullptr ? "runuser -u postgres -- " : "";
    if (!as_.empty() && Shell("chown postgres " + dir_) != 0) return "cannot chown " + dir_;
    port_ = FreePort();
    if (Shell(absl::StrCat(as_, bin_, "/initdb -D ", dir_, "/data -A trust -U carve --no-sync >",
                           dir_, "/initdb.log 2>&1")) != 0) {
      return "initdb failed: see " + dir_ + "/initdb.log";
    }
    if (Shell(absl::StrCat(
            as_, bin_, "/pg_ctl -D ", dir_, "/data -l ", dir_, "/server.log -w -o \"-p ", port_,
            " -k ", dir_, " -c listen_addresses=127.0.0.1 -c fsync=off\" start >/dev/null")) != 0) {
      return "pg_ctl start failed: see " + dir_ + "/server.log";
    }
    started_ = true;
    return "";
  }
  ~PrivatePostgres() {
    if (started_) {
      Shell(absl::StrCat(as_, bin_, "/pg_ctl -D ", dir_, "/data -m immediate stop >/dev/null"));
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec_);
  }

  std::string Url(const std::string& db) const {
    return absl::StrCat("postgresql://carve@127.0.0.1:", port_, "/", db);
  }
  // A new, empty database `name` (dropped first if it exists).
  void CreateDatabase(const std::string& name) const {
    pqxx::connection admin(Url("postgres"));
    pqxx::nontransaction n(admin);
    n.exec("DROP DATABASE IF EXISTS " + name);
    n.exec("CREATE DATABASE " + name);
  }

 private:
  static int Shell(const std::string& command) { return std::system(command.c_str()); }

  std::string dir_, bin_, as_;
  int port_ = 0;
  bool started_ = false;
  std::error_code ec_;
};

// One private server for a whole test suite (started in SetUpTestSuite, stopped in
// TearDownTestSuite); each test takes a database of its own, named after its line.
class SuitePostgres {
 public:
  static void Start(const std::string& name) {
    server_ = new PrivatePostgres();
    why_not_ = server_->Start(absl::StrCat(::testing::TempDir(), name, "-", getpid()));
  }
  static void Stop() {
    delete server_;
    server_ = nullptr;
  }
  // A new, empty database for the running test, and its URL; a failure when the server is not up.
  static std::string NewDatabase(const std::string& prefix) {
    EXPECT_EQ(why_not_, "") << "the private PostgreSQL did not start";
    if (server_ == nullptr || !why_not_.empty()) return "";
    const std::string name =
        absl::StrCat(prefix, ::testing::UnitTest::GetInstance()->current_test_info()->line());
    server_->CreateDatabase(name);
    return server_->Url(name);
  }

 private:
  static inline PrivatePostgres* server_ = nullptr;
  static inline std::string why_not_;
};

}  // namespace carve::testing_pg

#endif  // CARVE_TESTS_ADAPTERS_PRIVATE_POSTGRES_H_
