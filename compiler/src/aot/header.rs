//! The C header of an object: the descriptor struct (its layout checked by static
//! assertions against [`super::api::layout`]), the error codes, the entries with their
//! contracts, and a comment per instruction (name, shape, types, scale block, algorithm,
//! evidence), the absent ones with the reason.

use super::api::{ERRORS, layout};
use super::{ObjectNames, Present};
use crate::ir::Spec;
use std::fmt::Write;

pub(crate) fn write(
    spec: &Spec,
    prefix: &str,
    names: &ObjectNames,
    present: &[Present],
    absent: &[(String, String)],
) -> String {
    let guard: String = names
        .header_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    let guard = format!("MMAC_{guard}");
    let t = format!("{prefix}instruction");
    let mut h = String::new();
    let title = comment_text(spec.title.as_deref().unwrap_or(&spec.arch));
    let _ = writeln!(
        h,
        "/* {header}: the C API of {object}, compiled by mmac {version} from {source}.\n\
         \x20* {title}: {n} instructions{absent}. Do not edit: regenerate with\n\
         \x20*   mmac compile {source} --emit {emit} -o {object}\n\
         \x20*\n\
         \x20* Link:  cc main.c {object} -lm\n\
         \x20*\n\
         \x20* Every entry is exact and bit for bit the result of `mmac run` (the interpreter and\n\
         \x20* the JIT give the same bits). Operands are raw encodings in the low bits of each\n\
         \x20* uint64_t (an f16 in bits 0..15, an fp8 in bits 0..7, ...); bits above the\n\
         \x20* format's storage width are ignored, so a sign-extended integer works. Results\n\
         \x20* are written the same way, with the bits above the storage width zero.\n\
         \x20* The entries are thread-safe (they only read the descriptors) and set the IEEE\n\
         \x20* default floating-point control state (round to nearest, no flush to zero) for\n\
         \x20* the duration of a call when the caller's differs.\n\
         \x20*/",
        header = comment_text(&names.header_name),
        emit = if names.shared { "lib" } else { "obj" },
        object = comment_text(&names.object_name),
        version = env!("CARGO_PKG_VERSION"),
        source = comment_text(&names.source),
        n = present.len(),
        absent = if absent.is_empty() {
            String::new()
        } else {
            format!(" ({} absent, listed below)", absent.len())
        },
    );
    let _ = writeln!(
        h,
        "#ifndef {guard}\n#define {guard}\n\n#include <stddef.h>\n#include <stdint.h>\n\n\
         #ifdef __cplusplus\nextern \"C\" {{\n#endif\n"
    );
    // error codes, shared by every mmac header
    let _ = writeln!(
        h,
        "/* Return codes of the entries ({prefix}error gives the text). */"
    );
    // the first four are libmmac's too (mmac.h defines them under the same guard)
    let _ = writeln!(h, "#ifndef MMAC_OK");
    for (name, code, message) in &ERRORS[..4] {
        let _ = writeln!(h, "#define {name:<16} {code}  /* {message} */");
    }
    let _ = writeln!(h, "#endif");
    // then the sparse entries', libmmac's layout error, the warp entry's: a guard each
    for (guard, range) in [
        ("MMAC_ERR_SPARSE", 4..6),
        ("MMAC_ERR_LAYOUT", 6..7),
        ("MMAC_ERR_WARP", 7..9),
    ] {
        let _ = writeln!(h, "#ifndef {guard}");
        for (name, code, message) in &ERRORS[range] {
            let _ = writeln!(h, "#define {name:<16} {code}  /* {message} */");
        }
        let _ = writeln!(h, "#endif");
    }
    let _ = writeln!(h);

    let _ = writeln!(
        h,
        "/* One instruction. Read the public fields; the private ones are the object's own. */\n\
         typedef struct {t} {{\n\
         \x20   const char *name;       /* the instruction's name, e.g. \"mma.m16n8k16.f32.f16.f16.f32\" */\n\
         \x20   const char *arch;       /* \"{arch}\" */\n\
         \x20   uint32_t m, n, k;       /* shape: D (m x n) = A (m x k) * B (k x n) + C */\n\
         \x20   uint32_t scale_block;   /* columns of k per scale factor; 0 when unscaled */\n\
         \x20   const char *a, *b, *c, *d;  /* format names, e.g. \"f16\", \"e4m3\" */\n\
         \x20   const char *scale;      /* the scale factors' format; NULL when unscaled */\n\
         \x20   uint32_t a_bits, b_bits, c_bits, d_bits;  /* storage bits of one encoding */\n\
         \x20   uint32_t scale_bits;    /* storage bits of a scale factor; 0 when unscaled */\n\
         \x20   uint32_t scale_count;   /* scale factors per dot product and operand: k / scale_block */\n\
         \x20   const char *algorithm;  /* the pipeline, e.g. \"t_fdpa\" */\n\
         \x20   const char *evidence;   /* what pins it: \"model\", \"silicon\", \"assumption\", ... */\n\
         \x20   uint32_t stored;        /* elements of a per dot product: k, or a sparse A's stored ones */\n\
         \x20   uint8_t sparse_kept, sparse_group, sparse_pairs, sparse_over_columns;\n\
         \x20                           /* a sparse A (`sparse a 2 of 4`): 2, 4, 0, 0; all 0 when dense */\n\
         \x20   const void *kernel_[2]; /* private */\n\
         \x20   uint64_t zero_;         /* private */\n\
         \x20   uint32_t sparse_[4];    /* private */\n\
         \x20   const void *warp_;      /* private */\n\
         }} {t};\n",
        arch = spec.arch,
    );
    let _ = writeln!(
        h,
        "#ifdef __cplusplus\n#define {p}STATIC_ASSERT static_assert\n#else\n\
         #define {p}STATIC_ASSERT _Static_assert\n#endif\n\
         {p}STATIC_ASSERT(sizeof(void *) == 8, \"{header} is for 64-bit hosts\");\n\
         {p}STATIC_ASSERT(sizeof({t}) == {size}, \"layout of {t}\");\n\
         {p}STATIC_ASSERT(offsetof({t}, k) == {k}, \"layout of {t}\");\n\
         {p}STATIC_ASSERT(offsetof({t}, scale_count) == {sc}, \"layout of {t}\");\n\
         {p}STATIC_ASSERT(offsetof({t}, evidence) == {ev}, \"layout of {t}\");\n\
         {p}STATIC_ASSERT(offsetof({t}, stored) == {st}, \"layout of {t}\");\n\
         {p}STATIC_ASSERT(offsetof({t}, sparse_over_columns) == {oc}, \"layout of {t}\");\n\
         #undef {p}STATIC_ASSERT\n",
        p = prefix.to_uppercase(),
        header = names.header_name,
        size = layout::SIZE,
        k = layout::K,
        sc = layout::SCALE_COUNT,
        ev = layout::EVIDENCE,
        st = layout::STORED,
        oc = layout::SPARSE_OVER_COLUMNS,
    );
    entries(&mut h, &t, prefix);
    let _ = writeln!(h, "/* Instructions ({}):", present.len());
    for p in present {
        let ar = &p.inst.arithmetic;
        let scale = ar.scale.as_ref().map_or(String::new(), |s| {
            let block = p.inst.scale_block().unwrap_or(s.block);
            format!(", scale {} per {block} k", s.format.name)
        });
        let scale = match p.inst.sparsity {
            Some(sp) => format!("{scale}, sparse a {sp} over {}", sp.walk.keyword()),
            None => scale,
        };
        let _ = writeln!(
            h,
            " *   {}\n *       m{}n{}k{}, a={} b={} c={} d={}{scale}; {}; evidence {}",
            comment_text(&p.inst.name),
            p.inst.m,
            p.inst.n,
            p.inst.columns(),
            ar.a.name,
            ar.b.name,
            ar.c.name,
            ar.d.name,
            comment_text(super::algorithm(p.inst)),
            comment_text(&p.inst.provenance.evidence_words()),
        );
    }
    if !absent.is_empty() {
        let _ = writeln!(
            h,
            " *\n * Absent ({}): {prefix}find returns NULL for these.",
            absent.len()
        );
        for (name, why) in absent {
            let _ = writeln!(
                h,
                " *   {}\n *       {}",
                comment_text(name),
                comment_text(why)
            );
        }
    }
    let _ = writeln!(h, " */\n");
    let _ = writeln!(h, "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */");
    h
}

