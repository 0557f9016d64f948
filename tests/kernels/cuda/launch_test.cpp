// Programmatic dependent launch (launch.cuh, ADR 0041): the switch, and a
// chain of the forward's kernels that shares one slab workspace between its
// GEMMs (so a kernel that wrote too early, or read before its predecessor was
// done, would change the result) giving the same bits with PDL off, on, and
// on inside a CUDA graph replayed several times. Skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_test_util.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;

// Sets the process-wide switch for a scope, then puts back what was there
// (TANDEM_CUDA_PDL=0 runs the other tests of the binary without PDL).
struct PdlSwitch {
  explicit PdlSwitch(bool on) : before(programmatic_launch_enabled()) { set_programmatic_launch(on); }
  ~PdlSwitch() { set_programmatic_launch(before); }
  bool before;
};

TEST(CudaLaunch, TheSwitchTurnsProgrammaticLaunchOff) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  {
    PdlSwitch off(false);
    EXPECT_FALSE(programmatic_launch_enabled());
  }
  // On by default where the device has it (sm_90+); the GPU machine is an H200.
  if (std::getenv("TANDEM_CUDA_PDL") == nullptr) {
    EXPECT_TRUE(programmatic_launch_enabled());
  }
}

// Six MLP blocks: h -> gate_up (K-sliced) -> SwiGLU -> down (K-sliced) ->
// x += … and h = rmsnorm(x), all GEMMs through one slab workspace.
struct Chain {
  int64_t m, d = 1024, inter = 2816;
  DeviceBuffer x, h, act, w1, w2, norm, slabs;
  size_t slab_floats = 0;
  std::vector<float> x0;

  Chain(int64_t rows, const Stream& s) : m(rows) {
    x0 = random_floats(m * d, 3, -2.0f, 2.0f);
    x = testing::to_device(x0, s);
    h = testing::to_device(x0, s);
    act = testing::poisoned(m * inter * 4, s);
    w1 = testing::to_device_weights(testing::to_bf16(random_floats(2 * inter * d, 5, -0.05f, 0.05f)),
                                    2 * inter, d, s);
    w2 =
        testing::to_device_weights(testing::to_bf16(random_floats(d * inter, 7, -0.05f, 0.05f)), d, inter, s);
    norm = testing::to_device(random_floats(d, 11, 0.5f, 1.5f), s);
    slab_floats =
        static_cast<size_t>(std::max(gemm_slicing(2 * inter, d).slices, gemm_slicing(d, inter).slices)) * m *
        2 * inter;
    slabs = testing::poisoned(slab_floats * 4, s);
  }

  Status reset(const Stream& s) {
    TANDEM_RETURN_IF_ERROR(x.upload(x0.data(), x0.size() * 4, s));
    return h.upload(x0.data(), x0.size() * 4, s);
  }

  Status enqueue(const Stream& s) {
    for (int step = 0; step < 6; ++step) {
      Expected<GemmPartials> p = gemm_bf16w_partials(s, h.data(), DType::f32, m, w1.as<uint16_t>(), 2 * inter,
                                                     d, act.as<float>(), slabs.as<float>(), slab_floats);
      if (!p.ok()) return p.status();
      TANDEM_RETURN_IF_ERROR(swiglu_partials(s, *p, nullptr, act.as<float>()));
      Expected<GemmPartials> q = gemm_bf16w_partials(s, act.data(), DType::f32, m, w2.as<uint16_t>(), d,
                                                     inter, h.as<float>(), slabs.as<float>(), slab_floats);
      if (!q.ok()) return q.status();
      TANDEM_RETURN_IF_ERROR(residual_add_rmsnorm_partials(s, *q, nullptr, x.as<float>(), norm.as<float>(),
                                                           1e-6f, h.as<float>()));
    }
    return Status::Ok();
  }

  std::vector<float> result(const Stream& s) {
    std::vector<float> out = testing::to_host<float>(x, m * d, s);
    const std::vector<float> hh = testing::to_host<float>(h, m * d, s);
    out.insert(out.end(), hh.begin(), hh.end());
    return out;
  }
};

TEST(CudaLaunch, ProgrammaticChainsGiveTheSerialBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const Stream& s = *stream;
  for (const int64_t m : {int64_t{1}, int64_t{5}}) {
    Chain chain(m, s);
    ASSERT_GT(gemm_slicing(chain.d, chain.inter).slices, 1);
    std::vector<float> serial;
    {
      PdlSwitch off(false);
      ASSERT_TRUE(chain.reset(s).ok());
      ASSERT_TRUE(chain.enqueue(s).ok());
      serial = chain.result(s);
    }
    PdlSwitch on(true);
    ASSERT_TRUE(chain.reset(s).ok());
    ASSERT_TRUE(chain.enqueue(s).ok());
    const std::vector<float> eager = chain.result(s);
    EXPECT_EQ(std::memcmp(serial.data(), eager.data(), serial.size() * 4), 0) << "eager, m=" << m;
    ASSERT_TRUE(Graph::begin_capture(s).ok());
    const Status queued = chain.enqueue(s);
    Expected<Graph> graph = Graph::end_capture(s);
    ASSERT_TRUE(queued.ok()) << queued.to_string();
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    for (int replay = 0; replay < 3; ++replay) {
      ASSERT_TRUE(chain.reset(s).ok());
      ASSERT_TRUE(graph->launch(s).ok());
      const std::vector<float> replayed = chain.result(s);
      EXPECT_EQ(std::memcmp(serial.data(), replayed.data(), serial.size() * 4), 0)
          << "graph replay " << replay << ", m=" << m;
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::gpu
