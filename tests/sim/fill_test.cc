#include "sim/fill.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "sim/trace.h"

namespace carve::sim {
namespace {

using ::testing::HasSubstr;

const std::string kTrace = CARVE_TRACE_DIR;

FillOptions Options(const std::string& policy, int seeds) {
  FillOptions o;
  o.nodes_path = kTrace + "/openb_node_list_gpu_node.csv";
  o.pods_path = kTrace + "/openb_pod_list_default.csv";
  o.policy = policy;
  o.seeds = seeds;
  return o;
}

// The FGD paper's Figure (GPU allocation %, median of seeds 42..51, openb_pod_list_default).
struct PaperFigure {
  const char* policy;
  double at_100;
  double at_130;
};

class PaperReproductionTest : public ::testing::TestWithParam<PaperFigure> {};

TEST_P(PaperReproductionTest, WithinHalfAPoint) {
  const PaperFigure& f = GetParam();
  auto r = RunFill(Options(f.policy, 10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpus_total, 6212);
  EXPECT_NEAR(r->alloc_pct_at_100, f.at_100, 0.5) << f.policy;
  EXPECT_NEAR(r->alloc_pct_at_130, f.at_130, 0.5) << f.policy;
}

INSTANTIATE_TEST_SUITE_P(
    Paper, PaperReproductionTest,
    ::testing::Values(PaperFigure{"random", 86.25, 87.38}, PaperFigure{"dot-product", 90.56, 90.80},
                      PaperFigure{"clustering", 91.58, 91.79}, PaperFigure{"packing", 91.81, 92.06},
                      PaperFigure{"best-fit", 92.91, 93.11}, PaperFigure{"fgd", 95.23, 95.40}),
    [](const auto& info) {
      std::string name = info.param.policy;
      for (char& c : name) c = c == '-' ? '_' : c;
      return name;
    });

TEST(FillTest, CarveLeavesFewerGpusUnallocatedThanFgd) {
  for (const char* pods : {"openb_pod_list_default.csv", "openb_pod_list_gpuspec25.csv"}) {
    FillOptions carve = Options("carve", 10), fgd = Options("fgd", 10);
    carve.pods_path = fgd.pods_path = kTrace + "/" + pods;
    auto c = RunFill(carve);
    auto f = RunFill(fgd);
    ASSERT_TRUE(c.ok() && f.ok());
    EXPECT_GT(c->alloc_pct_at_100, f->alloc_pct_at_100) << pods;
    EXPECT_GT(c->alloc_pct_at_130, f->alloc_pct_at_130) << pods;
  }
}

// Checks the decision log independently of the simulator: replaying it onto the trace's node
// list never over-commits a node's CPU or memory or a device's compute.
TEST(FillTest, PlacementLogNeverOvercommits) {
  std::string path = ::testing::TempDir() + "placements.csv";
  FillOptions o = Options("fgd", 2);
  o.placements_path = path;
  auto r = RunFill(o);
  ASSERT_TRUE(r.ok()) << r.status();
  auto nodes = ReadNodeList(o.nodes_path);
  ASSERT_TRUE(nodes.ok());
  std::map<std::string, TraceNode> by_name;
  for (const TraceNode& n : *nodes) by_name[n.name] = n;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "seed,pod,node,gpus,gpu_milli,cpu_milli,memory_mib");
  struct Used {
    int64_t cpu = 0, mem = 0;
    std::map<int, int64_t> gpu;
  };
  std::map<std::pair<int, std::string>, Used> used;
  int64_t rows = 0, placed = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ',');
    ASSERT_EQ(f.size(), 7u) << line;
    ++rows;
    if (f[2].empty()) {
      EXPECT_TRUE(f[3].empty());
      continue;
    }
    ++placed;
    int seed;
    int64_t milli, cpu, mem;
    ASSERT_TRUE(absl::SimpleAtoi(f[0], &seed) && absl::SimpleAtoi(f[4], &milli) &&
                absl::SimpleAtoi(f[5], &cpu) && absl::SimpleAtoi(f[6], &mem));
    ASSERT_TRUE(by_name.count(f[2])) << f[2];
    const TraceNode& node = by_name[f[2]];
    Used& u = used[{seed, f[2]}];
    u.cpu += cpu;
    u.mem += mem;
    EXPECT_LE(u.cpu, node.cpu_milli) << line;
    EXPECT_LE(u.mem, node.memory_mib) << line;
    if (f[3].empty()) continue;
    for (absl::string_view g : absl::StrSplit(f[3], '|')) {
      int device;
      ASSERT_TRUE(absl::SimpleAtoi(g, &device));
      ASSERT_LT(device, node.gpus);
      u.gpu[device] += milli;
      EXPECT_LE(u.gpu[device], 1000) << line;
    }
  }
  EXPECT_EQ(rows, r->placements);
  int64_t placed_by_seeds = 0;
  for (const SeedResult& s : r->seeds) placed_by_seeds += s.placed;
  EXPECT_EQ(placed, placed_by_seeds);
}

TEST(FillTest, CurveReachesTheTargetLoadInFivePercentSteps) {
  auto r = RunFill(Options("best-fit", 1));
  ASSERT_TRUE(r.ok());
  nlohmann::json j = r->ToJson();
  for (const char* key : {"policy", "gpus_total", "seeds", "curve", "alloc_pct_at_100",
                          "alloc_pct_at_130", "placements", "placements_per_sec"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  ASSERT_EQ(j["curve"].size(), 27u);
  EXPECT_DOUBLE_EQ(j["curve"].back()["load"].get<double>(), 1.3);
  EXPECT_DOUBLE_EQ(j["curve"][20]["load"].get<double>(), 1.0);
  // Before anything fails, every arrived GPU is allocated.
  EXPECT_NEAR(j["curve"][10]["alloc_pct"].get<double>(), 50.0, 0.6);
  EXPECT_GT(r->placements_per_sec, 0);
}

TEST(FillTest, SameSeedSameResult) {
  auto a = RunFill(Options("carve", 1));
  auto b = RunFill(Options("carve", 1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ToJson()["curve"], b->ToJson()["curve"]);
}

TEST(FillTest, BadInputIsAClearError) {
  FillOptions o = Options("nope", 1);
  EXPECT_THAT(RunFill(o).status().message(), HasSubstr("unknown placement policy \"nope\""));
  o = Options("fgd", 0);
  EXPECT_THAT(RunFill(o).status().message(), HasSubstr("--seeds"));
  o = Options("fgd", 1);
  o.pods_path = "/nonexistent/pods.csv";
  EXPECT_THAT(RunFill(o).status().message(), HasSubstr("cannot open"));
}

}  // namespace
}  // namespace carve::sim
