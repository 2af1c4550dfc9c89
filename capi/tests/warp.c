/* mmac_warp_mma from C (include/mmac.h), built and run by tests/c_api.rs from the
 * repository's root.
 *
 * For mma.m16n8k16.f32.f16.f16.f32 of SPEC: random register images (every bit pattern,
 * then finite values), run through mmac_warp_mma; the matrices they hold are unpacked
 * here by the PTX ISA's formulas (9.7.14.5.8; groupID = lane / 4, threadID_in_group =
 * lane % 4), every element of D computed by mmac_dot on its row of A, column of B and
 * element of C, and compared with the register of d that the formulas place it in.
 * Then the errors. Prints `N passed, M failed` and exits 0 when nothing failed.
 *
 * With WGMMA_SPEC (Hopper's), wgmma.m64n8k16.f32.f16.f16 across a warpgroup: A in
 * registers (each warp w of the 128 lanes holds rows 16w..16w+15 as m16n8k16's A), B as
 * its matrix, column by column (it lies in shared memory), D as the m16n8 accumulator per
 * warp; every element of D against mmac_dot.
 *
 * Usage: warp SPEC NO_LAYOUT_SPEC NO_LAYOUT_NAME [WGMMA_SPEC] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mmac.h"

#define F16 "mma.m16n8k16.f32.f16.f16.f32"

static uint64_t state = 0x9E3779B97F4A7C15ull;
static uint32_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 16);
}

static long passed = 0, failed = 0;
static void check(int ok, const char *what) {
    if (ok) passed++;
    else {
        if (failed < 5) printf("failed: %s\n", what);
        failed++;
    }
}

/* A: a_i at row groupID + 8 * ((i / 2) % 2), col threadID_in_group * 2 + (i % 2) + 8 * (i / 4);
 * two f16 per register (element i in register i / 2, bits 16 * (i % 2)). */
static void unpack_a(const uint32_t *regs, uint64_t A[16][16]) {
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 8; i++) {
            int g = lane / 4, t = lane % 4;
            int row = g + 8 * ((i / 2) % 2), col = t * 2 + (i % 2) + 8 * (i / 4);
            A[row][col] = (regs[lane * 4 + i / 2] >> (16 * (i % 2))) & 0xFFFF;
        }
}

/* B: b_i at row threadID_in_group * 2 + (i % 2) + 8 * (i / 2), col groupID. */
static void unpack_b(const uint32_t *regs, uint64_t B[16][8]) {
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            int g = lane / 4, t = lane % 4;
            B[t * 2 + (i % 2) + 8 * (i / 2)][g] = (regs[lane * 2 + i / 2] >> (16 * (i % 2))) & 0xFFFF;
        }
}

/* C and D (f32): c_i at row groupID + 8 * (i / 2), col threadID_in_group * 2 + (i % 2). */
static int cd_row(int lane, int i) { return lane / 4 + 8 * (i / 2); }
static int cd_col(int lane, int i) { return (lane % 4) * 2 + (i % 2); }

static int run_f16(const mmac_instruction *ins, int finite) {
    uint32_t a[32 * 4], b[32 * 2], c[32 * 4], d[32 * 4];
    for (int i = 0; i < 32 * 4; i++) {
        a[i] = next();
        c[i] = next();
        if (finite) {
            a[i] &= 0x3BFF3BFFu;
            c[i] &= 0x3FFFFFFFu;
        }
    }
    for (int i = 0; i < 32 * 2; i++) b[i] = finite ? next() & 0x3BFF3BFFu : next();
    memset(d, 0xAB, sizeof d);
    int rc = mmac_warp_mma(ins, a, b, c, NULL, 0, NULL, NULL, NULL, d);
    if (rc != MMAC_OK) {
        printf("mmac_warp_mma: rc=%d %s\n", rc, mmac_last_error());
        return 0;
    }
    uint64_t A[16][16], B[16][8], C[16][8];
    unpack_a(a, A);
    unpack_b(b, B);
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) C[cd_row(lane, i)][cd_col(lane, i)] = c[lane * 4 + i];
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            int row = cd_row(lane, i), col = cd_col(lane, i);
            uint64_t bcol[16], want = 0;
            for (int k = 0; k < 16; k++) bcol[k] = B[k][col];
            if (mmac_dot(ins, C[row][col], A[row], bcol, NULL, NULL, &want) != MMAC_OK) {
                printf("mmac_dot: %s\n", mmac_last_error());
                return 0;
            }
            char what[128];
            snprintf(what, sizeof what, "lane %d d%d (D[%d][%d]): got %08x want %08llx", lane, i,
                     row, col, d[lane * 4 + i], (unsigned long long)want);
            check(d[lane * 4 + i] == (uint32_t)want, what);
        }
    return 1;
}

