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
    queue_.emplace_back(std::move(batch), std::move(promise));
  }
  cv_.notify_one();
  return future;
}

void Journal::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    auto group = std::move(queue_);
    queue_.clear();
    lock.unlock();
    StoreBatch merged;
    for (auto& [batch, promise] : group) {
      for (auto& p : batch.puts) merged.puts.push_back(std::move(p));
      for (auto& d : batch.deletes) merged.deletes.push_back(std::move(d));
      for (auto& e : batch.events) merged.events.push_back(std::move(e));
    }
    // A group of empty batches is only a barrier: nothing to write, but it resolves after
    // every batch appended before it. After a failed commit, memory is ahead of the store:
    // nothing appended later is confirmed.
    absl::Status status = failed_;
    if (status.ok() && !merged.empty()) status = store_->Commit(std::move(merged)).status();
    if (!status.ok()) failed_ = status;
    for (auto& [batch, promise] : group) promise.set_value(status);
    lock.lock();
  }
}

}  // namespace carve
