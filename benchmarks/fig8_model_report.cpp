// The model's view of the paper's Fig 8 subgraphs of ResNet-50 (the conv chains of seven
// bottleneck blocks, experiments/fig8_resnet50_subgraphs.yaml): per subgraph and strategy,
// the feasible bricks and the fastest one's predicted time and L1 / L2 / DRAM bytes relative
// to the same layers run layerwise (whose L1 / L2 bytes count the library tiles' re-reads;
// the least L2 is also given against the layerwise tensors once). Model only, no GPU.
//
//   fig8_model_report [--gpu NAME] [--precision P] [--batch N] [--threads T]
//                     [--bricks 2,4,8,16,32] [--batch-blocks 1,2,4,8] [--channel-blocks 0]
//                     [--clusters 1] [--detail BLOCK] [--group FIRST LAST]
//
// --clusters adds padded candidates run by thread block clusters of that many CTAs (sm_90).
#include <algorithm>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/candidate.h"
#include "core/gpu_spec.h"
#include "core/zoo.h"
#include "model/cost_model.h"

namespace {

using namespace brickdl;

constexpr const char* kBlocks[] = {"layer1.0", "layer1.1", "layer2.0", "layer2.1",
                                   "layer3.0", "layer3.1", "layer4.0"};

// The candidates the report tries.
struct Space {
  int threads = 256;
  std::vector<int> bricks = {2, 4, 8, 16, 32};
  std::vector<int> batch_blocks = {1, 2, 4, 8};
  std::vector<int> channel_blocks = {0};
  std::vector<int> clusters = {1};
};

// Strategy s's candidates with square bricks of edge e (clusters: padded only).
std::vector<Candidate> candidates(const Group& grp, Strategy s, int e, const Space& sp) {
  std::vector<Candidate> out;
  for (int nb : sp.batch_blocks)
    for (int cb : sp.channel_blocks)
      for (int cl : sp.clusters)
        if (cl == 1 || (s == Strategy::kPadded && cb == 0))
          out.push_back(Candidate{grp, BrickShape{1, e, e, cb, nb, cl}, s, sp.threads});
  return out;
}

// The layerwise tensors once: the floor below the library tiles' L1 / L2 bytes.
double tensors_once(const model::Prediction& lw) {
  return lw.bytes_input + lw.bytes_weight + lw.bytes_intermediate_load +
         lw.bytes_intermediate_store + lw.bytes_output;
}

// The fastest feasible candidate of one strategy over the bricks and batch blocks, its time and
// traffic relative to layerwise, the feasible bricks (with the largest feasible batch block
// of each), and the least L2 bytes of any feasible candidate, relative to layerwise and to
// the layerwise tensors once.
std::string strategy_cell(const model::CostModel& m, const Graph& g, const Group& grp, Strategy s,
                          const Space& sp, const model::Prediction& lw) {
  std::string feasible;
  model::Prediction best;
  best.feasible = false; // none yet
  BrickShape best_brick;
  double least_l2 = 0;
  for (int e : sp.bricks) {
    int widest = 0;
    for (const Candidate& c : candidates(grp, s, e, sp)) {
      const model::Prediction p = m.predict(g, c);
      if (!p.feasible)
        continue;
      widest = std::max(widest, c.brick.nb);
      if (least_l2 == 0 || p.l2_bytes < least_l2)
        least_l2 = p.l2_bytes;
      if (!best.feasible || p.time_ms < best.time_ms) {
        best = p;
        best_brick = c.brick;
      }
    }
    if (widest > 0)
      feasible += fmt::format("{}{}/n{}", feasible.empty() ? "" : ",", e, widest);
  }
  if (!best.feasible)
    return fmt::format("{:<64}", "none feasible");
  return fmt::format("{:<8} {:7.1f} {:5.2f} {:5.2f} {:5.2f} {:5.2f} {:5.2f} [{}]", best_brick.str(),
                     best.time_ms * 1e3, best.l1_bytes / lw.l1_bytes, best.l2_bytes / lw.l2_bytes,
                     best.dram_bytes / lw.dram_bytes, least_l2 / lw.l2_bytes,
                     least_l2 / tensors_once(lw), feasible);
}

// One candidate's predicted time and its terms (--detail BLOCK): compute includes smem (the
// streamed passes' accumulator traffic, acc MB, at the shared-memory bandwidth).
void print_terms(const model::CostModel& m, const Graph& g, const Candidate& c) {
  const model::Prediction p = m.predict(g, c);
  fmt::print("{:<9} {:<10} {:8.1f} {:8.1f} {:8.1f} {:8.1f} {:6.1f} {:7.1f} {:7.1f} {:5} {:5} "
             "{:7.0f} {:6.1f} {:6.1f} {:7.1f} {:6.1f}  {}\n",
             strategy_name(c.strategy), c.strategy == Strategy::kLayerwise ? "-" : c.brick.str(),
             p.time_ms * 1e3, p.t_dram_ms * 1e3, p.t_l2_ms * 1e3, p.t_compute_ms * 1e3,
             p.t_smem_ms * 1e3, p.t_sync_ms * 1e3,
             (p.t_atomic_compulsory_ms + p.t_atomic_conflict_ms) * 1e3, p.registers_per_thread,
             p.blocks_per_sm, p.smem_bytes_per_block / 1024, p.l2_bytes / 1e6, p.bytes_weight / 1e6,
             p.dsmem_bytes / 1e6, p.smem_acc_bytes / 1e6, p.feasible ? "" : p.reason);
}

// Every candidate of one subgraph, with the terms of its predicted time.
void print_detail(const model::CostModel& m, const Graph& g, const Group& grp, const Space& sp) {
  fmt::print("{:<9} {:<10} {:>8} {:>8} {:>8} {:>8} {:>6} {:>7} {:>7} {:>5} {:>5} {:>7} {:>6} "
             "{:>6} {:>7} {:>6}  {}\n",
             "strategy", "brick", "us", "dram", "l2", "compute", "smem", "sync", "atomic", "regs",
             "bps", "smemKiB", "L2 MB", "wts MB", "DSMEM MB", "acc MB", "reason");
  print_terms(m, g, Candidate{grp, {}, Strategy::kLayerwise, sp.threads});
  for (Strategy s : {Strategy::kPadded, Strategy::kMemoized})
    for (int e : sp.bricks)
      for (const Candidate& c : candidates(grp, s, e, sp))
        print_terms(m, g, c);
}

} // namespace