/* wgmma.m64n8k16.f32.f16.f16: 128 lanes; a_i at row 16 * warp + groupID + 8 * ((i / 2) % 2),
 * col threadID_in_group * 2 + (i % 2) + 8 * (i / 4); d_i at row 16 * warp + groupID +
 * 8 * (i / 2), col threadID_in_group * 2 + (i % 2); B (16 x 8) at word n * 16 + k. */
static void run_wgmma(const mmac_instruction *ins) {
    check(mmac_fragment_lanes(ins) == 128, "wgmma: 128 lanes");
    check(mmac_fragment_words(ins, "b") == 0 && mmac_operand_words(ins, "b") == 16 * 8,
          "wgmma b: no registers, its 16 x 8 matrix");
    check(mmac_operand_words(ins, "a") == 128 * 4 && mmac_operand_words(ins, "d") == 128 * 4,
          "wgmma a, d: 128 lanes x 4 words");
    static uint32_t a[128 * 4], b[16 * 8], c[128 * 4], d[128 * 4];
    for (int i = 0; i < 128 * 4; i++) {
        a[i] = next() & 0x3BFF3BFFu;
        c[i] = next() & 0x3FFFFFFFu;
    }
    for (int i = 0; i < 16 * 8; i++) b[i] = next() & 0x3BFFu;
    int rc = mmac_warp_mma(ins, a, b, c, NULL, 0, NULL, NULL, NULL, d);
    check(rc == MMAC_OK, "wgmma: mmac_warp_mma");
    if (rc != MMAC_OK) {
        printf("mmac_warp_mma(wgmma): rc=%d %s\n", rc, mmac_last_error());
        return;
    }
    static uint64_t A[64][16], C[64][8];
    for (int lane = 0; lane < 128; lane++) {
        int w = lane / 32, g = lane % 32 / 4, t = lane % 4;
        for (int i = 0; i < 8; i++)
            A[16 * w + g + 8 * ((i / 2) % 2)][t * 2 + (i % 2) + 8 * (i / 4)] =
                (a[lane * 4 + i / 2] >> (16 * (i % 2))) & 0xFFFF;
        for (int i = 0; i < 4; i++) C[16 * w + g + 8 * (i / 2)][t * 2 + (i % 2)] = c[lane * 4 + i];
    }
    for (int lane = 0; lane < 128; lane++)
        for (int i = 0; i < 4; i++) {
            int w = lane / 32, g = lane % 32 / 4, t = lane % 4;
            int row = 16 * w + g + 8 * (i / 2), col = t * 2 + (i % 2);
            uint64_t bcol[16], want = 0;
            for (int k = 0; k < 16; k++) bcol[k] = b[col * 16 + k];
            if (mmac_dot(ins, C[row][col], A[row], bcol, NULL, NULL, &want) != MMAC_OK) {
                printf("mmac_dot: %s\n", mmac_last_error());
                failed++;
                return;
            }
            char what[128];
            snprintf(what, sizeof what, "wgmma lane %d d%d (D[%d][%d]): got %08x want %08llx", lane, i,
                     row, col, d[lane * 4 + i], (unsigned long long)want);
            check(d[lane * 4 + i] == (uint32_t)want, what);
        }
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    mmac_spec *spec = mmac_load(argv[1]);
    mmac_spec *other = mmac_load(argv[2]);
    if (!spec || !other) {
        printf("%s", mmac_last_error());
        return 2;
    }
    const mmac_instruction *ins = mmac_find(spec, F16);
    if (!ins) {
        printf("%s\n", mmac_last_error());
        return 2;
    }
    check(mmac_fragment_registers(ins, "a") == 4 && mmac_fragment_words(ins, "a") == 4, "a: 4 registers");
    check(mmac_fragment_registers(ins, "b") == 2 && mmac_fragment_words(ins, "b") == 2, "b: 2 registers");
    check(mmac_fragment_words(ins, "c") == 4 && mmac_fragment_words(ins, "d") == 4, "c, d: 4 words");
    for (int trial = 0; trial < 8; trial++)
        if (!run_f16(ins, trial % 2)) return 1;

    /* f64: one 64-bit register per lane for A is two words, low word first */
    const mmac_instruction *f64 = mmac_find(spec, "mma.m8n8k4.f64.f64.f64.f64");
    check(f64 && mmac_fragment_registers(f64, "a") == 1 && mmac_fragment_words(f64, "a") == 2,
          "f64 a: 1 register, 2 words");
    check(f64 && mmac_fragment_registers(f64, "d") == 2 && mmac_fragment_words(f64, "d") == 4,
          "f64 d: 2 registers, 4 words");

    /* errors */
    uint32_t z[32 * 4] = {0}, d[32 * 4];
    check(mmac_fragment_words(ins, "x") == -1 && strstr(mmac_last_error(), "unknown operand"),
          "operand 'x' refused");
    check(mmac_fragment_words(NULL, "a") == -1 && strstr(mmac_last_error(), "NULL"), "NULL ins");
    check(mmac_warp_mma(NULL, z, z, z, NULL, 0, NULL, NULL, NULL, d) == MMAC_ERR_NULL, "NULL ins: MMAC_ERR_NULL");
    check(mmac_warp_mma(ins, z, NULL, z, NULL, 0, NULL, NULL, NULL, d) == MMAC_ERR_NULL && strstr(mmac_last_error(), "NULL"),
          "NULL b_regs: MMAC_ERR_NULL");
    const mmac_instruction *none = mmac_find(other, argv[3]);
    check(none != NULL, "the instruction without a layout is found");
    if (none) {
        check(mmac_fragment_registers(none, "a") == -1, "no layout: -1");
        char want[512];
        snprintf(want, sizeof want, "no fragment layout is known for `%s`", argv[3]);
        check(strstr(mmac_last_error(), want) != NULL, "no layout: the error names it");
        check(mmac_warp_mma(none, z, z, z, NULL, 0, NULL, NULL, NULL, d) == MMAC_ERR_LAYOUT, "no layout: MMAC_ERR_LAYOUT");
        check(strstr(mmac_last_error(), want) != NULL, "no layout: mmac_warp_mma names it");
    }
    check(mmac_warp_mma(ins, z, z, z, NULL, 0, NULL, NULL, NULL, d) == MMAC_OK && mmac_last_error()[0] == 0,
          "success clears the error");

    /* a sparse instruction takes its metadata and a selector: every group's kept
     * elements at columns 0 and 1 (2-bit indices 0 and 1: the fields 0b01 0b00, low
     * first), A and B zero, so D is C; the other selector's lanes are not read */
    const mmac_instruction *sp = mmac_find(spec, "mma.sp.m16n8k32.f32.f16.f16.f32");
    check(sp != NULL, "the sparse instruction is found");
    if (sp) {
        int mw = mmac_fragment_words(sp, "meta");
        check(mw == 1 && mmac_fragment_lanes(sp) == 32, "meta: 1 word per lane");
        uint32_t meta[32], c2[32 * 4], d2[32 * 4];
        for (int l = 0; l < 32; l++) meta[l] = 0x44444444u;
        for (int i = 0; i < 32 * 4; i++) c2[i] = next() & 0x3FFFFFFFu;
        int rc = mmac_warp_mma(sp, z, z, c2, meta, 1, NULL, NULL, NULL, d2);
        check(rc == MMAC_OK, "sparse warp_mma with metadata and selector 1");
        check(rc == MMAC_OK && memcmp(c2, d2, sizeof d2) == 0, "A = 0: D is C");
        check(mmac_warp_mma(sp, z, z, z, NULL, 0, NULL, NULL, NULL, d2) == MMAC_ERR_ENGINE &&
                  strstr(mmac_last_error(), "takes meta registers"),
              "no metadata: refused");
        check(mmac_warp_mma(sp, z, z, z, meta, 2, NULL, NULL, NULL, d2) == MMAC_ERR_ENGINE &&
                  strstr(mmac_last_error(), "out of range"),
              "selector 2: refused");
        for (int l = 0; l < 32; l++) meta[l] = 0x55555555u; /* index 1 twice: 0b0101 */
        check(mmac_warp_mma(sp, z, z, z, meta, 0, NULL, NULL, NULL, d2) == MMAC_ERR_ENGINE,
              "metadata out of the pattern: refused");
    }
    check(mmac_warp_mma(ins, z, z, z, z, 0, NULL, NULL, NULL, d) == MMAC_ERR_ENGINE &&
              strstr(mmac_last_error(), "takes no meta registers"),
          "a dense instruction refuses metadata");

    if (argc > 4) {
        mmac_spec *hopper = mmac_load(argv[4]);
        const mmac_instruction *wg = hopper ? mmac_find(hopper, "wgmma.m64n8k16.f32.f16.f16") : NULL;
        check(wg != NULL, "the wgmma instruction is found");
        if (wg) run_wgmma(wg);
        mmac_free(hopper);
    }

    printf("%ld passed, %ld failed\n", passed, failed);
    mmac_free(other);
    mmac_free(spec);
    return failed != 0 || passed == 0;
}
