// capture_device.cuh: what the capture kit's generated kernels take, shared by the two
// translation units that hold them (device_cuda.cu: mma.sync for every target;
// device_wgmma.cu: wgmma for sm_90a): the block size, the images' device pointers, the
// shared-memory matrix descriptor, and the launchers of the two.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

// Threads per block: four warps, or one warpgroup.
#define CAPTURE_BLOCK 128

// The device pointers of one launch's operand images (null where the instruction lacks one).
struct CaptureImages {
    const uint32_t *a, *b, *c, *meta, *sa, *sb;
};

// The sm_90 matrix descriptor of an operand in shared memory without swizzling (PTX ISA
// 9.7.15.5.1.2.2, Matrix Descriptor Format): the start address in bits 0-13, the leading
// dimension byte offset in 16-29, the stride dimension byte offset in 32-45, each >> 4;
// base offset and layout type (bits 49-51, 62-63) 0.
__device__ __forceinline__ uint64_t capture_desc(const void *smem, uint32_t lbo, uint32_t sbo) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) |
           static_cast<uint64_t>((lbo & 0x3FFFFu) >> 4) << 16 |
           static_cast<uint64_t>((sbo & 0x3FFFFu) >> 4) << 32;
}

// Launch instruction `index`'s kernel (generated: capture_kernels.cuh, capture_wgmma.cuh);
// false when the translation unit has no kernel of that index.
bool capture_launch(int index, unsigned blocks, const CaptureImages &in, uint32_t *D, unsigned mmas,
                    int *status);
bool capture_launch_wgmma(int index, unsigned blocks, const CaptureImages &in, uint32_t *D,
                          unsigned mmas, int *status);
