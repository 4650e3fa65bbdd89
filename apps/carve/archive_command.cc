// `carve export all` and `carve import` (runtime/archive.h): leaving a server, or moving in.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/store/postgres_store.h"
#include "client_common.h"
#include "core/model/gpu_catalog.h"
#include "ports/store.h"
#include "runtime/archive.h"
#include "runtime/store_migrate.h"

namespace carve::app {

using json = nlohmann::json;

void AddExportAll(CLI::App& exp, std::shared_ptr<Connection> c) {
  auto out = std::make_shared<std::string>();
  CLI::App* all = exp.add_subcommand(
      "all",
      "Every configuration document, finished job, usage record, utilization series and the event "
      "log, with a manifest of checksums (admins; carve import reads it)");
  all->add_option("--out", *out, "A new or empty directory")->required();
  all->callback([c, out] {
    ApiClient client = Client(*c);
    json manifest = Check(ExportArchive(client, *out));
    if (Structured(*c, manifest)) return;
    for (const json& f : manifest["files"]) {
      std::cout << f["path"].get<std::string>() << ": " << f["records"] << " records\n";
    }
    std::cout << "events: " << manifest["events"]["events"] << ", head "
              << manifest["events"]["head_hash"].get<std::string>() << "\n";
    for (const json& why : manifest["left_out"]) {
      std::cout << "left out: " << why.get<std::string>() << "\n";
    }
  });
}

namespace {

// The server's own lock on `data`: no server starts on the directory while the import writes.
void LockDataDir(const std::string& data) {
  std::error_code ec;
  std::filesystem::create_directories(data, ec);
  if (ec) Die(absl::InternalError(absl::StrCat(data, ": ", ec.message())));
  const std::string lock = data + "/server.lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    Die(absl::FailedPreconditionError(
        absl::StrCat(data, " is in use by a carve server (", std::strerror(errno), ")")));
  }
}

// A store named on the command line: sqlite:DIR (the carve.db of a server's --data, locked as
// the server locks it) or a postgres:// URL. `must_exist`: a SQLite source is never created.
std::unique_ptr<Store> OpenNamedStore(const std::string& flag, const std::string& name,
                                      bool must_exist) {
  if (IsPostgresUrl(name)) {
    auto store = OpenPostgresStore(name);
    if (!store.ok()) Die(store.status());
    return *std::move(store);
  }
  if (!absl::StartsWith(name, "sqlite:") || name.size() == 7) {
    Die(absl::InvalidArgumentError(absl::StrCat(
        flag, " ", name, ": name a store as sqlite:DIR (a server's --data) or postgresql://...")));
  }
  const std::string dir = name.substr(7);
  const std::string db = dir + "/carve.db";
  if (must_exist && !std::filesystem::exists(db)) {
    Die(absl::NotFoundError(absl::StrCat(flag, " ", name, ": ", db, " does not exist")));
  }
  LockDataDir(dir);
  auto store = OpenSqliteStore(db);
  if (!store.ok()) Die(store.status());
  return *std::move(store);
}

}  // namespace

void AddStore(CLI::App& app) {
  CLI::App* store = app.add_subcommand("store", "Move a server's state between stores");
  store->require_subcommand(1);
  auto from = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  CLI::App* migrate = store->add_subcommand(
      "migrate",
      "Copy every record and the event log into a new, empty store, with the chain's head hash "
      "checked the same (stop the server first)");
  migrate->add_option("--from", *from, "sqlite:DIR (a server's --data) or postgresql://...")
      ->required();
  migrate->add_option("--to", *to, "An empty store: postgresql://... or sqlite:DIR")->required();
  migrate->callback([from, to] {
    ::umask(077);
    if (*from == *to) Die(absl::InvalidArgumentError("--from and --to name the same store"));
    std::unique_ptr<Store> source = OpenNamedStore("--from", *from, true);
    std::unique_ptr<Store> destination = OpenNamedStore("--to", *to, false);
    json report = Check(MigrateStore(*source, *destination));
    report["from"] = absl::StartsWith(*from, "sqlite:") ? *from : "postgresql";
    report["to"] = absl::StartsWith(*to, "sqlite:") ? *to : "postgresql";
    report["not_moved"] =
        "job logs and token files stay in the server's --data directory: start the server with "
        "the same --data and --store set to the new store";
    std::cout << report.dump(2) << "\n";
  });
}

void AddImport(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto data = std::make_shared<std::string>();
  auto store_url = std::make_shared<std::string>();
  CLI::App* import = app.add_subcommand(
      "import",
      "Write an export (carve export all) into a new data directory, checked against its "
      "manifest; then start carve server --data on it");
  import->add_option("dir", *dir, "The export's directory")->required();
  import->add_option("--data", *data, "A new or empty data directory for carve server")->required();
  import->add_option("--store", *store_url,
                     "postgresql://...: an empty PostgreSQL database instead of SQLite in --data "
                     "(start carve server --store with the same URL)");
  import->callback([dir, data, store_url] {
    ::umask(077);
  LockDataDir(*data);
  if (!store_url->empty() && !IsPostgresUrl(*store_url)) {
    Die(absl::InvalidArgumentError(
        absl::StrCat("--store ", *store_url, ": not a postgres:// or postgresql:// URL")));
  }
  auto store =
      store_url->empty() ? OpenSqliteStore(*data + "/carve.db") : OpenPostgresStore(*store_url);
  if (!store.ok()) Die(store.status());
  const GpuCatalog catalog = GpuCatalog::BuiltIn();
  json report = Check(ImportArchive(*dir, **store, catalog, *data + "/logs"));
  std::cout << report.dump(2) << "\n";
});
}  // namespace carve::app

}  // namespace carve::app
