// Reservations (kind: reservation, reservation_config.h): their starts and ends, and what each
// holds now. The scheduler's side (taints, tolerations, borrowers) is in reservations.h.
#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "runtime/control_plane.h"
#include "runtime/reservations.h"
#include "runtime/utilization.h"

namespace carve {

using json = nlohmann::json;
using Phase = ReservationConfig::Phase;

namespace {

std::string Utc(int64_t us) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMicros(us), absl::UTCTimeZone());
}

// "" is no reservation's name: its entry in the phases marks that a look was taken since start.
constexpr const char* kLooked = "";

// The entry that marks a reservation as enforced in this form: a change to its holder, nodes,
// window or borrowing while it is active is enforced again.
std::string Enforced(const ReservationConfig& r) {
  return absl::StrCat("\n", r.name, "\n", r.tenant, "|", r.queue, "|", absl::StrJoin(r.nodes, ","),
                      "|", r.pool, "|", r.GpusText(), "|", r.borrowable, "|", r.start_us, "|",
                      r.end_us);
}

// Moves the jobs that may not stay off the nodes (or, of a reservation of gpus, the devices) of
// `r`, now active: those of other tenants (or queues) unless `r` is borrowable and they are
// preemptible. A job already stopping, or whose replicas there are already being replaced, is
// left to finish that. Returns the ids.
// `displace(job, node, gpu)`: gpu -1 moves the job's replicas on the node, else those on that
// device (a reservation of gpus moves only what uses its devices).
std::set<int64_t> MoveOffReserved(
    const ReservationConfig& r, const ReservationView& view, JobTable& jobs,
    const std::function<bool(JobRecord&, const std::string&, int)>& displace) {
  std::set<int64_t> moved;
  // The held devices a replica uses (for a reservation of nodes: -1, the whole node).
  auto held_by = [&](const ReplicaRecord& rep) {
    std::set<int> gpus;
    for (const GrantRecord& g : rep.grants) {
      if (view.HoldsDevice(r, rep.node, g.device)) gpus.insert(r.gpus ? g.device : -1);
    }
    return gpus;
  };
  for (const std::string& node : view.NodesOf(r)) {
    for (JobRecord* placed : jobs.PlacedOn(node)) {
      JobRecord& job = *placed;
      if (IsFinal(job.state) || !job.Uses(node) || r.HeldBy(job.spec.tenant, job.spec.queue) ||
          !job.displaced.empty() || job.cancel_requested) {
        continue;
      }
      if (r.borrowable && job.spec.preemptible.value_or(true)) continue;  // a borrower
      std::set<int> gpus;  // where its replicas serve there
      for (const ReplicaRecord& rep : job.replicas) {
        if (rep.node != node || !rep.retire.empty() || rep.state == ReplicaState::kRetired) {
          continue;
        }
        if (!r.gpus) gpus.insert(-1);
        for (int g : held_by(rep)) gpus.insert(g);
      }
      for (int gpu : gpus) {
        if (displace(job, node, gpu)) moved.insert(job.id);
      }
    }
  }
  return moved;
}

}  // namespace

void ControlPlane::ReservationTimers(int64_t now, StoreBatch& batch) {
  const std::vector<ReservationConfig> all = config_.Reservations();
  if (all.empty()) return;
  // The first look after a start enforces each active reservation again (one that started while
  // no server ran); it moves nothing that was moved before.
  const bool first = reservation_phases_.count(kLooked) == 0;
  std::optional<ReservationView> view;
  std::map<std::string, Phase> next{{kLooked, Phase::kOver}};
  for (const ReservationConfig& r : all) {
    const Phase phase = r.PhaseAt(now);
    // An active reservation of gpus is enforced on the devices it holds: when they change (a
    // node joined or left, a mode changed), the new ones are enforced as at the start.
    if (phase == Phase::kActive && r.gpus && !view) {
      view.emplace(all, nodes_, config_.Pools(), now, *catalog_);
    }
    const std::string enforced = Enforced(r) + (phase == Phase::kActive && r.gpus
                                                    ? "|" + absl::StrJoin(view->DevicesOf(r), ",")
                                                    : std::string());
    next[r.name] = next[enforced] = phase;
    auto was = reservation_phases_.find(r.name);
    const bool changed = was == reservation_phases_.end() || was->second != phase;
    const bool edited = !first && !changed && !reservation_phases_.count(enforced);
    if (!changed && !edited && !(first && phase == Phase::kActive)) continue;
    const std::string subject = "reservation/" + r.name;
    json details = {{"tenant", r.tenant},
                    {"queue", r.queue},
                    {"start", Utc(r.start_us)},
                    {"end", Utc(r.end_us)},
                    {"borrowable", r.borrowable}};
    if (phase == Phase::kActive) {
      if (!view) view.emplace(all, nodes_, config_.Pools(), now, *catalog_);
      details["nodes"] = view->NodesOf(r);
      if (r.gpus) details["devices"] = view->DevicesOf(r);
      // A displaced job of another tenant is not told the reservation's name (its holder's).
      const std::string until = absl::StrCat(" holds this node until ", Utc(r.end_us));
      const std::string named = absl::StrCat("reservation ", r.name, until, " for its holder");
      const std::string unnamed = absl::StrCat("a reservation of another tenant", until);
      // Counted, not named: the moved jobs are other tenants' (each has its job.displaced).
      details["moved"] =
          MoveOffReserved(r, *view, jobs_, [&](JobRecord& job, const std::string& node, int gpu) {
            const std::string& cause = job.spec.tenant == r.tenant ? named : unnamed;
            return DisplaceOn(job, node, gpu, -1, cause, false, batch);
          }).size();
      if (changed || edited) {
        Event(batch, "scheduler", changed ? "reservation.started" : "reservation.changed", subject,
              absl::StrCat("reservation ", r.name, " of tenant ", r.tenant,
                           changed ? " starts on " : " now holds ",
                           r.gpus ? absl::StrCat(r.GpusText(), " on ") : "",
                           details["nodes"].size(), " node(s) until ", Utc(r.end_us)),
              details);
      }
    } else if (phase == Phase::kOver && changed && was != reservation_phases_.end()) {
      Event(batch, "scheduler", "reservation.ended", subject,
            absl::StrCat("reservation ", r.name, " of tenant ", r.tenant, " ended"), details);
    }
  }
  reservation_phases_ = std::move(next);
}