int main(int argc, char** argv) {
  std::string gpu_name = "H200", precision = "tf32";
  int batch = 8;
  Space sp;
  std::string detail;
  CLI::App app("the model on the Fig 8 subgraphs of ResNet-50: feasibility, time, traffic");
  app.add_option("--gpu", gpu_name)->check(CLI::IsMember(gpu_spec_names()));
  app.add_option("--precision", precision)->check(CLI::IsMember(dtype_names()));
  app.add_option("--batch", batch)->check(CLI::Range(1, 1024));
  app.add_option("--threads", sp.threads)->check(CLI::Range(32, 1024));
  app.add_option("--bricks", sp.bricks, "square brick edges to try")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--batch-blocks", sp.batch_blocks, "images per unit to try")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  app.add_option("--channel-blocks", sp.channel_blocks, "channel blocks to try (0: all)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--clusters", sp.clusters, "thread block clusters to try (CTAs per unit; padded)")
      ->delimiter(',')
      ->check(CLI::Range(1, kMaxCluster));
  app.add_option("--detail", detail, "a block (layer3.1): every candidate's time terms")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kBlocks), std::end(kBlocks))));
  std::vector<std::string> group;
  app.add_option("--group", group, "FIRST LAST: any group of ResNet-50, every candidate's terms")
      ->expected(2);
  CLI11_PARSE(app, argc, argv);
  ZooOptions zo;
  zo.batch = batch;
  parse_dtype(precision, &zo.dtype);
  const Graph g = fuse_for_inference(build_zoo_model("resnet50", zo));
  const model::CostModel m(*find_gpu_spec(gpu_name));
  if (!group.empty()) {
    print_detail(m, g, Group{g.find(group[0]), g.find(group[1])}, sp);
    return 0;
  }
  if (!detail.empty()) {
    print_detail(m, g, Group{g.find(detail + ".conv1"), g.find(detail + ".conv3")}, sp);
    return 0;
  }
  fmt::print("ResNet-50 batch {} {} on {} (model {}); per strategy: fastest brick/batch block, us, "
             "L1 / L2 / DRAM bytes vs layerwise, least L2 of any feasible candidate vs "
             "layerwise and vs the layerwise tensors once (no tile re-reads), [feasible "
             "bricks/largest feasible batch block]\n",
             batch, precision, gpu_name, model::CostModel::version());
  fmt::print("{:<9} {:>8}  {:<64}  {:<64}\n", "subgraph", "lw us", "padded", "memoized");
  for (const char* block : kBlocks) {
    const std::string p = block;
    const Group grp{g.find(p + ".conv1"), g.find(p + ".conv3")};
    Candidate lwc;
    lwc.group = grp;
    lwc.strategy = Strategy::kLayerwise;
    const model::Prediction lw = m.predict(g, lwc);
    fmt::print("{:<9} {:8.1f}  {}  {}\n", block, lw.time_ms * 1e3,
               strategy_cell(m, g, grp, Strategy::kPadded, sp, lw),
               strategy_cell(m, g, grp, Strategy::kMemoized, sp, lw));
  }
  return 0;
}
