/* Runs .mmv conformance files through the C API of an object that `mmac compile --emit
 * obj` wrote, the way an architect's C simulator would call it. Built by tests/aot.rs:
 *
 *   cc -DMMAC_HEADER='"hopper.h"' -DMMAC_PREFIX=mmac_hopper_ check_vectors.c hopper.o -lm
 *
 * Usage: check_vectors [--hostile-fp] [--high-bits] FILE.mmv...
 *
 * Every case of every file goes through `dot`, then all of a file's cases at once through
 * `batch`; both must give the file's d. A sparse instruction's cases (`pos=`) go through
 * `sparse_dot`, and `dot` and `batch` must refuse the instruction (MMAC_ERR_SPARSE) (any NaN matches any NaN when the file says
 * `# nan: any`). --hostile-fp sets the floating-point control state an ML runtime might
 * (flush to zero, denormals are zero, round toward zero) before the calls and checks that
 * every call leaves it as it was. --high-bits sets every bit above each operand's storage
 * width (the entries ignore them, so that sign-extended integers work).
 *
 * Prints one line per file (`PASS file: n cases`, `FAIL file: ...`, `ABSENT file: name`)
 * and exits 0 when every case passed and no instruction was absent. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include MMAC_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define API(name) CAT(MMAC_PREFIX, name)
typedef API(instruction) instruction;

#if defined(__x86_64__)
#include <xmmintrin.h>
/* the control bits of MXCSR, without the sticky exception flags (bits 0-5) */
static uint64_t fp_control(void) { return _mm_getcsr() & ~0x3full; }
static void set_fp_control(uint64_t v) { _mm_setcsr((unsigned)v); }
/* FTZ (bit 15), DAZ (bit 6), round toward zero (bits 13-14 = 11) */
static const uint64_t HOSTILE = (1u << 15) | (1u << 6) | (3u << 13);
#elif defined(__aarch64__)
static uint64_t fp_control(void) {
    uint64_t v;
    __asm__ volatile("mrs %0, fpcr" : "=r"(v));
    return v;
}
static void set_fp_control(uint64_t v) { __asm__ volatile("msr fpcr, %0" : : "r"(v)); }
/* FZ (bit 24), round toward zero (RMode bits 22-23 = 11) */
static const uint64_t HOSTILE = (1u << 24) | (3u << 22);
#else
#error "check_vectors knows the floating-point control register of x86-64 and AArch64 only"
#endif

typedef struct {
    uint64_t c, d;
    uint64_t *a, *b, *sa, *sb;
    uint32_t *positions;
    int line;
} test_case;

static int hostile_fp = 0, high_bits = 0;

static uint64_t above(uint32_t bits) { return bits >= 64 ? 0 : ~0ull << bits; }

/* Parse a comma-separated list of hex values into out (at most max); returns the count. */
static size_t hex_list(const char *s, uint64_t *out, size_t max) {
    size_t n = 0;
    while (*s && *s != ' ' && *s != '\n') {
        char *end;
        uint64_t v = strtoull(s, &end, 16);
        if (end == s) return (size_t)-1;
        if (n < max) out[n] = v;
        n++;
        s = end;
        if (*s == ',') s++;
    }
    return n;
}

/* A NaN of format `name` with storage `bits`? Only the formats the vectors use with
 * `# nan: any` (IEEE-like binary formats) are needed. */
static int is_nan(const char *name, uint64_t v) {
    int e, m;
    if (!strcmp(name, "f16")) e = 5, m = 10;
    else if (!strcmp(name, "bf16")) e = 8, m = 7;
    else if (!strcmp(name, "f32")) e = 8, m = 23;
    else if (!strcmp(name, "f64")) e = 11, m = 52;
    else return 0;
    uint64_t exp = (v >> m) & ((1ull << e) - 1), man = v & ((1ull << m) - 1);
    return exp == (1ull << e) - 1 && man != 0;
}

static int same(const instruction *ins, int nan_any, uint64_t want, uint64_t got) {
    return want == got || (nan_any && is_nan(ins->d, want) && is_nan(ins->d, got));
}