json ControlPlane::ListReservations(const Principal& who) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = now_();
  const std::vector<ReservationConfig> all = config_.Reservations();
  const ReservationView view(all, nodes_, config_.Pools(), now, *catalog_);
  const bool admin = who.role == Role::kAdmin;
  json out = json::array();
  for (const ReservationConfig& r : all) {
    if (!admin && r.tenant != who.tenant) continue;
    const Phase phase = r.PhaseAt(now);
    json item = {{"name", r.name},           {"tenant", r.tenant},
                 {"queue", r.queue},         {"pool", r.pool},
                 {"start", Utc(r.start_us)}, {"end", Utc(r.end_us)},
                 {"start_us", r.start_us},   {"end_us", r.end_us},
                 {"phase", Name(phase)},     {"borrowable", r.borrowable}};
    // What runs on its nodes now, in milli-GPUs (a MIG instance by its compute, a share by its
    // share): the holder's, borrowers' (active) or others' (ahead: ending before the start).
    int64_t gpus = 0, holder = 0, others = 0;
    json jobs = json::array();
    const std::vector<std::string> nodes = phase == Phase::kOver ? r.nodes : view.NodesOf(r);
    for (const std::string& node : nodes) {
      auto rec = nodes_.find(node);
      if (phase == Phase::kOver) {
        if (rec != nodes_.end()) gpus += 1000 * static_cast<int64_t>(rec->second.gpus.size());
        continue;
      }
      const size_t held_gpus = rec == nodes_.end() ? 0 : rec->second.gpus.size();
      for (size_t d = 0; d < held_gpus; ++d) {
        gpus += view.HoldsDevice(r, node, static_cast<int>(d)) ? 1000 : 0;
      }
      for (const JobRecord* job : jobs_.PlacedOn(node)) {
        if (IsFinal(job->state)) continue;
        int64_t milli = 0;
        bool on_held = false;
        std::string model;  // GrantGpus names it; unused here
        for (const ReplicaRecord& rep : job->replicas) {
          if (rep.node != node || rep.state == ReplicaState::kRetired) continue;
          for (const GrantRecord& g : rep.grants) {
            if (!view.HoldsDevice(r, node, g.device)) continue;
            on_held = true;
            // A MIG instance counts its share of the GPU's compute slices.
            milli += g.profile.empty()
                         ? g.compute_milli
                         : std::llround(1000 * GrantGpus(*catalog_, nodes_, node, g, &model));
          }
        }
        if (!on_held && r.gpus) continue;  // not on its devices
        const bool holds = r.HeldBy(job->spec.tenant, job->spec.queue);
        (holds ? holder : others) += milli;
        json entry = {{"node", node},
                      {"gpu_milli", milli},
                      {"role", holds                     ? "holder"
                               : phase == Phase::kActive ? "borrower"
                                                         : "ahead"}};
        if (admin || job->spec.tenant == who.tenant) entry["job"] = job->id;
        jobs.push_back(entry);
      }
    }
    item["nodes"] = nodes;
    item["gpu_milli"] = gpus;
    if (r.gpus) {  // what it asked for, and how much of it the devices it picked cover
      const ReservationView::Cover cover = view.CoverOf(r);
      item["gpus"] = {{"asked", r.GpusText()},
                      {"model", r.gpus->model},
                      {"unit", r.gpus->share_milli > 0 ? "milli-GPUs of shares"
                               : r.gpus->mig.empty()   ? "GPUs"
                                                       : r.gpus->mig + " instances"},
                      {"count", cover.asked},
                      {"covered", phase == Phase::kOver ? 0 : cover.covered},
                      {"devices", phase == Phase::kOver ? 0 : cover.devices}};
    }
    item["use"] = {{"holder_milli", holder},
                   {phase == Phase::kActive ? "borrowed_milli" : "others_milli", others},
                   {"idle_milli", std::max<int64_t>(0, gpus - holder - others)}};
    item["jobs"] = jobs;
    out.push_back(item);
  }
  return {{"reservations", out}, {"now_us", now}};
}

}  // namespace carve
