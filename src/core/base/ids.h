#ifndef CARVE_CORE_BASE_IDS_H_
#define CARVE_CORE_BASE_IDS_H_

#include <compare>
#include <cstdint>
#include <functional>

namespace carve {

// A typed integer id: an Id<NodeTag> cannot be passed where an Id<JobTag> is expected.
// Ids are dense indexes into their owner's table; the owner keeps the human-readable names.
template <typename Tag>
class Id {
 public:
  constexpr Id() = default;
  constexpr explicit Id(int64_t value) : value_(value) {}

  constexpr int64_t value() const { return value_; }
  constexpr bool valid() const { return value_ >= 0; }

  friend constexpr auto operator<=>(Id, Id) = default;

  template <typename H>
  friend H AbslHashValue(H h, Id id) {
    return H::combine(std::move(h), id.value_);
  }

 private:
  int64_t value_ = -1;
};

struct NodeTag {};
struct JobTag {};
struct GpuModelTag {};

using NodeId = Id<NodeTag>;
using JobId = Id<JobTag>;
using GpuModelId = Id<GpuModelTag>;

}  // namespace carve

template <typename Tag>
struct std::hash<carve::Id<Tag>> {
  size_t operator()(carve::Id<Tag> id) const { return std::hash<int64_t>()(id.value()); }
};

#endif  // CARVE_CORE_BASE_IDS_H_
