// The dashboard: its embedded files under /ui/ (ui_assets.h). Serving them needs no token: they
// hold no data. Every figure the pages show comes from the REST API with the signed-in token, so
// the dashboard shows exactly what that token may see (the same Authorize as the CLI's calls).
#include <map>
#include <string>

#include "httplib.h"
#include "runtime/api_server.h"
#include "runtime/ui_assets.h"

namespace carve {

namespace {

// Scripts and styles only from the server itself, no inline script, no framing.
constexpr char kPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

constexpr char kWithout[] =
    "<!doctype html><meta charset=utf-8><title>Carve</title><p>This <code>carve</code> was built "
    "without its dashboard (<code>-DCARVE_BUILD_UI=OFF</code>). The REST API is at "
    "<a href=\"/api/v1/openapi.json\">/api/v1/openapi.json</a>; the CLI is <code>carve "
    "--help</code>.</p>\n";

void Protect(httplib::Response& res) {
  res.set_header("Content-Security-Policy", kPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
}

const std::map<std::string, const UiAsset*>& AssetsByPath() {
  static const auto* by_path = [] {
    auto* m = new std::map<std::string, const UiAsset*>;
    for (const UiAsset& a : UiAssets()) (*m)[a.path] = &a;
    return m;
  }();
  return *by_path;
}

void ServeUi(const std::string& path, httplib::Response& res) {
  Protect(res);
  const auto& assets = AssetsByPath();
  if (assets.empty()) {
    res.status = path.empty() ? 200 : 404;
    res.set_content(kWithout, "text/html; charset=utf-8");
    return;
  }
  auto at = assets.find(path.empty() ? "index.html" : path);
  if (at == assets.end()) {
    res.status = 404;
    res.set_content("no such file of the dashboard; it starts at /ui/\n", "text/plain");
    return;
  }
  // Files under assets/ carry a hash of their content in their names: cached for good. The page
  // itself is asked for again each time, so a new server's page names its new files.
  const bool hashed = path.rfind("assets/", 0) == 0;
  res.set_header("Cache-Control", hashed ? "public, max-age=31536000, immutable" : "no-cache");
  res.set_content(at->second->body, at->second->type);
}

}  // namespace

void ApiServer::UiRoutes() {
  httplib::Server& s = *http_;
  auto to_ui = [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/ui/"); };
  s.Get("/", to_ui);
  s.Get("/ui", to_ui);
  s.Get(R"(/ui/(.*))", [](const httplib::Request& req, httplib::Response& res) {
    ServeUi(req.matches[1].str(), res);
  });
}

}  // namespace carve
