// The probe's GPU kernel, in PTX that the CUDA driver compiles for the GPU it runs on
// (cuModuleLoadData), so `carve` needs no CUDA toolkit to build. Each thread runs `iterations`
// dependent single-precision FMAs and stores the result (so no compiler can drop the loop):
//   carve_probe_spin(float* out, unsigned iterations)   out[blockIdx.x * blockDim.x + threadIdx.x]
// A launch of 8 blocks of 256 threads per multiprocessor fills every SM (64 warps), so launches
// per second fall with the share of SMs the job may use (MPS's active thread percentage) and with
// the neighbours on the same GPU. tests/runtime/probe_test.cc assembles it with ptxas when a
// CUDA toolkit is installed.
#ifndef CARVE_RUNTIME_PROBE_KERNEL_H_
#define CARVE_RUNTIME_PROBE_KERNEL_H_

namespace carve {

inline constexpr char kProbeKernelName[] = "carve_probe_spin";
inline constexpr int kProbeKernelThreads = 256;               // per block
inline constexpr int kProbeKernelBlocksPerSm = 8;             // blocks per multiprocessor
inline constexpr unsigned kProbeKernelIterations = 1u << 16;  // FMAs per thread per launch

// PTX ISA 7.0 for sm_75 and later (Turing, Ampere, Hopper, Blackwell JIT it from this).
inline constexpr char kProbeKernelPtx[] = R"ptx(
.version 7.0
.target sm_75
.address_size 64

.visible .entry carve_probe_spin(
	.param .u64 carve_probe_spin_param_0,
	.param .u32 carve_probe_spin_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .f32 	%f<2>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [carve_probe_spin_param_0];
	ld.param.u32 	%r1, [carve_probe_spin_param_1];
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mov.u32 	%r4, %tid.x;
	mad.lo.s32 	%r5, %r2, %r3, %r4;
	cvt.rn.f32.u32 	%f1, %r5;
	mov.u32 	%r6, 0;
$L_loop:
	setp.ge.u32 	%p1, %r6, %r1;
	@%p1 bra 	$L_done;
	fma.rn.f32 	%f1, %f1, 0f3F7FFFEF, 0f3F800000;
	add.s32 	%r6, %r6, 1;
	bra.uni 	$L_loop;
$L_done:
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.u32 	%rd3, %r5, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.f32 	[%rd4], %f1;
	ret;
}
)ptx";

}  // namespace carve

#endif  // CARVE_RUNTIME_PROBE_KERNEL_H_
