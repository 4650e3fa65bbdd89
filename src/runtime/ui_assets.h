// The dashboard's files, embedded at build time (cmake/ui.cmake, cmake/embed_dir.cmake): what
// `carve server` serves under /ui/. Empty in a build without the dashboard (CARVE_BUILD_UI=OFF).
#ifndef CARVE_RUNTIME_UI_ASSETS_H_
#define CARVE_RUNTIME_UI_ASSETS_H_

#include <string>
#include <vector>

namespace carve {

struct UiAsset {
  std::string path;  // relative to /ui/: "index.html", "assets/index-3f2a.js"
  std::string type;  // Content-Type
  std::string body;
};

const std::vector<UiAsset>& UiAssets();

}  // namespace carve

#endif  // CARVE_RUNTIME_UI_ASSETS_H_
