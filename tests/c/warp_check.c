/* The warp entry of an object (`mmac compile --emit obj`), driven by tests/aot.rs.
 *
 * stdin: an instruction name, then the register images of a, b and c as hex words
 * (fragment_lanes(ins) * fragment_words(ins, op) each). stdout: `rc N`, then d's image,
 * one hex word per line. With the argument `errors`: the entry's refusals instead, one
 * line each (`NAME rc`), for the instructions named on stdin (a sparse one, one without
 * a layout, a dense one).
 *
 * Built with -DMMAC_HEADER="arch.h" -DMMAC_PREFIX=mmac_arch_. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include MMAC_HEADER

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define API(x) CAT(MMAC_PREFIX, x)

static int read_image(uint32_t **out, size_t n) {
    *out = calloc(n ? n : 1, sizeof(uint32_t));
    if (!*out) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned int w;
        if (scanf("%x", &w) != 1) return 0;
        (*out)[i] = w;
    }
    return 1;
}

static int errors(void) {
    char sparse[256], none[256], dense[256];
    if (scanf("%255s %255s %255s", sparse, none, dense) != 3) return 2;
    uint32_t z[4096] = {0}, d[4096];
    const void *ins = API(find)(sparse);
    printf("sparse %d\n", API(warp_mma)(ins, z, z, z, NULL, 0, NULL, NULL, NULL, d));
    ins = API(find)(none);
    printf("none %d %d\n", API(warp_mma)(ins, z, z, z, NULL, 0, NULL, NULL, NULL, d),
           API(fragment_lanes)(ins));
    ins = API(find)(dense);
    printf("null %d\n", API(warp_mma)(ins, z, NULL, z, NULL, 0, NULL, NULL, NULL, d));
    printf("meta %d\n", API(warp_mma)(ins, z, z, z, z, 0, NULL, NULL, NULL, d));
    printf("selector %d\n", API(warp_mma)(ins, z, z, z, NULL, 1, NULL, NULL, NULL, d));
    printf("operand %d %d %d\n", API(fragment_words)(ins, "x"), API(fragment_words)(ins, "ab"),
           API(fragment_words)(ins, NULL));
    printf("message %s\n", API(error)(MMAC_ERR_WARP));
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "errors") == 0) return errors();
    char name[256];
    if (scanf("%255s", name) != 1) return 2;
    const API(instruction) *ins = API(find)(name);
    if (!ins) {
        fprintf(stderr, "no instruction %s\n", name);
        return 2;
    }
    int lanes = API(fragment_lanes)(ins);
    const char *ops[4] = {"a", "b", "c", "d"};
    size_t words[4];
    for (int i = 0; i < 4; i++) {
        int w = API(fragment_words)(ins, ops[i]);
        if (lanes <= 0 || w <= 0) {
            fprintf(stderr, "no layout: %d lanes, %d words of %s\n", lanes, w, ops[i]);
            return 2;
        }
        words[i] = (size_t)lanes * (size_t)w;
    }
    uint32_t *a, *b, *c;
    if (!read_image(&a, words[0]) || !read_image(&b, words[1]) || !read_image(&c, words[2])) {
        fprintf(stderr, "short input\n");
        return 2;
    }
    uint32_t *d = calloc(words[3], sizeof(uint32_t));
    int rc = API(warp_mma)(ins, a, b, c, NULL, 0, NULL, NULL, NULL, d);
    printf("rc %d\n", rc);
    if (rc == MMAC_OK)
        for (size_t i = 0; i < words[3]; i++) printf("%x\n", d[i]);
    free(a);
    free(b);
    free(c);
    free(d);
    return 0;
}
