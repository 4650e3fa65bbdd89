// libFuzzer target: the job-spec parsers (JSON as the API takes it, YAML as the CLI reads it),
// durations and workdir checks. A crash, sanitizer report, uncaught exception or broken round
// trip is a finding.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/model/gpu_catalog.h"
#include "nlohmann/json.hpp"
#include "runtime/job_spec.h"
#include "runtime/tenant_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const carve::GpuCatalog catalog = carve::GpuCatalog::BuiltIn();
  std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded()) {
    auto spec = carve::JobSpecFromJson(j);
    if (spec.ok()) {
      (void)carve::ToJobRequest(*spec, catalog);
      (void)carve::CheckWorkdir(spec->workdir);
      // What the store keeps must read back as the same spec.
      auto again = carve::JobSpecFromJson(spec->ToJson());
      if (!again.ok() || again->ToJson() != spec->ToJson()) std::abort();
    }
  }
  auto yaml = carve::YamlToJson(text);
  if (yaml.ok()) (void)carve::JobSpecFromJson(*yaml);
  (void)carve::YamlDocumentsToJson(text);
  (void)carve::ParseDurationUs(text);
  return 0;
}