static int check_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("FAIL %s: cannot open\n", path);
        return 1;
    }
    char name[256] = "", line[1 << 16];
    int nan_any = 0, lineno = 0, failures = 0;
    const instruction *ins = NULL;
    size_t n = 0, cap = 0;
    test_case *cases = NULL;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (sscanf(line, "# instruction: %255s", name) == 1) {
            ins = API(find)(name);
            if (!ins) {
                printf("ABSENT %s: %s\n", path, name);
                fclose(f);
                return 1;
            }
            continue;
        }
        if (!strncmp(line, "# nan: any", 10)) nan_any = 1;
        if (strncmp(line, "c=", 2)) continue;
        if (!ins) {
            printf("FAIL %s:%d: a case before `# instruction:`\n", path, lineno);
            fclose(f);
            return 1;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            cases = realloc(cases, cap * sizeof *cases);
        }
        test_case *t = &cases[n++];
        memset(t, 0, sizeof *t);
        t->line = lineno;
        t->a = calloc(ins->k, 8);
        t->b = calloc(ins->k, 8);
        t->positions = calloc(ins->stored + 1, 4);
        uint64_t *pos = calloc(ins->stored + 1, 8);
        size_t npos = 0;
        t->sa = calloc(ins->scale_count + 1, 8);
        t->sb = calloc(ins->scale_count + 1, 8);
        int ok = 1;
        for (char *p = line; p && *p; p = strchr(p, ' '), p = p ? p + 1 : p) {
            if (!strncmp(p, "c=", 2)) t->c = strtoull(p + 2, NULL, 16);
            else if (!strncmp(p, "d=", 2)) t->d = strtoull(p + 2, NULL, 16);
            else if (!strncmp(p, "a=", 2)) ok &= hex_list(p + 2, t->a, ins->k) == ins->stored;
            else if (!strncmp(p, "pos=", 4)) npos = hex_list(p + 4, pos, ins->stored);
            else if (!strncmp(p, "b=", 2)) ok &= hex_list(p + 2, t->b, ins->k) == ins->k;
            else if (!strncmp(p, "sa=", 3))
                ok &= hex_list(p + 3, t->sa, ins->scale_count) == ins->scale_count;
            else if (!strncmp(p, "sb=", 3))
                ok &= hex_list(p + 3, t->sb, ins->scale_count) == ins->scale_count;
        }
        ok &= npos == (ins->sparse_kept ? ins->stored : 0);
        for (size_t i = 0; i < npos; i++) t->positions[i] = (uint32_t)pos[i];
        free(pos);
        if (!ok) {
            printf("FAIL %s:%d: malformed case\n", path, lineno);
            fclose(f);
            return 1;
        }
        if (high_bits) {
            t->c |= above(ins->c_bits);
            for (uint32_t i = 0; i < ins->k; i++) {
                t->a[i] |= above(ins->a_bits);
                t->b[i] |= above(ins->b_bits);
            }
            for (uint32_t i = 0; i < ins->scale_count; i++) {
                t->sa[i] |= above(ins->scale_bits);
                t->sb[i] |= above(ins->scale_bits);
            }
        }
    }
    fclose(f);
    if (!ins) {
        printf("FAIL %s: no `# instruction:` line\n", path);
        return 1;
    }
    const int scaled = ins->scale_count > 0;
    uint64_t before = fp_control();
    if (hostile_fp) set_fp_control(before | HOSTILE);
    uint64_t state = fp_control();
    for (size_t i = 0; i < n; i++) {
        test_case *t = &cases[i];
        uint64_t d = 0;
        const uint64_t *tsa = scaled ? t->sa : NULL, *tsb = scaled ? t->sb : NULL;
        int rc = ins->sparse_kept
                     ? API(sparse_dot)(ins, t->c, t->a, t->b, tsa, tsb, t->positions, &d)
                     : API(dot)(ins, t->c, t->a, t->b, tsa, tsb, &d);
        if (fp_control() != state) {
            printf("FAIL %s:%d: dot changed the floating-point control state\n", path, t->line);
            failures++;
        }
        if (rc != MMAC_OK) {
            printf("FAIL %s:%d: dot returned %d (%s)\n", path, t->line, rc, API(error)(rc));
            failures++;
        } else if (!same(ins, nan_any, t->d, d)) {
            printf("FAIL %s:%d: dot gave d=%llx, the file says d=%llx\n", path, t->line,
                   (unsigned long long)d, (unsigned long long)t->d);
            failures++;
        }
    }
    /* the whole file through one batch call */
    uint64_t *c = calloc(n + 1, 8), *d = calloc(n + 1, 8);
    uint64_t *a = calloc(n * ins->k + 1, 8), *b = calloc(n * ins->k + 1, 8);
    uint64_t *sa = calloc(n * ins->scale_count + 1, 8), *sb = calloc(n * ins->scale_count + 1, 8);
    for (size_t i = 0; i < n; i++) {
        c[i] = cases[i].c;
        memcpy(a + i * ins->k, cases[i].a, ins->k * 8);
        memcpy(b + i * ins->k, cases[i].b, ins->k * 8);
        memcpy(sa + i * ins->scale_count, cases[i].sa, ins->scale_count * 8);
        memcpy(sb + i * ins->scale_count, cases[i].sb, ins->scale_count * 8);
    }
    /* no records: nothing read, but the descriptor is checked as dot checks it */
    int empty = API(batch)(ins, 0, NULL, NULL, NULL, NULL, NULL, NULL);
    int no_ins = API(batch)(NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL);
    if (empty != (ins->sparse_kept ? MMAC_ERR_SPARSE : MMAC_OK) || no_ins != MMAC_ERR_NULL) {
        printf("FAIL %s: batch of no records returned %d, and %d without a descriptor\n",
               path, empty, no_ins);
        failures++;
    }
    int rc = API(batch)(ins, n, c, a, b, scaled ? sa : NULL, scaled ? sb : NULL, d);
    if (ins->sparse_kept) {
        /* the dense entries refuse a sparse instruction */
        uint64_t one = 0;
        int rd = API(dot)(ins, c[0], a, b, scaled ? sa : NULL, scaled ? sb : NULL, &one);
        if (rc != MMAC_ERR_SPARSE || rd != MMAC_ERR_SPARSE) {
            printf("FAIL %s: batch and dot returned %d and %d for a sparse instruction\n", path,
                   rc, rd);
            failures++;
        }
        rc = MMAC_OK;
        for (size_t i = 0; i < n; i++) d[i] = cases[i].d;
    }
    if (fp_control() != state) {
        printf("FAIL %s: batch changed the floating-point control state\n", path);
        failures++;
    }
    if (rc != MMAC_OK) {
        printf("FAIL %s: batch returned %d (%s)\n", path, rc, API(error)(rc));
        failures++;
    } else {
        for (size_t i = 0; i < n; i++)
            if (!same(ins, nan_any, cases[i].d, d[i])) {
                printf("FAIL %s:%d: batch gave d=%llx, the file says d=%llx\n", path,
                       cases[i].line, (unsigned long long)d[i], (unsigned long long)cases[i].d);
                failures++;
            }
    }
    set_fp_control(before);
    for (size_t i = 0; i < n; i++) {
        free(cases[i].a), free(cases[i].b), free(cases[i].sa), free(cases[i].sb);
        free(cases[i].positions);
    }
    free(cases), free(c), free(d), free(a), free(b), free(sa), free(sb);
    if (!failures) printf("PASS %s: %zu cases\n", path, n);
    return failures != 0;
}

int main(int argc, char **argv) {
    int failed = 0, files = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--hostile-fp")) hostile_fp = 1;
        else if (!strcmp(argv[i], "--high-bits")) high_bits = 1;
        else {
            failed += check_file(argv[i]);
            files++;
        }
    }
    if (!files) {
        fprintf(stderr, "usage: check_vectors [--hostile-fp] [--high-bits] FILE.mmv...\n");
        return 2;
    }
    printf("%d of %d files failed\n", failed, files);
    return failed != 0;
}
