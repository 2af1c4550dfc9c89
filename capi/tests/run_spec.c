/* A C program that loads a spec at run time through libmmac (include/mmac.h). Built and
 * run by tests/c_api.rs.
 *
 * Usage: run_spec SPEC FILE.mmv...   runs every case of each (unscaled) vector file
 *                                    through mmac_dot, or mmac_sparse_dot for a case with
 *                                    positions (`pos=`); prints `N passed, M failed`
 *        run_spec SPEC --find NAME   prints the instruction's k, or the error text (for a
 *                                    sparse one, what mmac_dot says when called for it)
 * Exit 0 when everything passed (or the name was found), 1 otherwise, 2 when the spec
 * does not load (its diagnostics on stdout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mmac.h"

static size_t hex_list(char *s, uint64_t *out, size_t max) {
    size_t n = 0;
    while (*s && *s != ' ' && *s != '\n') {
        char *end;
        uint64_t v = strtoull(s, &end, 16);
        if (end == s) break;
        if (n < max) out[n] = v;
        n++;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    mmac_spec *spec = mmac_load(argv[1]);
    if (!spec) {
        printf("%s", mmac_last_error());
        return 2;
    }
    if (!strcmp(argv[2], "--find")) {
        const mmac_instruction *ins = mmac_find(spec, argv[3]);
        if (ins) printf("%s k=%u\n", mmac_name(ins), mmac_k(ins));
        else printf("%s\n", mmac_last_error());
        if (ins && mmac_stored(ins) != mmac_k(ins)) {
            /* a sparse instruction: the dense entry refuses it */
            static uint64_t zeros[256];
            uint64_t d = 0;
            int rc = mmac_dot(ins, 0, zeros, zeros, NULL, NULL, &d);
            printf("stored=%u mmac_dot rc=%d: %s\n", mmac_stored(ins), rc, mmac_last_error());
        }
        mmac_free(spec);
        return ins ? 0 : 1;
    }
    long passed = 0, failed = 0;
    for (int f = 2; f < argc; f++) {
        FILE *in = fopen(argv[f], "r");
        if (!in) return 2;
        static char line[1 << 16];
        char name[256];
        const mmac_instruction *ins = NULL;
        while (fgets(line, sizeof line, in)) {
            if (sscanf(line, "# instruction: %255s", name) == 1) ins = mmac_find(spec, name);
            if (strncmp(line, "c=", 2) || !ins) continue;
            uint64_t a[256], b[256], pos[256], c = 0, want = 0, got = 0;
            size_t k = mmac_k(ins), stored = mmac_stored(ins), na = 0, nb = 0, np = 0;
            for (char *p = line; p; p = strchr(p, ' '), p = p ? p + 1 : p) {
                if (!strncmp(p, "c=", 2)) c = strtoull(p + 2, NULL, 16);
                else if (!strncmp(p, "d=", 2)) want = strtoull(p + 2, NULL, 16);
                else if (!strncmp(p, "a=", 2)) na = hex_list(p + 2, a, 256);
                else if (!strncmp(p, "b=", 2)) nb = hex_list(p + 2, b, 256);
                else if (!strncmp(p, "pos=", 4)) np = hex_list(p + 4, pos, 256);
            }
            int rc = -1;
            if (np > 0 && np == stored && na == stored && nb == k) {
                uint32_t positions[256];
                for (size_t i = 0; i < np; i++) positions[i] = (uint32_t)pos[i];
                rc = mmac_sparse_dot(ins, c, a, b, NULL, NULL, positions, &got);
            } else if (np == 0 && na == k && nb == k) {
                rc = mmac_dot(ins, c, a, b, NULL, NULL, &got);
            }
            if (rc == MMAC_OK && got == want) passed++;
            else {
                if (!failed) printf("first failure: %s rc=%d got %llx want %llx\n", name, rc,
                                    (unsigned long long)got, (unsigned long long)want);
                failed++;
            }
        }
        fclose(in);
    }
    printf("%ld passed, %ld failed\n", passed, failed);
    mmac_free(spec);
    return failed != 0 || passed == 0;
}
