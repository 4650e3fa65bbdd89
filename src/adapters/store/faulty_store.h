#ifndef CARVE_ADAPTERS_STORE_FAULTY_STORE_H_
#define CARVE_ADAPTERS_STORE_FAULTY_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "ports/store.h"

namespace carve {

// A Store that passes every call to another one and injects faults into commits on request: a
// commit that fails (nothing written), a commit that is written but reports a failure (fsync
// failed after the write: the caller cannot know the outcome), and slow commits. For tests of
// what the controller does when its store fails (tests/runtime/store_failure_test.cc).
// Thread-safe. Reads are faulted only by FailReads (gets, lists, events and the chain's check;
// loads never).
class FaultyStore final : public Store {
 public:
  explicit FaultyStore(Store* inner) : inner_(inner) {}

  // The `n`th commit from now (1: the next one) fails and writes nothing.
  void FailNthCommit(int64_t n);
  // The `n`th commit from now is written, then reports a failure (as a failed fsync would).
  void FailNthCommitAfterWrite(int64_t n);
  // Every commit from now on fails and writes nothing, until Heal().
  void FailAllCommits();
  // Every read but Load fails (Unavailable) until Heal(), as a disk that stopped answering.
  void FailReads();
  // Every commit waits `delay` before it reaches the inner store.
  void SlowCommits(absl::Duration delay);
  // The next Get of a `kind` record calls `hook` once the inner store has answered, before the
  // answer is returned, without the store's lock (tests: change the caller's state while its
  // read's answer goes stale). Gets of each kind are counted.
  void AfterNextGet(const std::string& kind, std::function<void()> hook);
  int64_t gets(const std::string& kind) const;
  // No more faults or delays.
  void Heal();
  // Commits attempted, and those that reported a failure.
  int64_t commits() const;
  int64_t failures() const;

  absl::StatusOr<int64_t> Commit(StoreBatch batch) override;
  absl::StatusOr<std::vector<StoredRecord>> Load(const std::string& kind) override {
    return inner_->Load(kind);
  }
  absl::StatusOr<std::optional<StoredRecord>> Get(const std::string& kind,
                                                  const std::string& id) override;
  absl::StatusOr<std::vector<StoredRecord>> List(const std::string& kind,
                                                 const std::string& after_id,
                                                 int64_t limit) override;
  absl::StatusOr<std::optional<std::string>> LastId(const std::string& kind) override {
    return inner_->LastId(kind);
  }
  absl::StatusOr<std::vector<std::string>> Kinds() override { return inner_->Kinds(); }
  absl::StatusOr<std::vector<StoredEvent>> Events(int64_t after_seq, int64_t limit) override;
  absl::Status VerifyEventChain() override;

 private:
  enum class Fault { kNone, kFail, kFailAfterWrite };
  // Which fault the commit numbered `n` gets; the caller holds mu_.
  Fault FaultFor(int64_t n) const;
  // Unavailable naming `what` while FailReads holds.
  absl::Status ReadFault(const std::string& what) const;

  Store* inner_;
  mutable std::mutex mu_;
  int64_t commits_ = 0;
  int64_t failures_ = 0;
  int64_t fail_at_ = 0;              // commit number that fails; 0: none
  int64_t fail_after_write_at_ = 0;  // commit number written, then failed; 0: none
  bool fail_all_ = false;
  bool fail_reads_ = false;
  absl::Duration delay_ = absl::ZeroDuration();
  std::string hook_kind_;
  std::function<void()> hook_;
  std::map<std::string, int64_t> gets_;
};

}  // namespace carve

#endif  // CARVE_ADAPTERS_STORE_FAULTY_STORE_H_
