#include "adapters/store/event_hash.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace carve {

absl::StatusOr<std::string> EventHash(const StoredEvent& event, const std::string& prev_hash) {
  const std::string preimage =
      absl::StrCat(prev_hash, "\n", event.seq, "\n", event.time_us, "\n", event.actor, "\n",
                   event.type, "\n", event.subject, "\n", event.reason, "\n", event.details_json);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(preimage.data(), preimage.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("openssl: SHA-256 of an event failed");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), static_cast<size_t>(length)));
}

std::string GenesisHash() { return std::string(64, '0'); }

absl::Status CheckChainLink(const StoredEvent& event, int64_t expected_seq,
                            const std::string& prev_hash, const std::string& store) {
  const auto broken = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("event chain of ", store, " broken at seq ", event.seq, ": ", why));
  };
  if (event.seq != expected_seq) return broken(absl::StrCat("expected seq ", expected_seq));
  if (event.prev_hash != prev_hash) {
    return broken(event.seq == 1 ? "prev_hash of the first event is not the genesis hash"
                                 : "prev_hash does not match the previous event's hash");
  }
  absl::StatusOr<std::string> computed = EventHash(event, prev_hash);
  if (!computed.ok()) return computed.status();
  if (*computed != event.hash) {
    return broken(
        absl::StrCat("stored hash ", event.hash, " does not match the fields (", *computed, ")"));
  }
  return absl::OkStatus();
}

}  // namespace carve
