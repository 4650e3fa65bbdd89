#include "runtime/job_table.h"

#include <algorithm>
#include <utility>

#include "runtime/job_spec.h"

namespace carve {

JobRecord* JobTable::Find(int64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobRecord* JobTable::Find(int64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

JobRecord& JobTable::At(int64_t id) { return jobs_.at(id); }

JobRecord& JobTable::Add(JobRecord job) {
  const int64_t id = job.id;
  JobRecord& stored = jobs_.insert_or_assign(id, std::move(job)).first->second;
  Index(stored);
  return stored;
}

void JobTable::Index(const JobRecord& job) {
  auto prior = active_.find(job.id);
  const bool was_queued = prior != active_.end() && prior->second.queued;
  auto stored = jobs_.find(job.id);
  const bool in_memory = stored != jobs_.end();
  const bool queued = job.state == JobState::kQueued && in_memory;
  if (was_queued != queued) CountQueued(job, queued ? 1 : -1);
  IndexNodes(job, !queued && !IsFinal(job.state) && in_memory);
  if (IsFinal(job.state)) {
    active_.erase(job.id);
    placed_.erase(job.id);
    requests_.erase(job.id);
    return;
  }
  if (!in_memory) return;
  Live live{&stored->second, ++next_revision_, queued};
  active_[job.id] = live;
  if (job.state == JobState::kQueued) {  // a queued job holds no replica (Recover clears them)
    placed_.erase(job.id);
  } else {
    placed_[job.id] = live;
  }
}

bool JobTable::Erase(int64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !IsFinal(it->second.state)) return false;
  active_.erase(id);  // Index took it out when it ended; the indexes point into jobs_
  placed_.erase(id);
  jobs_.erase(it);
  return true;
}

void JobTable::CountQueued(const JobRecord& job, int sign) {
  QueuedTotal& total = queued_[job.spec.queue];
  total.jobs += sign;
  // A queued job's spec does not change, so the charge taken off is the one added.
  if (const JobRequest* request = RequestOf(job); request != nullptr) {
    AddResources(total.demand, RequestCharge(*request, *catalog_), sign);
    std::erase_if(total.demand, [](const auto& entry) { return entry.second == 0; });
  }
  if (total.jobs == 0) queued_.erase(job.spec.queue);
}

uint64_t JobTable::Revision(int64_t id) const {
  auto it = active_.find(id);
  return it == active_.end() ? 0 : it->second.revision;
}

const JobRequest* JobTable::RequestOf(const JobRecord& job) const {
  auto it = requests_.find(job.id);
  if (it == requests_.end() || it->second.replicas != job.spec.replicas) {
    auto request = ToJobRequest(job.spec, *catalog_, job.id);
    if (!request.ok()) return nullptr;
    it = requests_.insert_or_assign(job.id, *std::move(request)).first;
  }
  return &it->second;
}

std::vector<int64_t> JobTable::ActiveIds() const {
  std::vector<int64_t> ids;
  ids.reserve(active_.size());
  for (const auto& entry : active_) ids.push_back(entry.first);
  return ids;
}

void JobTable::IndexNodes(const JobRecord& job, bool placed) {
  std::vector<std::string> nodes;
  if (placed) {
    for (const ReplicaRecord& r : job.replicas) {
      if (!r.node.empty()) nodes.push_back(r.node);
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  }
  auto old = nodes_of_.find(job.id);
  if (old != nodes_of_.end() && old->second == nodes) return;
  if (old != nodes_of_.end()) {
    for (const std::string& node : old->second) {
      auto on = placed_on_.find(node);
      on->second.erase(job.id);
      if (on->second.empty()) placed_on_.erase(on);
    }
  }
  for (const std::string& node : nodes) placed_on_[node].insert(job.id);
  if (nodes.empty()) {
    nodes_of_.erase(job.id);
  } else {
    nodes_of_[job.id] = std::move(nodes);
  }
}

std::vector<JobRecord*> JobTable::PlacedOn(const std::string& node) const {
  std::vector<JobRecord*> jobs;
  auto on = placed_on_.find(node);
  if (on == placed_on_.end()) return jobs;
  jobs.reserve(on->second.size());
  for (int64_t id : on->second) {
    if (auto it = placed_.find(id); it != placed_.end()) jobs.push_back(it->second.job);
  }
  return jobs;
}

bool JobTable::IndexedOn(int64_t id, const std::string& node) const {
  auto on = placed_on_.find(node);
  return on != placed_on_.end() && on->second.count(id) > 0;
}

std::vector<JobRecord*> JobTable::Placed() const {
  std::vector<JobRecord*> jobs;
  jobs.reserve(placed_.size());
  for (const auto& entry : placed_) jobs.push_back(entry.second.job);
  return jobs;
}

}  // namespace carve
