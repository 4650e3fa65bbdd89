#include "adapters/nvml/nvml_gpm.h"

#include <algorithm>
#include <memory>
#include <set>

namespace carve {

NvmlGpm::~NvmlGpm() {
  if (lib_->fn().gpm_free == nullptr) return;
  for (const auto& [key, sample] : last_) lib_->fn().gpm_free(sample);
}

std::optional<double> NvmlGpm::MigBusy(nvml::Device device, unsigned int index, int total_slices,
                                       const std::vector<Instance>& instances) {
  const NvmlLibrary::Functions& f = lib_->fn();
  if (f.gpm_support == nullptr || f.gpm_alloc == nullptr || f.gpm_free == nullptr ||
      f.gpm_mig_sample == nullptr || f.gpm_metrics == nullptr || total_slices <= 0 ||
      instances.empty()) {
    return std::nullopt;
  }
  nvml::GpmSupport support{nvml::kGpmSupportVersion, 0};
  if (f.gpm_support(device, &support) != nvml::kSuccess || support.isSupportedDevice == 0) {
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mu_);
  // An instance deleted since (a re-layout) leaves its sample behind: freed here.
  std::set<unsigned int> present;
  for (const Instance& i : instances) present.insert(i.id);
  for (auto it = last_.begin(); it != last_.end();) {
    if (it->first.first == index && !present.count(it->first.second)) {
      f.gpm_free(it->second);
      it = last_.erase(it);
    } else {
      ++it;
    }
  }
  double busy = 0;
  bool known = true;
  // The metrics call's buffer is ~13 KiB: on the heap, not the agent thread's stack.
  auto get = std::make_unique<nvml::GpmMetricsGet>();
  for (const Instance& i : instances) {
    nvml::GpmSample now = nullptr;
    if (i.slices <= 0 || f.gpm_alloc(&now) != nvml::kSuccess) {
      known = false;
      continue;
    }
    if (f.gpm_mig_sample(device, i.id, now) != nvml::kSuccess) {
      f.gpm_free(now);
      known = false;
      continue;
    }
    nvml::GpmSample& last = last_[{index, i.id}];
    if (last == nullptr) {
      known = false;  // the first sample: nothing to measure against yet
    } else {
      *get = nvml::GpmMetricsGet{};
      get->version = nvml::kGpmMetricsGetVersion;
      get->numMetrics = 1;
      get->sample1 = last;
      get->sample2 = now;
      get->metrics[0].metricId = nvml::kGpmMetricSmUtil;
      if (f.gpm_metrics(get.get()) == nvml::kSuccess &&
          get->metrics[0].nvmlReturn == nvml::kSuccess) {
        busy += std::clamp(get->metrics[0].value, 0.0, 100.0) * i.slices / total_slices;
      } else {
        known = false;
      }
      f.gpm_free(last);
    }
    last = now;
  }
  if (!known) return std::nullopt;
  return std::min(busy, 100.0);
}

}  // namespace carve
