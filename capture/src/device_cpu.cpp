// device_cpu.cpp: the capture kit's CPU-backed device: libmmac's mmac_warp_mma
// (capi/include/mmac.h) runs each warp-level MMA on the register images the host packed,
// from the spec given with --spec, so that the host side is tested without a GPU.
// wgmma's B, which the host lays out as the GPU's shared memory will hold it, is read
// back through the same table into the matrix libmmac takes, so this build cannot see
// that layout: tests/capture.rs checks it against the PTX ISA's, and only a GPU against
// the hardware.
#include "mmac.h"

#include <string>

#include "capture.h"

namespace capture {

const char *const kBuild = "cpu";
const char *const kBuildHelp =
    "  --spec SPEC         (this CPU build) the spec whose instruction libmmac runs in\n"
    "                      place of the GPU, through mmac_warp_mma\n";

namespace {

class CpuDevice : public Device {
public:
    CpuDevice(mmac_spec *spec, const mmac_instruction *ins, std::string path)
        : spec_(spec), ins_(ins), path_(std::move(path)) {}
    ~CpuDevice() override { mmac_free(spec_); }
    CpuDevice(const CpuDevice &) = delete;
    CpuDevice &operator=(const CpuDevice &) = delete;

    std::string describe() const override {
        return "CPU build: libmmac mmac_warp_mma on " + path_ + " (no GPU)";
    }

    void run(const Instr &ins, const Images &in, std::vector<uint32_t> &d) override {
        auto words = [&](Operand op) { return has(ins, op) ? image_words(family(ins, op)) : 0; };
        auto image = [&](const std::vector<uint32_t> &v, Operand op, size_t i) {
            return has(ins, op) ? &v[i * words(op)] : nullptr;
        };
        const Family &fb = family(ins, OP_B);
        std::vector<uint32_t> matrix(static_cast<size_t>(fb.rows) * static_cast<size_t>(fb.cols));
        d.assign(in.mmas * words(OP_D), 0);
        for (size_t i = 0; i < in.mmas; i++) {
            const uint32_t *b = image(in.b, OP_B, i);
            if (fb.lanes == 1) {
                // wgmma's B: libmmac takes the matrix, column by column, that the kit's
                // shared-memory image holds
                for (int c = 0; c < fb.cols; c++)
                    for (int r = 0; r < fb.rows; r++)
                        matrix[static_cast<size_t>(c) * static_cast<size_t>(fb.rows) + static_cast<size_t>(r)] =
                            static_cast<uint32_t>(read_element(fb, b, 0, r, c));
                b = matrix.data();
            }
            int rc = mmac_warp_mma(ins_, image(in.a, OP_A, i), b, image(in.c, OP_C, i),
                                   image(in.meta, OP_META, i), 0, image(in.sa, OP_SA, i),
                                   image(in.sb, OP_SB, i), nullptr, &d[i * words(OP_D)]);
            if (rc != MMAC_OK)
                throw DeviceError(std::string("mmac_warp_mma(") + ins.name + ") returned " +
                                  std::to_string(rc) + ": " + mmac_last_error());
        }
    }

private:
    mmac_spec *spec_;
    const mmac_instruction *ins_;
    std::string path_;
};

}  // namespace

std::unique_ptr<Device> open_device(const Instr &ins, const DeviceOptions &opts) {
    if (opts.spec.empty())
        throw InputError("the CPU build runs the instruction with libmmac: give the spec with --spec SPEC");
    mmac_spec *spec = mmac_load(opts.spec.c_str());
    if (!spec) throw InputError(opts.spec + ": " + mmac_last_error());
    const mmac_instruction *mi = mmac_find(spec, ins.name);
    if (!mi) {
        std::string why = mmac_last_error();
        mmac_free(spec);
        throw InputError(opts.spec + " has no instruction `" + ins.name + "`: " + why);
    }
    auto dev = std::make_unique<CpuDevice>(spec, mi, opts.spec);
    // the generated table and libmmac read the same layouts: a mismatch is a stale build
    int lanes = mmac_fragment_lanes(mi), want_lanes = family(ins, OP_A).lanes;
    if (lanes != want_lanes) {
        std::string why = lanes < 0 ? std::string(": ") + mmac_last_error() : "";
        throw DeviceError("libmmac gives " + std::string(ins.name) + " " + std::to_string(lanes) +
                          " lanes, the kit's table " + std::to_string(want_lanes) +
                          " (libmmac older than mmac? cargo build -p mmac-capi)" + why);
    }
    const char *names[kOperands] = {"a", "b", "c", "d", "meta", "sa", "sb"};
    for (int op = 0; op < kOperands; op++) {
        if (!has(ins, static_cast<Operand>(op))) continue;
        const Family &f = family(ins, static_cast<Operand>(op));
        // a memory image (wgmma's B) goes to libmmac as its matrix: rows x cols words
        int words = f.lanes == 1 ? mmac_operand_words(mi, names[op]) : mmac_fragment_words(mi, names[op]);
        int want = f.lanes == 1 ? f.rows * f.cols : f.words;
        if (words != want)
            throw DeviceError("libmmac gives " + std::string(ins.name) + "'s `" + names[op] + "` " +
                              std::to_string(words) + " words per lane, the kit's table " +
                              std::to_string(want) + " (a stale build: cargo build -p mmac-capi, then capture/build.sh --cpu)");
    }
    return dev;
}

}  // namespace capture
