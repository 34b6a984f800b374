// bbreplay's integrity checks on a CUDA call's window, from what CUPTI would have reported.
#include "catch.h"
#include "policy/verify/cuda_checks.h"

using namespace bb::verify;

namespace {

// A well-behaved call: one kernel on the caller's stream, launched by the caller before returning.
Window honest() {
  Window w;
  w.t0 = 1'000'000;
  w.t_return = 1'010'000;
  w.t_joined = 1'050'000;
  w.t1 = 1'060'000;
  w.caller_thread = 42;
  w.activities.push_back({1'012'000, 1'045'000, 7, "void my_relu_kernel(float*, int)"});
  w.launches.push_back({1'005'000, 42});
  return w;
}

}  // namespace

TEST_CASE("an honest call raises nothing") {
  const Findings f = inspect(honest());
  CHECK_FALSE(f.any());
}

TEST_CASE("work still running after the caller's stream finished escaped the call") {
  Window w = honest();
  w.activities.push_back({1'020'000, w.t_joined + 500'000, 13, "void side_stream_kernel()"});
  const Findings f = inspect(w);
  CHECK(f.escaping.find("1 kernel(s)/copies kept running after the caller's stream had finished (up to 500 us "
                        "later, stream 13)") == 0);
  // Within the clock-conversion slack it is not accused.
  Window near = honest();
  near.activities.push_back({1'020'000, near.t_joined + kJoinSlackNs, 13, "k"});
  CHECK(inspect(near).escaping.empty());
}

TEST_CASE("launches from another thread or after the return escaped the call") {
  Window w = honest();
  w.launches.push_back({1'006'000, 99});
  CHECK(inspect(w).escaping == "1 launch(es) from another host thread");
  Window late = honest();
  late.launches.push_back({late.t_return + 1, 42});
  CHECK(inspect(late).escaping == "1 launch(es) after the call had returned");
}

TEST_CASE("calls that change the device's environment are named") {
  Window w = honest();
  w.environment = {"cudaCtxResetPersistingL2Cache", "cudaDeviceSetLimit", "cudaDeviceSetLimit"};
  CHECK(inspect(w).tampering ==
        "called cudaCtxResetPersistingL2Cache, cudaDeviceSetLimit during the call (changes what timing and results "
        "depend on)");
}

TEST_CASE("vendor-library kernels are recognised by name, the kernel's own are not") {
  CHECK(library_kernel("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma"));
  CHECK(library_kernel("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>(...)"));
  CHECK(library_kernel("void cublasLt::splitKreduce_kernel<32, 16, int, float>(...)"));
  CHECK(library_kernel("cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(...)"));
  CHECK(library_kernel("void gemmSN_NN_kernel<float, 128, 2, 4, 8, 4, 4, false>(...)"));
  CHECK_FALSE(library_kernel("void my_relu_kernel(float*, int)"));
  CHECK_FALSE(library_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)"));
  CHECK_FALSE(library_kernel("Memcpy DtoD"));
  Window w = honest();
  w.activities.push_back({1'013'000, 1'040'000, 7, "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n"});
  CHECK(inspect(w).library == "launched vendor-library kernels: sm80_xmma_gemm_f32f32_f32f32_f32_tn_n");
}

TEST_CASE("the speed of light: writing the results at the measured bandwidth") {
  CHECK(speed_of_light_us(4e6, 4e6) == Approx(1.0));  // 4 MB at 4 TB/s (4e6 bytes per µs)
  CHECK(speed_of_light_us(4e6, 0) == 0);
  CHECK(speed_of_light_us(0, 4e6) == 0);
}

TEST_CASE("launches CUPTI made no record of: records switched off around them") {
  Window blind = honest();
  blind.activities.clear();  // the kernel ran, CUPTI saw its launch and no record
  CHECK(inspect(blind).blinded.find("CUPTI recorded 0 kernels, copies and sets of the 1 launched") == 0);
  Window library = honest();  // a library's launch of nothing (cuBLAS's bf16 addmm: 2 launches, 1 record)
  library.launches.push_back({1'006'000, 42});
  CHECK(inspect(library).blinded.empty());
  Window most = honest();  // four launches, one record: three hidden
  for (int k = 0; k < 3; ++k) most.launches.push_back({1'006'000, 42});
  CHECK_FALSE(inspect(most).blinded.empty());
}
