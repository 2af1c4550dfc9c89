// device_cuda.cu: the capture kit's GPU device: the generated kernels (capture_kernels.cuh,
// one inline-PTX mma per instruction, built for the targets that have it; the wgmma ones
// in device_wgmma.cu) run the register images the host packed (A, B, C, and the metadata
// and scale factors where the instruction takes them), one warp (warpgroup) per MMA.
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "capture.h"

#include "capture_device.cuh"
#include "capture_kernels.cuh"

namespace capture {

const char *const kBuild = "cuda";
const char *const kBuildHelp =
    "  (this CUDA build runs the real instruction on the first visible GPU;\n"
    "   CUDA_VISIBLE_DEVICES picks another)\n";

namespace {

// The __CUDA_ARCH__ of the code the GPU runs (which of the fatbinary's targets it took).
__global__ void capture_arch(int *out) {
#ifdef __CUDA_ARCH__
    *out = __CUDA_ARCH__;
#endif
}

void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess)
        throw DeviceError(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

// A device buffer that grows as needed.
struct Buffer {
    void *ptr = nullptr;
    size_t size = 0;
    ~Buffer() {
        if (ptr) cudaFree(ptr);
    }
    uint32_t *get(size_t bytes) {
        if (bytes > size) {
            if (ptr) cudaFree(ptr);
            ptr = nullptr;
            size = 0;
            check(cudaMalloc(&ptr, bytes), "cudaMalloc");
            size = bytes;
        }
        return static_cast<uint32_t *>(ptr);
    }
};

std::string driver_release() {
    std::ifstream f("/proc/driver/nvidia/version");
    std::string line;
    if (f && std::getline(f, line)) {
        // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  ..." or, for the open
        // modules, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  ...":
        // the release is the first word after "Module" that starts with a digit and has a dot
        std::istringstream words(line.substr(std::min(line.size(), line.find("Module"))));
        for (std::string w; words >> w;) {
            if (std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos)
                return "driver " + w;
        }
    }
    return "driver release unknown";
}

std::string version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

class CudaDevice : public Device {
public:
    explicit CudaDevice(std::string desc) : desc_(std::move(desc)) {}
    std::string describe() const override { return desc_; }

    void run(const Instr &ins, const Images &in, std::vector<uint32_t> &d) override {
        const size_t mmas = in.mmas, wd = image_words(family(ins, OP_D));
        d.assign(mmas * wd, 0);
        if (mmas == 0) return;
        // each image to the device; `per` is its words per mma
        const std::vector<uint32_t> *host[6] = {&in.a, &in.b, &in.c, &in.meta, &in.sa, &in.sb};
        const char *what[6] = {"copy A", "copy B", "copy C", "copy metadata", "copy SA", "copy SB"};
        uint32_t *dev[6] = {};
        size_t per[6] = {};
        for (int i = 0; i < 6; i++) {
            if (host[i]->empty()) continue;
            dev[i] = images_[i].get(host[i]->size() * 4);
            per[i] = host[i]->size() / mmas;
            check(cudaMemcpy(dev[i], host[i]->data(), host[i]->size() * 4, cudaMemcpyHostToDevice), what[i]);
        }
        uint32_t *dd = d_.get(d.size() * 4);
        int *status = reinterpret_cast<int *>(s_.get(sizeof(int)));
        check(cudaMemset(dd, 0, d.size() * 4), "clear D");
        check(cudaMemset(status, 0, sizeof(int)), "clear status");
        // a warp (32 lanes) or a warpgroup (128) per MMA
        const size_t per_block = CAPTURE_BLOCK / static_cast<size_t>(family(ins, OP_A).lanes);
        for (size_t first = 0; first < mmas;) {
            // at most 2^20 MMAs per launch
            size_t n = std::min<size_t>(mmas - first, size_t(1) << 20);
            unsigned blocks = static_cast<unsigned>((n + per_block - 1) / per_block);
            auto at = [&](int i) -> const uint32_t * { return dev[i] ? dev[i] + first * per[i] : nullptr; };
            CaptureImages args{at(0), at(1), at(2), at(3), at(4), at(5)};
            if (!capture_launch(ins.index, blocks, args, dd + first * wd, static_cast<unsigned>(n), status) &&
                !capture_launch_wgmma(ins.index, blocks, args, dd + first * wd, static_cast<unsigned>(n), status))
                throw DeviceError(std::string("no kernel for ") + ins.name);
            check(cudaGetLastError(), "launch");
            first += n;
        }
        check(cudaDeviceSynchronize(), ins.name);
        int st = 0;
        check(cudaMemcpy(&st, status, sizeof(int), cudaMemcpyDeviceToHost), "copy status");
        if (st != 0)
            throw DeviceError(std::string(ins.name) + ": the code this GPU runs was not built with it");
        check(cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost), "copy D");
    }

private:
    std::string desc_;
    Buffer images_[6], d_, s_;
};

}  // namespace

std::unique_ptr<Device> open_device(const Instr &ins, const DeviceOptions &opts) {
    if (!opts.spec.empty())
        throw InputError("--spec is for the CPU build; this build runs the GPU");
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
        throw DeviceError(std::string("no CUDA device: ") + cudaGetErrorString(e) +
                          " (this build needs an NVIDIA GPU and driver release 580 or newer, for CUDA 13)");
    check(e, "no CUDA device");
    if (count == 0) throw DeviceError("no CUDA device");
    int dev = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
    int *arch = nullptr, ran = 0;
    check(cudaMalloc(&arch, sizeof(int)), "cudaMalloc");
    check(cudaMemset(arch, 0, sizeof(int)), "cudaMemset");
    capture_arch<<<1, 1>>>(arch);
    cudaError_t launched = cudaGetLastError();
    if (launched == cudaErrorNoKernelImageForDevice || launched == cudaErrorUnsupportedPtxVersion) {
        cudaFree(arch);
        throw InputError(std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) +
                         "): this build has no code it can run (built for sm_80, sm_89, sm_90a, sm_100a, "
                         "sm_120a and compute_80 PTX; the driver must support CUDA 13): " +
                         cudaGetErrorString(launched));
    }
    check(launched, "launch");
    check(cudaDeviceSynchronize(), "arch probe");
    check(cudaMemcpy(&ran, arch, sizeof(int), cudaMemcpyDeviceToHost), "copy arch");
    cudaFree(arch);
    const Target *target = nullptr;
    size_t bit = 0;
    for (size_t i = 0; i < targets().size(); i++)
        if (targets()[i].cc == ran) target = &targets()[i], bit = i;
    std::string code = target ? std::string(target->name) : "compute_" + std::to_string(ran / 10) + " PTX";
    if (!target || !(ins.target_mask >> bit & 1))
        throw InputError(std::string(ins.name) + " is not built for " + p.name + " (sm_" +
                         std::to_string(p.major) + std::to_string(p.minor) + ", running " + code +
                         " code); " + (ins.target_mask ? std::string("the kit builds it for ") : std::string("the kit has ")) +
                         ins.targets);
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    std::string desc = std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor) +
                       " (code for " + code + "), " + driver_release() + " (CUDA " + version(drv) +
                       "), CUDA runtime " + version(rt);
    return std::make_unique<CudaDevice>(desc);
}

}  // namespace capture
