// The measurer wrappers of search/measurers.h (a site's target tag; ForwardingMeasurer) pass
// every call of the measurer they wrap through, a lost device above all: a worker process asks
// its measurer whether the device is lost (distributed/process_pool.cpp) and ends if so, and a
// tag that answered "no" kept a worker measuring on a lost GPU.
#include <gtest/gtest.h>

#include <memory>

#include "core/graph_builder.h"
#include "search/measurers.h"

namespace brickdl::search {
namespace {

// Counts its measurements; reports the device lost once told to.
class LosingMeasurer final : public Measurer {
public:
  std::string target() const override { return "gpu:fake"; }
  std::string backend() const override { return "cuda"; }
  MeasureResult measure(const Graph&, const Candidate&, const MeasureOptions&) override {
    ++measured;
    MeasureResult r;
    r.status = lost ? MeasureStatus::kLaunchError : MeasureStatus::kOk;
    return r;
  }
  bool device_lost() const override { return lost; }

  int measured = 0;
  bool lost = false;
};

TEST(Measurers, ATaggedMeasurerPassesEverythingButItsTargetThrough) {
  auto inner = std::make_unique<LosingMeasurer>();
  LosingMeasurer& fake = *inner;
  const std::unique_ptr<Measurer> m = with_target_tag(std::move(inner), "site2");
  EXPECT_EQ(m->target(), "gpu:fake#site2");
  EXPECT_EQ(m->backend(), "cuda");
  GraphBuilder b("g", TensorShape{1, 4, 1, 8, 8, 2});
  b.conv2d(b.input(), 4, 3, 1, 1);
  const Graph g = b.build();
  const Candidate c{{1, 1}, {1, 4, 4, 0}, Strategy::kLayerwise, 64};
  EXPECT_EQ(m->measure(g, c, {}).status, MeasureStatus::kOk);
  EXPECT_FALSE(m->device_lost());
  fake.lost = true;
  EXPECT_EQ(m->measure(g, c, {}).status, MeasureStatus::kLaunchError);
  EXPECT_TRUE(m->device_lost());
  EXPECT_EQ(fake.measured, 2);
}

} // namespace
} // namespace brickdl::search
