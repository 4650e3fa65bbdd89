#include "runtime/store_migrate.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "adapters/store/event_hash.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Prefixed(const absl::Status& s, const std::string& what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

absl::StatusOr<int64_t> CopyKind(Store& from, Store& to, const std::string& kind, int64_t batch) {
  int64_t count = 0;
  for (std::string after;;) {
    auto page = from.List(kind, after, batch);
    if (!page.ok()) return page.status();
    if (page->empty()) return count;
    after = page->back().id;
    count += static_cast<int64_t>(page->size());
    StoreBatch b;
    b.puts = *std::move(page);
    if (auto done = to.Commit(std::move(b)); !done.ok()) return done.status();
  }
}

// Appends `from`'s events to `to` in pages; returns the head hash both must have.
absl::StatusOr<std::string> CopyEvents(Store& from, Store& to, int64_t batch, int64_t& seq) {
  std::string head = GenesisHash();
  for (;;) {
    auto page = from.Events(seq, batch);
    if (!page.ok()) return page.status();
    if (page->empty()) return head;
    StoreBatch b;
    for (const StoredEvent& e : *page) {
      StoredEvent copy = e;
      copy.seq = 0;  // the destination numbers and hashes it
      copy.prev_hash.clear();
      copy.hash.clear();
      b.events.push_back(std::move(copy));
    }
    seq = page->back().seq;
    head = page->back().hash;
    auto last = to.Commit(std::move(b));
    if (!last.ok()) return last.status();
    if (*last != seq) {
      return absl::DataLossError(absl::StrCat("the destination numbered event ", seq, " as ", *last,
                                              ": it was written to meanwhile"));
    }
  }
}

}  // namespace

absl::Status CheckStoreEmpty(Store& store) {
  auto events = store.Events(0, 1);
  if (!events.ok()) return events.status();
  auto kinds = store.Kinds();
  if (!kinds.ok()) return kinds.status();
  if (events->empty() && kinds->empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the store holds ", kinds->empty() ? "" : "records",
                   !kinds->empty() && !events->empty() ? " and " : "",
                   events->empty() ? "" : "events", " already"));
}

absl::StatusOr<json> MigrateStore(Store& from, Store& to, int64_t batch) {
  if (absl::Status s = from.VerifyEventChain(); !s.ok()) {
    return Prefixed(s, "the source's event chain does not verify; nothing was copied");
  }
  if (absl::Status s = CheckStoreEmpty(to); !s.ok()) {
    return Prefixed(s, "the destination is not empty; migrate into a new database");
  }
  auto kinds = from.Kinds();
  if (!kinds.ok()) return kinds.status();
  json records = json::object();
  for (const std::string& kind : *kinds) {
    auto count = CopyKind(from, to, kind, batch);
    if (!count.ok()) return Prefixed(count.status(), "copying the " + kind + " records");
    records[kind] = *count;
  }
  int64_t seq = 0;
  auto head = CopyEvents(from, to, batch, seq);
  if (!head.ok()) return Prefixed(head.status(), "copying the event log");
  auto tail = to.Events(seq - 1, 1);
  if (!tail.ok()) return tail.status();
  const std::string copied = tail->empty() ? GenesisHash() : tail->back().hash;
  if (seq > 0 && copied != *head) {
    return absl::DataLossError(
        absl::StrCat("the destination's head hash ", copied, " differs from the source's ", *head));
  }
  if (absl::Status s = to.VerifyEventChain(); !s.ok()) {
    return Prefixed(s, "the destination's event chain does not verify");
  }
  return json{{"records", records}, {"events", seq}, {"head_hash", *head}};
}

}  // namespace carve
