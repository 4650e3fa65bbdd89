#ifndef CARVE_ADAPTERS_NVML_NVML_NAMES_H_
#define CARVE_ADAPTERS_NVML_NVML_NAMES_H_

// How the NVML backend turns what the driver reports into catalog names. Pure functions, kept
// apart from the dlopen code so they can be tested on machines without a GPU.

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "core/model/gpu_catalog.h"

namespace carve {

struct NvmlModelName {
  std::string model;   // the catalog's canonical name; the NVML name unchanged when unknown
  bool known = false;  // false: no catalog model matched, `model` is the raw NVML name
};

// Maps an NVML product name to a catalog model. Drops a leading "NVIDIA " or "Tesla ", then tries
// the rest as written, with spaces as hyphens ("H100 80GB HBM3" -> "H100-80GB-HBM3"), and finally
// its leading words, longest first ("H200 NVL" -> "H200"). A leading-words match must agree with
// `memory_mib` within 10% when memory_mib > 0, so that an unknown variant with other memory (the
// 94 GB "H100 NVL") is reported unknown instead of as H100-80GB.
NvmlModelName NormalizeNvmlGpuName(const GpuCatalog& catalog, absl::string_view nvml_name,
                                   int64_t memory_mib = 0);

// The index in model.mig_profiles of a MIG device's GPU instance profile, or -1. Pass -1 for what
// is not known. Candidates have `gpu_instance_slices` compute slices and the memory nearest to
// `memory_mib` (within 25%); among equally near ones, the one whose id is `profile_id` wins, else
// the first (so "1g.10gb" over "1g.10gb+me"). With neither slices nor memory, only an id match.
int MatchMigProfile(const GpuModel& model, int gpu_instance_slices, int64_t memory_mib,
                    int profile_id);

// A profile name for a MIG device the catalog cannot name: "<slices>g.<GiB rounded>gb".
std::string FallbackMigProfileName(int gpu_instance_slices, int64_t memory_mib);

// What a critical XID event says about the GPU, after NVIDIA's XID catalogue: "unhealthy" when
// the GPU needs a reset or is lost (48 double-bit ECC, 62 micro-controller halt, 64 row remap or
// page retirement failure, 74 NVLink error, 79 fallen off the bus, 95 uncontained ECC, 119/120
// GSP errors, 140 unrecovered ECC); "suspect" when an application was lost or a reset is pending
// but the GPU still runs (63 row remap/page retirement recorded, 92 high single-bit ECC rate,
// 94 contained ECC); "" for XIDs that concern one application only (13, 31, 43, ...).
std::string XidHealth(unsigned long long xid);

}  // namespace carve

#endif  // CARVE_ADAPTERS_NVML_NVML_NAMES_H_
