/* Two spec files' objects linked into one program: every symbol is prefixed with its
 * architecture, so hopper.o and cdna3.o coexist. Built by tests/aot.rs:
 *
 *   cc two_specs.c hopper.o cdna3.o -lm
 *
 * Prints, for each object, its instruction count and 1 + 1*1 through one f16 instruction
 * of each (f32 results in hex). */
#include <stdio.h>
#include "cdna3.h"
#include "hopper.h"

int main(void) {
    uint64_t one_f16[16] = {0x3c00}, zero[16] = {0}, d = 0;
    const mmac_hopper_instruction *h = mmac_hopper_find("mma.m16n8k16.f32.f16.f16.f32");
    const mmac_cdna3_instruction *c = mmac_cdna3_find("v_mfma_f32_16x16x16_f16");
    if (!h || !c || mmac_hopper_find("no such instruction")) return 1;
    int rc = mmac_hopper_dot(h, 0x3f800000, one_f16, one_f16, NULL, NULL, &d);
    printf("hopper %zu instructions, %s: rc=%d d=%llx\n", mmac_hopper_count(), h->name, rc,
           (unsigned long long)d);
    rc = mmac_cdna3_dot(c, 0x3f800000, one_f16, one_f16, NULL, NULL, &d);
    printf("cdna3 %zu instructions, %s: rc=%d d=%llx\n", mmac_cdna3_count(), c->name, rc,
           (unsigned long long)d);
    /* the errors an embedder must handle */
    printf("null operand: %d (%s)\n", mmac_hopper_dot(h, 0, NULL, zero, NULL, NULL, &d),
           mmac_hopper_error(mmac_hopper_dot(h, 0, NULL, zero, NULL, NULL, &d)));
    return 0;
}
