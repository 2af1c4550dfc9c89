/* libmmac: load a .mma spec at run time, JIT-compile it, and run its instructions.
 *
 *   cc main.c -I capi/include -L target/release -lmmac
 *
 * (build the library with `cargo build --release -p mmac-capi`). For a spec known ahead
 * of time, `mmac compile FILE --emit obj` gives a self-contained object instead.
 *
 * Operands are raw encodings in the low bits of each uint64_t, as with `mmac run`;
 * bits above a format's storage width are ignored. Results are exact and bit for bit
 * those of `mmac run` (the JIT, or the reference interpreter for an instruction the JIT
 * does not lower). A loaded spec may be used by many threads at once. */
#ifndef MMAC_H
#define MMAC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef MMAC_OK
#define MMAC_OK          0  /* success */
#define MMAC_ERR_NULL    1  /* a required pointer is NULL */
#define MMAC_ERR_SCALES  2  /* the instruction is block-scaled: sa and sb are required */
#define MMAC_ERR_NOMEM   3  /* out of memory */
#endif
#define MMAC_ERR_ENGINE  4  /* the engine refused the operands: mmac_last_error() says why */

typedef struct mmac_spec mmac_spec;
typedef struct mmac_instruction mmac_instruction;

/* Parse, check and compile a spec file. NULL on failure: mmac_last_error() holds the
 * rendered diagnostics (file, line, column). Free it with mmac_free. */
mmac_spec *mmac_load(const char *path);
void mmac_free(mmac_spec *spec);

/* The calling thread's last error text ("" when none). Valid until its next call. */
const char *mmac_last_error(void);

/* The instruction called `name`, or NULL (then mmac_last_error() suggests a name). */
const mmac_instruction *mmac_find(const mmac_spec *spec, const char *name);
size_t mmac_count(const mmac_spec *spec);
const mmac_instruction *mmac_at(const mmac_spec *spec, size_t i);  /* NULL when i >= count */

const char *mmac_name(const mmac_instruction *ins);
uint32_t mmac_k(const mmac_instruction *ins);
uint32_t mmac_scale_count(const mmac_instruction *ins);  /* per operand; 0 when unscaled */

/* One dot-product-add: *d = c + sum over k of a[i] * b[i] (scaled by sa, sb; NULL when
 * unscaled). Returns MMAC_OK or an error code. */
int mmac_dot(const mmac_instruction *ins, uint64_t c, const uint64_t *a, const uint64_t *b,
             const uint64_t *sa, const uint64_t *sb, uint64_t *d);

#ifdef __cplusplus
}
#endif

#endif /* MMAC_H */
