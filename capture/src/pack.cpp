// pack.cpp: the capture kit's packing of cases into warp register images and of D's
// register image back into values, through the fragment layouts of the generated table.
//
// A case is one dot-product-add. Case number i of an MMA goes on the diagonal of one of
// the warp's independent products (set s = i / diag, row and column j = i % diag, diag =
// min(m, n)): its a into row j of A, its b into column j of B, its c into C[j][j], and it
// is read back from D[j][j]. D[j][j] depends on nothing else (row j of A, column j of B,
// C[j][j]); every other element of the images is 0, which encodes zero in every format of
// the dense instructions (integers, IEEE and OCP FP8 floats, b1).
#include <algorithm>
#include <string>

#include "capture.h"

namespace capture {
namespace {

size_t element(const Family &f, int set, int row, int col) {
    return (static_cast<size_t>(set) * f.rows + row) * f.cols + col;
}

// Put v into every copy of element e of an operand in one MMA's image.
void put(const Family &f, uint32_t *img, size_t e, uint64_t v) {
    for (uint32_t s = f.firsts[e]; s < f.firsts[e + 1]; s++) {
        uint32_t slot = f.slots[s];
        size_t lane = slot >> 16, word = (slot >> 8) & 0xff, bit = slot & 0xff;
        uint32_t *w = img + lane * f.words + word;
        if (f.width == 64) {
            w[0] = static_cast<uint32_t>(v);
            w[1] = static_cast<uint32_t>(v >> 32);
        } else {
            uint32_t mask = f.width == 32 ? 0xffffffffu : ((1u << f.width) - 1u);
            w[0] = (w[0] & ~(mask << bit)) | ((static_cast<uint32_t>(v) & mask) << bit);
        }
    }
}

uint64_t get_one(const Family &f, const uint32_t *img, uint32_t slot) {
    size_t lane = slot >> 16, word = (slot >> 8) & 0xff, bit = slot & 0xff;
    const uint32_t *w = img + lane * f.words + word;
    if (f.width == 64) return static_cast<uint64_t>(w[0]) | static_cast<uint64_t>(w[1]) << 32;
    uint32_t mask = f.width == 32 ? 0xffffffffu : ((1u << f.width) - 1u);
    return (w[0] >> bit) & mask;
}

// Element e of an operand in one MMA's image; every copy must hold the same value.
uint64_t get(const Family &f, const uint32_t *img, size_t e, const Instr &ins) {
    uint64_t v = get_one(f, img, f.slots[f.firsts[e]]);
    for (uint32_t s = f.firsts[e] + 1; s < f.firsts[e + 1]; s++) {
        uint64_t w = get_one(f, img, f.slots[s]);
        if (w != v)
            throw DeviceError(std::string(ins.name) + ": the copies of one element of D differ (" +
                              hex(v, f.width) + " in lane " + std::to_string(f.slots[f.firsts[e]] >> 16) +
                              ", " + hex(w, f.width) + " in lane " + std::to_string(f.slots[s] >> 16) + ")");
    }
    return v;
}

}  // namespace

int max_cases_per_mma(const Instr &ins) {
    return std::min(ins.m, ins.n) * family(ins, OP_D).sets;
}

std::vector<uint64_t> run_cases(Device &dev, const Instr &ins, const std::vector<const Case *> &cases,
                                int per_mma) {
    const Family &fa = family(ins, OP_A), &fb = family(ins, OP_B), &fc = family(ins, OP_C),
                 &fd = family(ins, OP_D);
    if (per_mma < 1 || per_mma > max_cases_per_mma(ins))
        throw InputError("cases per MMA must be 1 to " + std::to_string(max_cases_per_mma(ins)) +
                         " for " + ins.name);
    const int diag = std::min(ins.m, ins.n);
    const size_t mmas = (cases.size() + static_cast<size_t>(per_mma) - 1) / static_cast<size_t>(per_mma);
    const size_t wa = 32u * static_cast<size_t>(fa.words), wb = 32u * static_cast<size_t>(fb.words),
                 wc = 32u * static_cast<size_t>(fc.words), wd = 32u * static_cast<size_t>(fd.words);
    std::vector<uint32_t> a(mmas * wa, 0), b(mmas * wb, 0), c(mmas * wc, 0), d;
    for (size_t i = 0; i < cases.size(); i++) {
        const Case &cs = *cases[i];
        size_t mma = i / static_cast<size_t>(per_mma);
        int slot = static_cast<int>(i % static_cast<size_t>(per_mma));
        int set = slot / diag, j = slot % diag;
        for (int kk = 0; kk < ins.k; kk++) {
            put(fa, &a[mma * wa], element(fa, set, j, kk), cs.a[static_cast<size_t>(kk)]);
            put(fb, &b[mma * wb], element(fb, set, kk, j), cs.b[static_cast<size_t>(kk)]);
        }
        put(fc, &c[mma * wc], element(fc, set, j, j), cs.c);
    }
    dev.run(ins, mmas, a, b, c, d);
    if (d.size() != mmas * wd)
        throw DeviceError("the device returned " + std::to_string(d.size()) + " words of D, expected " +
                          std::to_string(mmas * wd));
    std::vector<uint64_t> out(cases.size());
    for (size_t i = 0; i < cases.size(); i++) {
        size_t mma = i / static_cast<size_t>(per_mma);
        int slot = static_cast<int>(i % static_cast<size_t>(per_mma));
        int set = slot / diag, j = slot % diag;
        out[i] = get(fd, &d[mma * wd], element(fd, set, j, j), ins);
    }
    return out;
}

}  // namespace capture
