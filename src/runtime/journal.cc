#include "runtime/journal.h"

namespace carve {

Journal::Journal(Store* store) : store_(store), thread_([this] { Run(); }) {}

Journal::~Journal() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::future<absl::Status> Journal::Append(StoreBatch batch) {
  std::promise<absl::Status> promise;
  std::future<absl::Status> future = promise.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) {
      promise.set_value(failure_);
      return future;
    }
    queue_.emplace_back(std::move(batch), std::move(promise));
  }
  cv_.notify_one();
  return future;
}

absl::Status Journal::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void Journal::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    auto group = std::move(queue_);
    queue_.clear();
    if (!failure_.ok()) {  // batches queued while the failed commit was on its way
      for (auto& [batch, promise] : group) promise.set_value(failure_);
      continue;
    }
    lock.unlock();
    StoreBatch merged;
    for (auto& [batch, promise] : group) {
      for (auto& p : batch.puts) merged.puts.push_back(std::move(p));
      for (auto& d : batch.deletes) merged.deletes.push_back(std::move(d));
      for (auto& e : batch.events) merged.events.push_back(std::move(e));
    }
    // A group of empty batches is only a barrier: nothing to write, but it resolves after
    // every batch appended before it.
    absl::Status status =
        merged.empty() ? absl::OkStatus() : store_->Commit(std::move(merged)).status();
    lock.lock();
    if (!status.ok()) failure_ = status;
    for (auto& [batch, promise] : group) promise.set_value(status);
  }
}

}  // namespace carve