/// The declarations of the exported entries, with their contracts.
fn entries(h: &mut String, t: &str, prefix: &str) {
    let _ = writeln!(
        h,
        "/* The instruction called `name`, or NULL if the object has none (see the list below). */\n\
         const {t} *{prefix}find(const char *name);\n\n\
         /* The number of instructions, and the i-th (NULL when i >= count). */\n\
         size_t {prefix}count(void);\n\
         const {t} *{prefix}at(size_t i);\n\n\
         /* One dot-product-add: *d = c + sum over k of a[i] * b[i] (scaled by sa, sb).\n\
         \x20* a and b hold ins->k encodings; sa and sb ins->scale_count scale factors (NULL when\n\
         \x20* unscaled). Returns MMAC_OK, MMAC_ERR_NULL or MMAC_ERR_SCALES (MMAC_ERR_SPARSE for a\n\
         \x20* sparse instruction, which takes sparse_dot; so do batch and mma). */\n\
         int {prefix}dot(const {t} *ins, uint64_t c, const uint64_t *a, const uint64_t *b,\n\
         \x20               const uint64_t *sa, const uint64_t *sb, uint64_t *d);\n\n\
         /* n independent dot products: record i reads c[i], a + i*k, b + i*k, sa + i*scale_count,\n\
         \x20* sb + i*scale_count and writes d[i]. n = 0 reads no record (the operands may be NULL)\n\
         \x20* and returns MMAC_OK; ins is checked as dot checks it, whatever n is. */\n\
         int {prefix}batch(const {t} *ins, size_t n, const uint64_t *c, const uint64_t *a,\n\
         \x20                 const uint64_t *b, const uint64_t *sa, const uint64_t *sb, uint64_t *d);\n\n\
         /* One whole instruction, row-major: A is m x k, B is k x n, C and D are m x n;\n\
         \x20* sa holds each row of A's scale factors (m x scale_count), sb each column of B's\n\
         \x20* (n x scale_count). D[i][j] = dot(C[i][j], row i of A, column j of B). Allocates\n\
         \x20* n*k*8 bytes (malloc): may return MMAC_ERR_NOMEM. */\n\
         int {prefix}mma(const {t} *ins, const uint64_t *A, const uint64_t *B, const uint64_t *C,\n\
         \x20               const uint64_t *sa, const uint64_t *sb, uint64_t *D);\n\n\
         /* One dot-product-add of a sparse instruction (ins->sparse_kept != 0, e.g. mma.sp):\n\
         \x20* a holds the ins->stored stored elements of A's row, positions[i] the column\n\
         \x20* (0 .. k-1) at which a[i] sits, b all ins->k elements of B's column. Of every group\n\
         \x20* of sparse_group columns (pairs of columns with sparse_pairs), sparse_kept hold an\n\
         \x20* element: positions[i] lies in group i / sparse_kept (i / (2 * sparse_kept) for\n\
         \x20* pairs), increasing within it, a pair's two columns adjacent. *d is what the\n\
         \x20* instruction gives for the dense row those elements stand for. Allocates k*8 bytes\n\
         \x20* (malloc). Returns MMAC_OK, MMAC_ERR_NULL, MMAC_ERR_SCALES, MMAC_ERR_NOMEM,\n\
         \x20* MMAC_ERR_PATTERN (positions out of the pattern) or MMAC_ERR_SPARSE (a dense\n\
         \x20* instruction). */\n\
         int {prefix}sparse_dot(const {t} *ins, uint64_t c, const uint64_t *a, const uint64_t *b,\n\
         \x20                      const uint64_t *sa, const uint64_t *sb, const uint32_t *positions,\n\
         \x20                      uint64_t *d);\n\n\
         /* Warp-level execution on register images, as a warp runs mma.sync (libmmac's\n\
         \x20* mmac_warp_mma, whose header documents the images: lane-major uint32_t words, a\n\
         \x20* lane's registers r0, r1, ... in order, narrow elements from the low bits up, a\n\
         \x20* 64-bit register as two words, low first; `mmac layout` prints each instruction's\n\
         \x20* layout). The images of a, b, c and d have fragment_lanes(ins) *\n\
         \x20* fragment_words(ins, \"a\") ... words. The object runs dense instructions without\n\
         \x20* scale factors: meta_regs, sa_regs and sb_regs must be NULL and selector 0\n\
         \x20* (MMAC_ERR_WARP otherwise; libmmac runs sparse and block-scaled ones);\n\
         \x20* scale_selectors is not read. Allocates the matrices (malloc). Returns MMAC_OK,\n\
         \x20* MMAC_ERR_NULL, MMAC_ERR_LAYOUT (no register layout of every operand: none known,\n\
         \x20* or an operand in shared memory, as wgmma's B), MMAC_ERR_WARP, MMAC_ERR_NOMEM\n\
         \x20* or MMAC_ERR_REGISTERS (lanes holding copies of an element disagree). */\n\
         int {prefix}warp_mma(const {t} *ins, const uint32_t *a_regs, const uint32_t *b_regs,\n\
         \x20                    const uint32_t *c_regs, const uint32_t *meta_regs, uint32_t selector,\n\
         \x20                    const uint32_t *sa_regs, const uint32_t *sb_regs,\n\
         \x20                    const uint32_t *scale_selectors, uint32_t *d_regs);\n\
         /* Lanes of the instruction's register images, and 32-bit words per lane of operand\n\
         \x20* \"a\", \"b\", \"c\" or \"d\"; -1 for NULL, another operand, or no layout. */\n\
         int {prefix}fragment_lanes(const {t} *ins);\n\
         int {prefix}fragment_words(const {t} *ins, const char *operand);\n\n\
         /* The text of a return code. */\n\
         const char *{prefix}error(int code);\n"
    );
}

/// Text from the spec or the command line (a title, a file name) made safe inside a C
/// comment on one line: `*/` cannot end the comment (it is written `* /`, and `/*` `/ *`),
/// and control characters (a newline in a file name) are written escaped, so nothing in
/// a spec can become C code in every program that includes the header.
pub(crate) fn comment_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    // also `/*`, which some compilers warn about inside a comment
    out.replace("*/", "* /").replace("/*", "/ *")
}
