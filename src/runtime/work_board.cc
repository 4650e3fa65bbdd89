#include "runtime/work_board.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace carve {

int WorkBoard::Post(Work work) {
  std::lock_guard<std::mutex> lock(mu_);
  int raised = 0;
  for (auto& [node, slot] : slots_) {
    if (!work.count(node)) slot.told.clear();
  }
  for (auto& [node, items] : work) {
    Slot& slot = slots_[node];
    bool fresh = std::any_of(items.begin(), items.end(),
                             [&](const Item& item) { return !slot.told.count(item); });
    slot.told = std::move(items);
    if (!fresh) continue;
    ++slot.version;
    ++raised;
    slot.cv.notify_all();
  }
  return raised;
}

absl::StatusOr<int64_t> WorkBoard::Wait(const std::string& node, int64_t after, int64_t timeout_ms,
                                        int max_waiters) {
  std::unique_lock<std::mutex> lock(mu_);
  if (waiters_ >= max_waiters) {
    return absl::ResourceExhaustedError(
        absl::StrCat(max_waiters, " agents already wait for work; poll at the heartbeat period"));
  }
  Slot& slot = slots_[node];
  ++waiters_;
  slot.cv.wait_for(lock, std::chrono::milliseconds(std::clamp<int64_t>(timeout_ms, 0, 60000)),
                   [&] { return ended_ || slot.version > after; });
  --waiters_;
  return slot.version;
}

void WorkBoard::End() {
  std::lock_guard<std::mutex> lock(mu_);
  ended_ = true;
  for (auto& [node, slot] : slots_) slot.cv.notify_all();
}

int64_t WorkBoard::version(const std::string& node) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(node);
  return it == slots_.end() ? 0 : it->second.version;
}

}  // namespace carve
