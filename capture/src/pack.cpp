// pack.cpp: the capture kit's packing of cases into warp register images and of D's
// register image back into values, through the fragment layouts of the generated table.
//
// A case is one dot-product-add. Case number i of an MMA goes on the diagonal of one of
// the warp's independent products (set s = i / diag, row and column j = i % diag, diag =
// min(m, n)): its a (a sparse instruction's stored elements) into row j of A, its
// positions into row j of the metadata, its b into column j of B, its sa and sb into row
// j of A's scale factors and column j of B's, its c into C[j][j], and it is read back from
// D[j][j]. D[j][j] depends on nothing else; every other element of the images is 0, which
// encodes zero in every format (integers, IEEE, OCP FP8/FP6/FP4 floats, b1) and a valid
// scale factor, except the metadata, whose unused rows hold a valid pattern (the first
// places of every group): PTX leaves metadata outside the pattern undefined.
#include <algorithm>
#include <string>

#include "capture.h"

namespace capture {
namespace {

size_t element(const Family &f, int set, int row, int col) {
    return (static_cast<size_t>(set) * f.rows + row) * f.cols + col;
}

// The slots of element e's copies: [first(f, e), first(f, e + 1)).
uint32_t first(const Family &f, size_t e) {
    return f.firsts ? f.firsts[e] : static_cast<uint32_t>(e);
}

// Put v into every copy of element e of an operand in one MMA's image.
void put(const Family &f, uint32_t *img, size_t e, uint64_t v) {
    for (uint32_t s = first(f, e); s < first(f, e + 1); s++) {
        uint32_t slot = f.slots[s];
        size_t lane = slot >> 21, word = (slot >> 5) & 0xffff, bit = slot & 31;
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
    size_t lane = slot >> 21, word = (slot >> 5) & 0xffff, bit = slot & 31;
    const uint32_t *w = img + lane * f.words + word;
    if (f.width == 64) return static_cast<uint64_t>(w[0]) | static_cast<uint64_t>(w[1]) << 32;
    uint32_t mask = f.width == 32 ? 0xffffffffu : ((1u << f.width) - 1u);
    return (w[0] >> bit) & mask;
}

// Element e of an operand in one MMA's image; every copy must hold the same value.
uint64_t get(const Family &f, const uint32_t *img, size_t e, const Instr &ins) {
    uint64_t v = get_one(f, img, f.slots[first(f, e)]);
    for (uint32_t s = first(f, e) + 1; s < first(f, e + 1); s++) {
        uint64_t w = get_one(f, img, f.slots[s]);
        if (w != v)
            throw DeviceError(std::string(ins.name) + ": the copies of one element of D differ (" +
                              hex(v, f.width) + " in lane " + std::to_string(f.slots[first(f, e)] >> 21) +
                              ", " + hex(w, f.width) + " in lane " + std::to_string(f.slots[s] >> 21) + ")");
    }
    return v;
}

}  // namespace

uint64_t read_element(const Family &f, const uint32_t *image, int set, int row, int col) {
    return get_one(f, image, f.slots[first(f, element(f, set, row, col))]);
}

int max_cases_per_mma(const Instr &ins) {
    return std::min(ins.m, ins.n) * family(ins, OP_D).sets;
}

namespace {

size_t image_words(const Instr &ins, Operand op) {
    return has(ins, op) ? image_words(family(ins, op)) : 0;
}

// Every metadata field of one MMA's image holds the code of the first places of its group.
void fill_metadata(const Instr &ins, uint32_t *img) {
    const Family &f = family(ins, OP_META);
    const int per_group = ins.meta.kept / ins.meta.unit;
    for (int set = 0; set < f.sets; set++)
        for (int row = 0; row < f.rows; row++)
            for (int field = 0; field < f.cols; field++)
                put(f, img, element(f, set, row, field), ins.meta.codes[field % per_group]);
}

// One case into one MMA's images, on the diagonal at (set, j).
void place(const Instr &ins, const Case &cs, Images &img, size_t mma, int set, int j) {
    auto at = [&](std::vector<uint32_t> &v, Operand op) { return &v[mma * image_words(ins, op)]; };
    const Family &fa = family(ins, OP_A), &fb = family(ins, OP_B), &fc = family(ins, OP_C);
    for (int kk = 0; kk < ins.stored; kk++)
        put(fa, at(img.a, OP_A), element(fa, set, j, kk), cs.a[static_cast<size_t>(kk)]);
    for (int kk = 0; kk < ins.k; kk++)
        put(fb, at(img.b, OP_B), element(fb, set, kk, j), cs.b[static_cast<size_t>(kk)]);
    put(fc, at(img.c, OP_C), element(fc, set, j, j), cs.c);
    if (has(ins, OP_META)) {
        // the field of stored elements f * unit ...: the place of the first in its group
        const Family &fm = family(ins, OP_META);
        const Metadata &m = ins.meta;
        for (int field = 0; field < fm.cols; field++) {
            uint64_t p = cs.pos[static_cast<size_t>(field * m.unit)];
            put(fm, at(img.meta, OP_META), element(fm, set, j, field),
                m.codes[(p % static_cast<uint64_t>(m.span)) / static_cast<uint64_t>(m.unit)]);
        }
    }
    if (has(ins, OP_SA)) {
        const Family &fsa = family(ins, OP_SA), &fsb = family(ins, OP_SB);
        for (int s = 0; s < ins.scales; s++) {
            put(fsa, at(img.sa, OP_SA), element(fsa, set, j, s), cs.sa[static_cast<size_t>(s)]);
            put(fsb, at(img.sb, OP_SB), element(fsb, set, s, j), cs.sb[static_cast<size_t>(s)]);
        }
    }
}

}  // namespace

std::vector<uint64_t> run_cases(Device &dev, const Instr &ins, const std::vector<const Case *> &cases,
                                int per_mma) {
    const Family &fd = family(ins, OP_D);
    if (per_mma < 1 || per_mma > max_cases_per_mma(ins))
        throw InputError("cases per MMA must be 1 to " + std::to_string(max_cases_per_mma(ins)) +
                         " for " + ins.name);
    const int diag = std::min(ins.m, ins.n);
    Images img;
    img.mmas = (cases.size() + static_cast<size_t>(per_mma) - 1) / static_cast<size_t>(per_mma);
    img.a.assign(img.mmas * image_words(ins, OP_A), 0);
    img.b.assign(img.mmas * image_words(ins, OP_B), 0);
    img.c.assign(img.mmas * image_words(ins, OP_C), 0);
    img.meta.assign(img.mmas * image_words(ins, OP_META), 0);
    img.sa.assign(img.mmas * image_words(ins, OP_SA), 0);
    img.sb.assign(img.mmas * image_words(ins, OP_SB), 0);
    if (has(ins, OP_META))
        for (size_t mma = 0; mma < img.mmas; mma++)
            fill_metadata(ins, &img.meta[mma * image_words(ins, OP_META)]);
    for (size_t i = 0; i < cases.size(); i++) {
        int slot = static_cast<int>(i % static_cast<size_t>(per_mma));
        place(ins, *cases[i], img, i / static_cast<size_t>(per_mma), slot / diag, slot % diag);
    }
    std::vector<uint32_t> d;
    dev.run(ins, img, d);
    const size_t wd = image_words(ins, OP_D);
    if (d.size() != img.mmas * wd)
        throw DeviceError("the device returned " + std::to_string(d.size()) + " words of D, expected " +
                          std::to_string(img.mmas * wd));
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
