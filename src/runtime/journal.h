#ifndef CARVE_RUNTIME_JOURNAL_H_
#define CARVE_RUNTIME_JOURNAL_H_

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "ports/store.h"

namespace carve {

// Orders state changes onto the store and commits them in groups. Append() is called while the
// caller still holds its state lock, so batches reach the store in the order the state changed;
// the caller then waits on the future outside the lock. All batches queued while one commit is
// on disk go into the next commit together (group commit).
//
// A failed commit poisons the journal: every batch after it (queued or appended later) fails with
// the same error and never reaches the store, because each was made on top of state the store
// lost. Only a restart, which reloads the store, clears it.
class Journal {
 public:
  explicit Journal(Store* store);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // The future resolves once `batch` and every batch appended before it are committed. An
  // empty batch writes nothing and is a barrier: a reader that must not hand out state before
  // it is durable (an assignment whose bind is still committing) waits on one. Once a commit
  // has failed every later future carries that failure.
  std::future<absl::Status> Append(StoreBatch batch);
  // OK, or the error of the commit that failed.
  absl::Status failure() const;

 private:
  void Run();

  Store* store_;
  mutable std::mutex mu_;
  absl::Status failure_;
  std::condition_variable cv_;
  std::deque<std::pair<StoreBatch, std::promise<absl::Status>>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_JOURNAL_H_
