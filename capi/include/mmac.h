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
#ifndef MMAC_ERR_LAYOUT
#define MMAC_ERR_LAYOUT  5  /* no warp fragment layout is known for the instruction */
#endif

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
uint32_t mmac_k(const mmac_instruction *ins);       /* K: elements of b per dot product */
uint32_t mmac_stored(const mmac_instruction *ins);  /* elements of a: K, or K/2 if sparse */
uint32_t mmac_scale_count(const mmac_instruction *ins);  /* per operand; 0 when unscaled */

/* One dot-product-add: *d = c + sum over k of a[i] * b[i] (scaled by sa, sb; NULL when
 * unscaled). Returns MMAC_OK or an error code; MMAC_ERR_ENGINE for a sparse instruction
 * (which takes mmac_sparse_dot). */
int mmac_dot(const mmac_instruction *ins, uint64_t c, const uint64_t *a, const uint64_t *b,
             const uint64_t *sa, const uint64_t *sb, uint64_t *d);

/* One dot-product-add of a sparse instruction (`sparse a 2 of 4`, e.g. mma.sp): a holds
 * the mmac_stored(ins) stored elements of A's row, positions[i] the column (0..K-1) at
 * which a[i] sits (strictly increasing, at most 2 in every group of 4 columns, 1 in every
 * pair for 1 of 2), b all mmac_k(ins) elements of B's column. *d is what the instruction
 * gives for the dense row those elements stand for. Positions that break the pattern, or
 * a dense instruction, give MMAC_ERR_ENGINE (mmac_last_error() says which position). */
int mmac_sparse_dot(const mmac_instruction *ins, uint64_t c, const uint64_t *a,
                    const uint64_t *b, const uint64_t *sa, const uint64_t *sb,
                    const uint32_t *positions, uint64_t *d);

/* Warp-level execution on register images, as a warp runs mma.sync (docs/layouts.md).
 *
 * Each lane of the warp (MMAC_WARP_LANES; mmac_fragment_lanes gives an instruction's)
 * holds a fragment of every operand in its registers, laid out as the vendor's ISA
 * specifies (`mmac layout FILE --instr NAME` prints where each element lives). A register
 * image is a lane-major uint32_t array: lane 0's words, then lane 1's, ..., each lane's
 * being its fragment registers r0, r1, ... in order; narrow elements fill a register from
 * the low bits up (for f16, a0 in bits 0-15 of r0, a1 in bits 16-31). A 64-bit register
 * (f64) is two consecutive words, its low 32 bits first. So an image of an operand has
 * mmac_fragment_lanes(ins) * mmac_fragment_words(ins, operand) words; wgmma's B, which
 * no thread holds, is given as its matrix (mmac_operand_words). Operands are named
 * "a", "b", "c", "d", and "meta" (a sparse instruction's metadata, PTX's operand e),
 * "sa" and "sb" (a block-scaled instruction's scale factors of A and B). The layouts
 * cover the instructions docs/layouts.md lists. The objects of `mmac compile --emit obj`
 * have the same entry (mmac_<arch>_warp_mma) for dense instructions without scale
 * factors. */
#define MMAC_WARP_LANES 32

/* Lanes of the instruction's register images (32 for a warp), or -1 when it has no known
 * layout or ins is NULL (mmac_last_error() says which). */
int mmac_fragment_lanes(const mmac_instruction *ins);
/* Registers per lane of an operand (64-bit registers counted once), or -1 when the
 * instruction has no known layout or no such operand, or ins or operand is NULL
 * (mmac_last_error() says which). */
int mmac_fragment_registers(const mmac_instruction *ins, const char *operand);
/* 32-bit words per lane of the operand's register image: its registers, twice for
 * 64-bit registers (0 for an operand that lies in memory); -1 as
 * mmac_fragment_registers. */
int mmac_fragment_words(const mmac_instruction *ins, const char *operand);
/* 32-bit words of the operand's whole image, the length mmac_warp_mma reads or writes:
 * lanes * mmac_fragment_words for a register image; for an operand that no thread holds
 * (wgmma's B, in shared memory) its matrix of encodings, column by column (element
 * (k, n) of B at word n * K + k, K-major as wgmma reads it; a 64-bit element as two
 * words, low first): rows * cols words. -1 as mmac_fragment_registers. */
int mmac_operand_words(const mmac_instruction *ins, const char *operand);

/* The whole instruction on register images: a_regs, b_regs, c_regs are read (each
 * mmac_operand_words(ins, op) words, owned by the caller), and for a sparse
 * instruction meta_regs with `selector` (mma.sp's sparsity selector: which lanes hold
 * the metadata), for a block-scaled one sa_regs and sb_regs with scale_selectors
 * {byte-id-a, thread-id-a, byte-id-b, thread-id-b} (NULL for all 0); pass NULL and 0 for
 * the operands an instruction lacks. They are unpacked into the matrices A (m x k, or a
 * sparse A's m x k/2 stored elements and the columns the metadata give them), B (k x n),
 * C (m x n) and the scale factors they hold; D = the instruction on them (bit for bit what
 * mmac_dot gives for each element), packed into d_regs (the caller's
 * mmac_operand_words(ins, "d") words; written only on success). Returns MMAC_OK,
 * MMAC_ERR_NULL, MMAC_ERR_LAYOUT (no layout is known for the instruction) or
 * MMAC_ERR_ENGINE (also for metadata codes the instruction does not define, positions
 * that break its pattern, a selector out of range, a missing or extra operand);
 * mmac_last_error() says why. */
int mmac_warp_mma(const mmac_instruction *ins, const uint32_t *a_regs, const uint32_t *b_regs,
                  const uint32_t *c_regs, const uint32_t *meta_regs, uint32_t selector,
                  const uint32_t *sa_regs, const uint32_t *sb_regs,
                  const uint32_t *scale_selectors, uint32_t *d_regs);

#ifdef __cplusplus
}
#endif

#endif /* MMAC_H */
