/* Runs whole instructions through the `mma` entry of an object's C API. Built by
 * tests/aot.rs like check_vectors.c (-DMMAC_HEADER, -DMMAC_PREFIX).
 *
 * Reads from stdin, whitespace-separated: an instruction name, then in hex, row-major,
 * A (m x k), B (k x n), C (m x n), and for a block-scaled instruction SA (m x
 * scale_count) and SB (n x scale_count). Prints D (m x n) in hex, one element per line.
 * Exits 1 with a message on stderr when the input is short or the entry fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include MMAC_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define API(name) CAT(MMAC_PREFIX, name)

static uint64_t *read_hex(size_t count, const char *what) {
    uint64_t *out = calloc(count + 1, 8);
    for (size_t i = 0; i < count; i++) {
        unsigned long long v;
        if (scanf("%llx", &v) != 1) {
            fprintf(stderr, "mma_check: %s: expected %zu values, got %zu\n", what, count, i);
            exit(1);
        }
        out[i] = v;
    }
    return out;
}

int main(void) {
    char name[256];
    if (scanf("%255s", name) != 1) {
        fprintf(stderr, "mma_check: no instruction name\n");
        return 1;
    }
    const API(instruction) *ins = API(find)(name);
    if (!ins) {
        fprintf(stderr, "mma_check: no instruction `%s`\n", name);
        return 1;
    }
    size_t m = ins->m, n = ins->n, k = ins->k, s = ins->scale_count;
    uint64_t *A = read_hex(m * k, "A"), *B = read_hex(k * n, "B"), *C = read_hex(m * n, "C");
    uint64_t *SA = s ? read_hex(m * s, "SA") : NULL, *SB = s ? read_hex(n * s, "SB") : NULL;
    uint64_t *D = calloc(m * n, 8);
    int rc = API(mma)(ins, A, B, C, SA, SB, D);
    if (rc != MMAC_OK) {
        fprintf(stderr, "mma_check: mma returned %d (%s)\n", rc, API(error)(rc));
        return 1;
    }
    for (size_t i = 0; i < m * n; i++) printf("%llx\n", (unsigned long long)D[i]);
    return 0;
}
