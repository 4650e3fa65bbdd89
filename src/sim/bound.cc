#include "sim/bound.h"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/sched/placement/placer.h"
#include "sim/fill.h"
#include "sim/workload.h"

namespace carve::sim {
namespace {

// The arrivals up to `load_pct` percent of the cluster's GPUs asked.
std::vector<size_t> Prefix(const FillInput& in, const std::vector<size_t>& order, int load_pct) {
  const int64_t limit = in.total_gpus * 10 * load_pct;  // milli
  std::vector<size_t> prefix;
  int64_t asked = 0;
  for (size_t i : order) {
    if (asked + AskedMilli(in.pods[i]) > limit) break;
    asked += AskedMilli(in.pods[i]);
    prefix.push_back(i);
  }
  return prefix;
}

int64_t Asked(const FillInput& in, const std::vector<size_t>& pods) {
  int64_t milli = 0;
  for (size_t i : pods) milli += AskedMilli(in.pods[i]);
  return milli;
}

// The clairvoyant packer: the whole prefix, largest first, with one policy; GPU milli placed.
int64_t PackLargestFirst(const FillInput& in, std::vector<size_t> pods,
                         const PlacementPolicy& policy) {
  std::stable_sort(pods.begin(), pods.end(), [&](size_t a, size_t b) {
    const TracePod& x = in.pods[a];
    const TracePod& y = in.pods[b];
    return std::tuple(AskedMilli(x), x.num_gpu, x.cpu_milli, x.memory_mib) >
           std::tuple(AskedMilli(y), y.num_gpu, y.cpu_milli, y.memory_mib);
  });
  Cluster cluster(&in.catalog);
  for (const Node& n : in.nodes) cluster.AddNode(n);
  Placer placer(&cluster, &policy, 1);
  int64_t placed = 0;
  for (size_t i : pods) {
    if (placer.Place(in.requests[i]).placed) placed += AskedMilli(in.pods[i]);
  }
  return placed;
}

// Nodes of one type, and pods of one shape, as the relaxation sees them.
struct NodeType {
  int64_t count = 0, cpu = 0, memory = 0, gpus = 0;
  GpuModelId model;
};
struct PodShape {
  int64_t count = 0;
  const TracePod* pod = nullptr;
  const JobRequest* request = nullptr;
};

std::vector<NodeType> NodeTypes(const FillInput& in) {
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, NodeType> types;
  for (const Node& n : in.nodes) {
    if (n.devices.empty()) continue;  // no GPU pod runs there
    const int64_t gpus = static_cast<int64_t>(n.devices.size());
    NodeType& t = types[{n.capacity.cpu.units(), n.capacity.memory.units(), gpus,
                         n.devices[0].model.value()}];
    t = {t.count + 1, n.capacity.cpu.units(), n.capacity.memory.units(), gpus, n.devices[0].model};
  }
  std::vector<NodeType> out;
  for (const auto& [key, t] : types) out.push_back(t);
  return out;
}

std::vector<PodShape> PodShapes(const FillInput& in, const std::vector<size_t>& pods) {
  std::map<std::tuple<int64_t, int64_t, int, int64_t, std::string>, PodShape> shapes;
  for (size_t i : pods) {
    const TracePod& p = in.pods[i];
    if (p.num_gpu == 0) continue;  // takes no GPU: leaving it out only loosens the bound
    PodShape& s =
        shapes[{p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, absl::StrJoin(p.gpu_spec, "|")}];
    s = {s.count + 1, &p, &in.requests[i]};
  }
  std::vector<PodShape> out;
  for (const auto& [key, s] : shapes) out.push_back(s);
  return out;
}

bool FitsAlone(const PodShape& s, const NodeType& t) {
  const TracePod& p = *s.pod;
  return p.cpu_milli <= t.cpu && p.memory_mib <= t.memory && p.num_gpu <= t.gpus &&
         ModelAllowed(s.request->replica, t.model);
}

// One GLPK problem, freed on every path.
struct Lp {
  glp_prob* p = glp_create_prob();
  ~Lp() { glp_delete_prob(p); }
};

// A sparse matrix for glp_load_matrix (1-based; index 0 unused).
struct Matrix {
  std::vector<int> rows{0}, cols{0};
  std::vector<double> values{0};
  void Add(int row, int col, double value) {
    if (value == 0) return;
    rows.push_back(row);
    cols.push_back(col);
    values.push_back(value);
  }
};

// Rows of each node type: CPU, memory, GPU milli, GPUs of pods above half a GPU, and twice the
// GPUs against pods above a third (a whole-GPU pod counts two per GPU).
constexpr int kRowsPerType = 5;

absl::StatusOr<double> SolveRelaxation(const std::vector<NodeType>& types,
                                       const std::vector<PodShape>& shapes, BoundResult& stats) {
  Lp lp;
  glp_set_obj_dir(lp.p, GLP_MAX);
  const int shape_rows = static_cast<int>(shapes.size());
  glp_add_rows(lp.p, shape_rows + kRowsPerType * static_cast<int>(types.size()));
  for (int c = 0; c < shape_rows; ++c) {
    glp_set_row_bnds(lp.p, c + 1, GLP_UP, 0, static_cast<double>(shapes[c].count));
  }
  for (size_t t = 0; t < types.size(); ++t) {
    const NodeType& n = types[t];
    const double caps[kRowsPerType] = {
        static_cast<double>(n.count * n.cpu), static_cast<double>(n.count * n.memory),
        static_cast<double>(n.count * n.gpus * 1000), static_cast<double>(n.count * n.gpus),
        static_cast<double>(2 * n.count * n.gpus)};
    for (int k = 0; k < kRowsPerType; ++k) {
      glp_set_row_bnds(lp.p, shape_rows + kRowsPerType * static_cast<int>(t) + k + 1, GLP_UP, 0,
                       caps[k]);
    }
  }
  Matrix m;
  int col = 0;
  for (int c = 0; c < shape_rows; ++c) {
    const TracePod& p = *shapes[c].pod;
    const bool whole = p.gpu_milli == 1000;
    const double coefficients[kRowsPerType] = {
        static_cast<double>(p.cpu_milli), static_cast<double>(p.memory_mib),
        static_cast<double>(AskedMilli(p)),
        whole ? static_cast<double>(p.num_gpu) : (p.gpu_milli > 500 ? 1.0 : 0.0),
        whole ? 2.0 * p.num_gpu : (p.gpu_milli * 3 > 1000 ? 1.0 : 0.0)};
    for (size_t t = 0; t < types.size(); ++t) {
      if (!FitsAlone(shapes[c], types[t])) continue;
      col = glp_add_cols(lp.p, 1);
      glp_set_col_bnds(lp.p, col, GLP_LO, 0, 0);
      glp_set_obj_coef(lp.p, col, static_cast<double>(AskedMilli(p)));
      m.Add(c + 1, col, 1);
      for (int k = 0; k < kRowsPerType; ++k) {
        m.Add(shape_rows + kRowsPerType * static_cast<int>(t) + k + 1, col, coefficients[k]);
      }
    }
  }
  if (col == 0) return 0.0;  // no GPU pod fits any node
  glp_load_matrix(lp.p, static_cast<int>(m.values.size()) - 1, m.rows.data(), m.cols.data(),
                  m.values.data());
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  const auto t0 = std::chrono::steady_clock::now();
  const int error = glp_simplex(lp.p, &parm);
  stats.lp_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.lp_columns = std::max(stats.lp_columns, glp_get_num_cols(lp.p));
  stats.lp_rows = std::max(stats.lp_rows, glp_get_num_rows(lp.p));
  if (error != 0 || glp_get_status(lp.p) != GLP_OPT) {
    return absl::InternalError(absl::StrFormat(
        "GLPK's simplex found no optimum (error %d, status %d)", error, glp_get_status(lp.p)));
  }
  return glp_get_obj_val(lp.p);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double Pct(double milli, int64_t gpus) {
  return std::round(10000.0 * milli / (static_cast<double>(gpus) * 1000.0)) / 100.0;
}

}  // namespace

absl::StatusOr<BoundResult> RunBound(const BoundOptions& options) {
  if (options.seeds < 1) return absl::InvalidArgumentError("--seeds must be at least 1");
  if (options.loads.empty()) return absl::InvalidArgumentError("--loads: at least one load");
  for (int load : options.loads) {
    if (load < 1 || load > 1000) {
      return absl::InvalidArgumentError(absl::StrCat("--loads: ", load, " is not 1 to 1000"));
    }
  }
  FillInput in;
  if (absl::Status s = LoadFillInput(options.nodes_path, options.pods_path, in); !s.ok()) return s;
  auto observed = ObservedWorkload(in.pods, in.catalog);
  if (!observed.ok()) return observed.status();
  auto best_fit = MakePolicy("best-fit", {});
  auto carve = MakePolicy("carve", PolicyOptions{*observed});
  if (!best_fit.ok() || !carve.ok()) return absl::InternalError("no best-fit or carve policy");
  glp_term_out(GLP_OFF);
  const std::vector<NodeType> types = NodeTypes(in);
  const int top = *std::max_element(options.loads.begin(), options.loads.end());
  BoundResult result;
  result.gpus_total = in.total_gpus;
  std::vector<std::vector<double>> asked(options.loads.size()), achievable(options.loads.size()),
      upper(options.loads.size());
  for (int s = 0; s < options.seeds; ++s) {
    const int seed = options.first_seed + s;
    result.seeds.push_back(seed);
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const std::vector<size_t> order = ArrivalOrder(in, top / 100.0, rng);
    for (size_t l = 0; l < options.loads.size(); ++l) {
      const std::vector<size_t> prefix = Prefix(in, order, options.loads[l]);
      const int64_t packed =
          std::max(PackLargestFirst(in, prefix, **best_fit), PackLargestFirst(in, prefix, **carve));
      auto bound = SolveRelaxation(types, PodShapes(in, prefix), result);
      if (!bound.ok()) return bound.status();
      asked[l].push_back(Pct(static_cast<double>(Asked(in, prefix)), in.total_gpus));
      achievable[l].push_back(Pct(static_cast<double>(packed), in.total_gpus));
      upper[l].push_back(Pct(*bound, in.total_gpus));
    }
  }
  for (size_t l = 0; l < options.loads.size(); ++l) {
    result.points.push_back(
        {options.loads[l], Median(asked[l]), Median(achievable[l]), Median(upper[l])});
  }
  return result;
}

nlohmann::json BoundResult::ToJson() const {
  nlohmann::json points_json = nlohmann::json::array();
  for (const BoundPoint& p : points) {
    points_json.push_back({{"load", p.load_pct / 100.0},
                           {"asked_pct", p.asked_pct},
                           {"achievable_pct", p.achievable_pct},
                           {"upper_pct", p.upper_pct}});
  }
  return {{"gpus_total", gpus_total},
          {"seeds", seeds},
          {"points", points_json},
          {"lp", {{"seconds", lp_seconds}, {"columns", lp_columns}, {"rows", lp_rows}}}};
}

void BoundResult::PrintTable(std::ostream& out) const {
  out << absl::StrFormat(
      "%d GPUs, %d seeds (median); relaxation up to %d columns x %d rows, %.1f s in GLPK\n",
      gpus_total, seeds.size(), lp_columns, lp_rows, lp_seconds);
  out << absl::StrFormat("%6s %9s %13s %9s\n", "load", "asked %", "achievable %", "upper %");
  for (const BoundPoint& p : points) {
    out << absl::StrFormat("%5d%% %9.2f %13.2f %9.2f\n", p.load_pct, p.asked_pct, p.achievable_pct,
                           p.upper_pct);
  }
}

}  // namespace carve::sim
