/* The golden model for the testbench: the spec compiled by `mmac compile --emit obj`
 * (dp4.o, dp4.h), called through DPI-C. Operands come packed: a0 in the low byte of
 * `a`, a3 in the high byte, likewise b. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "dp4.h"

static const mmac_dp4_instruction *instruction(void) {
    static const mmac_dp4_instruction *ins;
    if (!ins) {
        ins = mmac_dp4_find("dp4.f32.e4m3.e4m3.f32");
        if (!ins) {
            fprintf(stderr, "golden: dp4.o has no dp4.f32.e4m3.e4m3.f32\n");
            exit(2);
        }
    }
    return ins;
}

/* (Verilator compiles this file as C++: the DPI function keeps its C name) */
#ifdef __cplusplus
extern "C"
#endif
uint32_t golden_dot(uint32_t c, uint32_t a, uint32_t b);

uint32_t golden_dot(uint32_t c, uint32_t a, uint32_t b) {
    uint64_t av[4], bv[4], d = 0;
    for (int i = 0; i < 4; i++) {
        av[i] = (a >> (8 * i)) & 0xff;
        bv[i] = (b >> (8 * i)) & 0xff;
    }
    int rc = mmac_dp4_dot(instruction(), c, av, bv, NULL, NULL, &d);
    if (rc != MMAC_OK) {
        fprintf(stderr, "golden: mmac_dp4_dot: %s\n", mmac_dp4_error(rc));
        exit(2);
    }
    return (uint32_t)d;
}
