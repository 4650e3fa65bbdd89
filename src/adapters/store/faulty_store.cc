#include "adapters/store/faulty_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace carve {

void FaultyStore::FailNthCommit(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_at_ = commits_ + n;
}

void FaultyStore::FailNthCommitAfterWrite(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_after_write_at_ = commits_ + n;
}

void FaultyStore::FailAllCommits() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_all_ = true;
}

void FaultyStore::FailReads() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_reads_ = true;
}

absl::StatusOr<std::optional<StoredRecord>> FaultyStore::Get(const std::string& kind,
                                                             const std::string& id) {
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++gets_[kind];
    if (hook_ && kind == hook_kind_) hook = std::exchange(hook_, nullptr);
  }
  if (absl::Status s = ReadFault(absl::StrCat(kind, "/", id)); !s.ok()) return s;
  auto answer = inner_->Get(kind, id);
  if (hook) hook();
  return answer;
}

absl::Status FaultyStore::ReadFault(const std::string& what) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!fail_reads_) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("injected read failure (", what, ")"));
}

absl::StatusOr<std::vector<StoredRecord>> FaultyStore::List(const std::string& kind,
                                                            const std::string& after_id,
                                                            int64_t limit) {
  if (absl::Status s = ReadFault(absl::StrCat("list of ", kind)); !s.ok()) return s;
  return inner_->List(kind, after_id, limit);
}

absl::StatusOr<std::vector<StoredEvent>> FaultyStore::Events(int64_t after_seq, int64_t limit) {
  if (absl::Status s = ReadFault("events"); !s.ok()) return s;
  return inner_->Events(after_seq, limit);
}

absl::Status FaultyStore::VerifyEventChain() {
  if (absl::Status s = ReadFault("the event chain"); !s.ok()) return s;
  return inner_->VerifyEventChain();
}

void FaultyStore::AfterNextGet(const std::string& kind, std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hook_kind_ = kind;
  hook_ = std::move(hook);
}

int64_t FaultyStore::gets(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = gets_.find(kind);
  return it == gets_.end() ? 0 : it->second;
}

void FaultyStore::SlowCommits(absl::Duration delay) {
  std::lock_guard<std::mutex> lock(mu_);
  delay_ = delay;
}

void FaultyStore::Heal() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_at_ = fail_after_write_at_ = 0;
  fail_all_ = false;
  fail_reads_ = false;
  delay_ = absl::ZeroDuration();
}

int64_t FaultyStore::commits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commits_;
}

int64_t FaultyStore::failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_;
}

FaultyStore::Fault FaultyStore::FaultFor(int64_t n) const {
  if (fail_all_ || n == fail_at_) return Fault::kFail;
  if (n == fail_after_write_at_) return Fault::kFailAfterWrite;
  return Fault::kNone;
}

absl::StatusOr<int64_t> FaultyStore::Commit(StoreBatch batch) {
  int64_t n;
  Fault fault;
  absl::Duration delay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = ++commits_;
    fault = FaultFor(n);
    delay = delay_;
    if (fault != Fault::kNone) ++failures_;
  }
  absl::SleepFor(delay);
  if (fault == Fault::kFail) {
    return absl::InternalError(
        absl::StrCat("injected fault: commit ", n, " failed (disk I/O error), nothing written"));
  }
  absl::StatusOr<int64_t> seq = inner_->Commit(std::move(batch));
  if (fault == Fault::kFailAfterWrite && seq.ok()) {
    return absl::InternalError(
        absl::StrCat("injected fault: commit ", n, " written, then fsync failed"));
  }
  return seq;
}

}  // namespace carve
