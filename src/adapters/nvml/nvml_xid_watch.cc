#include "adapters/nvml/nvml_xid_watch.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/nvml/nvml_names.h"

namespace carve {
namespace {

// More events than one poll handles; the rest wait for the next poll.
constexpr int kMaxEventsPerPoll = 256;

// Keeps the worse health; reasons accumulate, each once.
void Add(NvmlXidWatch::Mark& mark, const std::string& health, const std::string& reason) {
  if (mark.health != "unhealthy") mark.health = health;
  if (absl::StrContains(absl::StrCat("; ", mark.reason, "; "), absl::StrCat("; ", reason, "; "))) {
    return;
  }
  mark.reason = mark.reason.empty() ? reason : absl::StrCat(mark.reason, "; ", reason);
}

}  // namespace

NvmlXidWatch::NvmlXidWatch(const NvmlLibrary& lib, const std::vector<nvml::Device>& devices)
    : lib_(lib), devices_(devices) {
  const NvmlLibrary::Functions& f = lib.fn();
  auto all = [&](const std::string& why) {
    for (size_t i = 0; i < devices_.size(); ++i) not_watched_[static_cast<int>(i)] = why;
  };
  if (f.event_set_create == nullptr || f.register_events == nullptr ||
      f.event_set_wait == nullptr || f.event_set_free == nullptr) {
    all("this NVML has no event functions (nvmlEventSetWait_v2 needs R450 or later)");
    return;
  }
  if (nvml::Return r = f.event_set_create(&set_); r != nvml::kSuccess) {
    set_ = nullptr;
    all(absl::StrCat("nvmlEventSetCreate: ", lib.Error(r)));
    return;
  }
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i] == nullptr) {
      not_watched_[static_cast<int>(i)] = "no device handle";
      continue;
    }
    nvml::Return r = f.register_events(devices_[i], nvml::kEventTypeXidCriticalError, set_);
    if (r != nvml::kSuccess) {
      not_watched_[static_cast<int>(i)] = absl::StrCat("nvmlDeviceRegisterEvents: ", lib.Error(r));
    }
  }
}

NvmlXidWatch::~NvmlXidWatch() {
  if (set_ != nullptr) lib_.fn().event_set_free(set_);
}

NvmlXidWatch::Marks NvmlXidWatch::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  if (set_ == nullptr) return marks_;
  for (int n = 0; n < kMaxEventsPerPoll; ++n) {
    nvml::EventData data{};
    nvml::Return r = lib_.fn().event_set_wait(set_, &data, 0);
    // TIMEOUT: nothing pending. Any other failure (a lost GPU) shows in discovery itself.
    if (r != nvml::kSuccess) break;
    if ((data.eventType & nvml::kEventTypeXidCriticalError) == 0) continue;
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == data.device) {
        Record(static_cast<int>(i), data.eventData, data.gpuInstanceId);
      }
    }
  }
  return marks_;
}

void NvmlXidWatch::ForgetInstance(int index, int start) {
  std::lock_guard<std::mutex> lock(mu_);
  marks_.instances.erase({index, start});
}

int NvmlXidWatch::StartOf(int index, unsigned int id) const {
  const NvmlLibrary::Functions& f = lib_.fn();
  if (f.get_gi_by_id == nullptr || f.get_gi_info == nullptr) return -1;
  nvml::GpuInstance instance = nullptr;
  nvml::GpuInstanceInfo info{};
  if (f.get_gi_by_id(devices_[static_cast<size_t>(index)], id, &instance) != nvml::kSuccess ||
      f.get_gi_info(instance, &info) != nvml::kSuccess) {
    return -1;
  }
  return static_cast<int>(info.placement.start);
}

void NvmlXidWatch::Record(int index, unsigned long long xid, unsigned int gpu_instance) {
  std::string health = XidHealth(xid);
  if (health.empty()) return;  // about one application only
  std::string reason = absl::StrCat("XID ", xid);
  if (gpu_instance == nvml::kNoInstance) {
    Add(marks_.gpus[index], health, reason);
    return;
  }
  if (int start = StartOf(index, gpu_instance); start >= 0) {
    Add(marks_.instances[{index, start}], health, reason);
    return;
  }
  Add(marks_.gpus[index], health, absl::StrCat(reason, " (GPU instance ", gpu_instance, ")"));
}

}  // namespace carve
