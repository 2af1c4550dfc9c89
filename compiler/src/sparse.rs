//! Structured sparsity at the dot product (`sparse a 2 of 4`): the positions of A's stored
//! elements checked against the instruction's pattern, and the operands of the dense
//! arithmetic built from them: B's selected rows (`over selected`), or A expanded with +0
//! at the unselected columns (`over columns`). Both engines run a sparse instruction
//! through these (see [`crate::engine::Engine::sparse_dot`]), so it is as exact as its
//! dense arithmetic.

use crate::checked::Checked;
use crate::format::{Decoded, Format};
use crate::ir::{Instruction, Sparsity, Walk};

/// Check `positions` (the columns, of `columns`, at which a row's stored elements sit)
/// against `s`: one per stored element, strictly increasing, inside K, at most `kept` in
/// every group (of `group` columns, or of `group` adjacent pairs of columns with `pairs`,
/// where the elements come in whole pairs). The error says which position or group is
/// wrong.
pub fn check(s: &Sparsity, columns: usize, positions: &[u64]) -> Result<(), String> {
    if fits(s, columns, positions) {
        return Ok(());
    }
    explain(s, columns, positions)?;
    Err(format!("the positions break the {s} pattern"))
}

/// Do `positions` fit `s` (what [`check`] checks), without saying why not (see
/// [`build_fn`] for how).
pub fn fits(s: &Sparsity, columns: usize, positions: &[u64]) -> bool {
    positions.len() == s.stored(columns as u32) as usize
        && match pattern(s) {
            Some((1, 2, false)) => pass::<1, 2, false>(positions, None),
            Some((2, 4, false)) => pass::<2, 4, false>(positions, None),
            Some((4, 8, true)) => pass::<4, 8, true>(positions, None),
            _ => false,
        }
}

/// The dense arithmetic's operand that the positions build, for a chunk of records, as
/// the engines' batches take it: `f(from, positions, zero, out, stored)` builds, for
/// every record r of `out`, r's operand from r's elements of `from` (at `from.0[r *
/// from.1..]`) and r's `stored` positions (at `positions.0[r * positions.1..]`), checking
/// the positions against the pattern in the same pass, and returns whether every record
/// fits it (if not, `out` is meaningless and [`check`] says which record and why).
/// `over selected`: from is B (2 x `stored` columns a record) and out its `stored`
/// selected elements; `over columns`: from is A's `stored` elements and out the row of 2 x
/// `stored` columns, `zero` at every column without one.
pub type Build = fn((&[u64], usize), (&[u64], usize), u64, &mut [u64], usize) -> bool;

/// The [`Build`] of `s` (by its walk): one pass with no early exit, monomorphised per
/// pattern, with AVX-512 where the processor has it. With exactly `kept` elements in
/// every group (what the count and at most `kept` per group imply), element i lies in
/// group g = i / kept_columns: its offset in the group, position - g * span, must be below
/// the span (wrapping, a position below the group is a huge offset), the offsets must
/// increase, and with `pairs` element 2j + 1 is its pair partner's column + 1. The offset,
/// masked to the span, picks b's element (or a's column), so a wrong position never
/// reaches outside the record.
pub fn build_fn(s: &Sparsity) -> Build {
    match s.walk {
        Walk::Selected => build_for::<false>(s),
        Walk::Columns => build_for::<true>(s),
    }
}

/// [`build_fn`] for one walk.
fn build_for<const EXPAND: bool>(s: &Sparsity) -> Build {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY (each closure): the processor has AVX-512F, checked just above
        match pattern(s) {
            Some((1, 2, false)) => {
                return |f, p, z, out, n| unsafe {
                    wide::build::<1, 2, false, EXPAND>(f, p, z, out, n)
                };
            }
            Some((2, 4, false)) => {
                return |f, p, z, out, n| unsafe {
                    wide::build::<2, 4, false, EXPAND>(f, p, z, out, n)
                };
            }
            Some((4, 8, true)) => {
                return |f, p, z, out, n| unsafe {
                    wide::build::<4, 8, true, EXPAND>(f, p, z, out, n)
                };
            }
            _ => {}
        }
    }
    match pattern(s) {
        Some((1, 2, false)) => build::<1, 2, false, EXPAND>,
        Some((2, 4, false)) => build::<2, 4, false, EXPAND>,
        Some((4, 8, true)) => build::<4, 8, true, EXPAND>,
        _ => |_, _, _, _, _| false,
    }
}

/// A record's elements of a [`Build`]'s `from` and `out` for `stored` positions: A's
/// stored elements and its row of 2 x `stored` columns (`EXPAND`, over columns), or B's
/// 2 x `stored` columns and their `stored` selected elements.
fn record_lengths<const EXPAND: bool>(stored: usize) -> (usize, usize) {
    if EXPAND {
        (stored, 2 * stored)
    } else {
        (2 * stored, stored)
    }
}

/// [`build_fn`]'s portable pass: [`pass`] record by record (a record outside the slices
/// fails).
fn build<const KEPT: usize, const SPAN: usize, const PAIRS: bool, const EXPAND: bool>(
    (from, f_stride): (&[u64], usize),
    (positions, p_stride): (&[u64], usize),
    zero: u64,
    out: &mut [u64],
    stored: usize,
) -> bool {
    let (from_len, out_len) = record_lengths::<EXPAND>(stored);
    let mut fit = true;
    for (r, out) in out.chunks_exact_mut(out_len.max(1)).enumerate() {
        let (from, p) = (
            from.get(r * f_stride..r * f_stride + from_len),
            positions.get(r * p_stride..r * p_stride + stored),
        );
        let (Some(from), Some(p)) = (from, p) else {
            return false;
        };
        if EXPAND {
            // (a position that passes lies inside the row)
            let passed = pass::<KEPT, SPAN, PAIRS>(p, None);
            out.fill(zero);
            if passed {
                for (&x, &p) in from.iter().zip(p) {
                    out[p as usize] = x;
                }
            }
            fit &= passed;
        } else {
            fit &= pass::<KEPT, SPAN, PAIRS>(p, Some((from, out)));
        }
    }
    fit
}

/// The engines' patterns (those [`Sparsity::is_known`] accepts): kept columns, span, pairs.
fn pattern(s: &Sparsity) -> Option<(u32, u32, bool)> {
    s.is_known()
        .then_some((s.kept_columns(), s.span(), s.pairs))
}

/// One record's pass of [`build_fn`] for `KEPT` positions per group of `SPAN` columns,
/// gathering b's elements into `out` when given them. `positions` must be a whole number
/// of groups (and then b `SPAN` and out `KEPT` elements for each).
#[inline(always)]
fn pass<const KEPT: usize, const SPAN: usize, const PAIRS: bool>(
    positions: &[u64],
    gather: Option<(&[u64], &mut [u64])>,
) -> bool {
    let mut bad = 0u64;
    let mut first = 0u64;
    let groups = positions.chunks_exact(KEPT);
    match gather {
        Some((b, out)) => {
            let (columns, kept) = (b.chunks_exact(SPAN), out.chunks_exact_mut(KEPT));
            for ((group, columns), kept) in groups.zip(columns).zip(kept) {
                let offsets = group_offsets::<KEPT, SPAN, PAIRS>(group, first, &mut bad);
                for (o, &offset) in kept.iter_mut().zip(&offsets) {
                    *o = columns[offset as usize & (SPAN - 1)];
                }
                first += SPAN as u64;
            }
        }
        None => {
            for group in groups {
                group_offsets::<KEPT, SPAN, PAIRS>(group, first, &mut bad);
                first += SPAN as u64;
            }
        }
    }
    bad == 0
}

/// [`build_fn`] with AVX-512, eight positions at a time. Every pattern keeps half of each
/// group's columns, so eight consecutive positions (whole groups: `KEPT` divides 8) cover
/// sixteen consecutive columns, those from 16 j for block j. `over selected`: the block's
/// elements are picked from two vectors of b with one two-table permute, which reads only
/// the low four bits of each index (a position's are those of its column in the block,
/// 16 j being a multiple of 16, so a wrong position never reads outside the block). `over
/// columns`: the columns the positions name form a 16-bit mask, and a's elements are
/// expanded into its set bits in order (the positions increase): in a block that fits
/// the pattern, the first four into the low eight columns, the next four into the high
/// eight. The checks are [`group_offsets`]'s as lane
/// comparisons: the offsets from the groups' first columns increase within each group
/// (unsigned, so a position below its group wraps to a huge offset and fails against the
/// one after it, or against the span if first), the last of each group lies below the
/// span, and with pairs the second of a pair is one past the even first. A record's last
/// block, when shorter than eight positions, is masked.
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    /// [`super::build`] on AVX-512; slices that do not hold every record (or positions
    /// that are not whole groups) go to it.
    #[target_feature(enable = "avx512f")]
    pub(super) fn build<
        const KEPT: usize,
        const SPAN: usize,
        const PAIRS: bool,
        const EXPAND: bool,
    >(
        from: (&[u64], usize),
        positions: (&[u64], usize),
        zero: u64,
        out: &mut [u64],
        stored: usize,
    ) -> bool {
        let (from_len, out_len) = super::record_lengths::<EXPAND>(stored);
        // a record's elements of `from` and of `out` per position
        let (from_per, out_per) = super::record_lengths::<EXPAND>(1);
        let records = out.len() / out_len.max(1);
        let holds = |(x, stride): (&[u64], usize), len: usize| {
            records
                .checked_sub(1)
                .and_then(|last| last.checked_mul(stride))
                .and_then(|first| first.checked_add(len))
                .is_some_and(|end| end <= x.len())
        };
        if stored == 0
            || !stored.is_multiple_of(KEPT)
            || out.len() != records * out_len
            || !holds(from, from_len)
            || !holds(positions, stored)
        {
            return super::build::<KEPT, SPAN, PAIRS, EXPAND>(from, positions, zero, out, stored);
        }
        let lanes = Lanes::new::<KEPT, SPAN, PAIRS>();
        let (mut bad, sixteen, zero) = (0, _mm512_set1_epi64(16), _mm512_set1_epi64(zero as i64));
        for r in 0..records {
            // SAFETY: record r's elements of from, positions and out lie inside the slices
            // (checked above), and each block's loads and stores only its own lanes of them
            unsafe {
                let f = from.0.as_ptr().add(r * from.1);
                let p = positions.0.as_ptr().add(r * positions.1);
                let out = out.as_mut_ptr().add(r * out_len);
                let mut group_first = lanes.group_first;
                let mut start = 0;
                let block = |start: usize, valid, group_first| {
                    let at = (f.add(from_per * start), out.add(out_per * start));
                    block::<PAIRS, EXPAND>(&lanes, group_first, valid, zero, p.add(start), at)
                };
                while start + 8 <= stored {
                    bad |= block(start, 0xff, group_first);
                    group_first = _mm512_add_epi64(group_first, sixteen);
                    start += 8;
                }
                if start < stored {
                    bad |= block(start, (1 << (stored - start)) - 1, group_first);
                }
            }
        }
        bad == 0
    }

    /// The lanes' constants of a pattern.
    struct Lanes {
        /// lane i's group's first column in its block: (i / KEPT) x SPAN
        group_first: __m512i,
        /// the lanes after the first of their group
        has_previous: __mmask8,
        /// the last lane of each group
        last: __mmask8,
        /// the lanes holding the second column of a pair (with pairs)
        second_of_pair: __mmask8,
        /// lane i - 1 for every lane i (lane 0 for lane 0, which has no previous)
        previous: __m512i,
        /// the span of a group
        span: __m512i,
    }

    impl Lanes {
        #[target_feature(enable = "avx512f")]
        fn new<const KEPT: usize, const SPAN: usize, const PAIRS: bool>() -> Lanes {
            let first = |i: i64| i / KEPT as i64 * SPAN as i64;
            let lanes =
                |keep: fn(usize) -> bool| (0..8).filter(|&i| keep(i)).fold(0, |m, i| m | 1 << i);
            Lanes {
                group_first: _mm512_set_epi64(
                    first(7),
                    first(6),
                    first(5),
                    first(4),
                    first(3),
                    first(2),
                    first(1),
                    first(0),
                ),
                has_previous: lanes(|i| i % KEPT != 0),
                last: lanes(|i| i % KEPT == KEPT - 1),
                second_of_pair: if PAIRS { lanes(|i| i % 2 == 1) } else { 0 },
                previous: _mm512_set_epi64(6, 5, 4, 3, 2, 1, 0, 0),
                span: _mm512_set1_epi64(SPAN as i64),
            }
        }
    }

    /// One block of up to eight positions at `p` (lanes `valid`, the rest masked), their
    /// groups' first columns `group_first`: its part of the dense operand built from
    /// `at`'s first pointer into its second; the lanes that break the pattern.
    ///
    /// # Safety
    /// `p` must hold the valid lanes, and `at` the block's elements of from and out.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn block<const PAIRS: bool, const EXPAND: bool>(
        lanes: &Lanes,
        group_first: __m512i,
        valid: __mmask8,
        zero: __m512i,
        p: *const u64,
        at: (*const u64, *mut u64),
    ) -> __mmask8 {
        // SAFETY: the caller's promises
        unsafe {
            let p = _mm512_maskz_loadu_epi64(valid, p.cast());
            if EXPAND {
                expand(valid, p, zero, at);
            } else {
                gather(valid, p, at);
            }
            check::<PAIRS>(lanes, group_first, valid, p)
        }
    }

    /// The lanes of a block's positions `p` (lanes `valid`; their groups' first columns
    /// `group_first`) that break the pattern.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn check<const PAIRS: bool>(
        lanes: &Lanes,
        group_first: __m512i,
        valid: __mmask8,
        p: __m512i,
    ) -> __mmask8 {
        let offset = _mm512_sub_epi64(p, group_first);
        let before = _mm512_permutexvar_epi64(lanes.previous, offset);
        let mut bad = _mm512_mask_cmple_epu64_mask(valid & lanes.has_previous, offset, before)
            | _mm512_mask_cmpge_epu64_mask(valid & lanes.last, offset, lanes.span);
        if PAIRS {
            let one = _mm512_set1_epi64(1);
            let pair = _mm512_or_si512(
                _mm512_and_si512(before, one),
                _mm512_xor_si512(offset, _mm512_add_epi64(before, one)),
            );
            bad |= _mm512_mask_test_epi64_mask(valid & lanes.second_of_pair, pair, pair);
        }
        bad
    }

    /// The masks of the low and the high eight of a block's sixteen columns that hold
    /// its valid lanes' columns (two per lane).
    #[inline]
    fn column_masks(valid: __mmask8) -> (__mmask8, __mmask8) {
        if valid == 0xff {
            return (0xff, 0xff);
        }
        let columns = 2 * valid.count_ones();
        let mask = |n: u32| ((1u16 << n.min(8)) - 1) as __mmask8;
        (mask(columns), mask(columns.saturating_sub(8)))
    }

    /// `over selected`: the block's elements of b (its sixteen columns at `b`) at the
    /// positions `p` into `out`.
    ///
    /// # Safety
    /// `out` must hold the valid lanes and `b` twice as many elements.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn gather(valid: __mmask8, p: __m512i, (b, out): (*const u64, *mut u64)) {
        let (low, high) = column_masks(valid);
        // SAFETY: the masks keep the loads and the store inside the block's lanes
        unsafe {
            let b_low = _mm512_maskz_loadu_epi64(low, b.cast());
            let b_high = _mm512_maskz_loadu_epi64(high, b.add(8).cast());
            let picked = _mm512_permutex2var_epi64(b_low, p, b_high);
            _mm512_mask_storeu_epi64(out.cast(), valid, picked);
        }
    }

    /// `over columns`: the block's elements of a (at `a`) at the columns `p` of the
    /// block's row (its sixteen columns at `out`), `zero` in the others. With positions
    /// that break the pattern the row is meaningless, but no access leaves the block.
    ///
    /// # Safety
    /// `a` must hold the valid lanes and `out` twice as many elements.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn expand(valid: __mmask8, p: __m512i, zero: __m512i, (a, out): (*const u64, *mut u64)) {
        let (low, high) = column_masks(valid);
        // the columns named, as a 16-bit mask (one bit a lane, at most the lanes' count)
        let one = _mm512_set1_epi64(1);
        let bits = _mm512_maskz_sllv_epi64(valid, one, _mm512_and_si512(p, _mm512_set1_epi64(15)));
        let named = _mm512_reduce_or_epi64(bits) as u16;
        let (named_low, named_high) = (named as __mmask8, (named >> 8) as __mmask8);
        // in a block that fits the pattern, each half of its columns holds half of its
        // positions: a's first four elements go to the low eight columns, the next four to
        // the high eight
        // SAFETY: the masks keep the loads and the stores inside the block's lanes
        unsafe {
            let first = _mm512_maskz_loadu_epi64(valid & 0x0f, a.cast());
            let next = _mm512_maskz_loadu_epi64(valid >> 4, a.add(4).cast());
            let row_low = _mm512_mask_expand_epi64(zero, named_low, first);
            let row_high = _mm512_mask_expand_epi64(zero, named_high, next);
            _mm512_mask_storeu_epi64(out.cast(), low, row_low);
            _mm512_mask_storeu_epi64(out.add(8).cast(), high, row_high);
        }
    }
}

/// The offsets of a group's positions from its first column `first`, with any break of
/// the pattern ored into `bad`.
#[inline(always)]
fn group_offsets<const KEPT: usize, const SPAN: usize, const PAIRS: bool>(
    group: &[u64],
    first: u64,
    bad: &mut u64,
) -> [u64; KEPT] {
    let outside = !(SPAN as u64 - 1);
    let offsets: [u64; KEPT] = std::array::from_fn(|j| group[j].wrapping_sub(first));
    for j in 0..KEPT {
        *bad |= offsets[j] & outside;
        if j > 0 {
            // offsets below the span that do not increase wrap to a huge difference
            *bad |= offsets[j].wrapping_sub(offsets[j - 1]).wrapping_sub(1) & outside;
        }
        if PAIRS && j % 2 == 1 {
            *bad |= (offsets[j - 1] & 1) | (offsets[j] ^ offsets[j - 1].wrapping_add(1));
        }
    }
    offsets
}

/// Why `positions` do not fit `s`: the first position or group that breaks the pattern.
fn explain(s: &Sparsity, columns: usize, positions: &[u64]) -> Result<(), String> {
    let want = s.stored(columns as u32) as usize;
    if positions.len() != want {
        return Err(format!(
            "{} positions, but {s} sparsity of {columns} columns makes {want}",
            positions.len()
        ));
    }
    let span = s.span() as usize;
    let kept = s.kept_columns() as usize;
    // the group a position's element is stored for: with `kept` elements in every group
    // (the count and at most `kept` a group imply it), element i's is i / kept
    let group = |g: usize| format!("group {g} (columns {}..{})", g * span, g * span + span - 1);
    let mut in_group = (usize::MAX, 0usize);
    for (i, &p) in positions.iter().enumerate() {
        let of = group(i / kept);
        if p >= columns as u64 {
            return Err(format!(
                "{of}: position {p} (element {i}) is outside the {columns} columns"
            ));
        }
        if i > 0 && p <= positions[i - 1] {
            return Err(format!(
                "{of}: positions {} then {p} (elements {} and {i}) do not increase",
                positions[i - 1],
                i - 1
            ));
        }
        if s.pairs && i % 2 == 0 && (p % 2 != 0 || positions.get(i + 1) != Some(&(p + 1))) {
            return Err(format!(
                "{of}: position {p} (element {i}) does not start a pair of adjacent columns 2j, 2j+1 stored together"
            ));
        }
        let g = p as usize / span;
        in_group = if in_group.0 == g {
            (g, in_group.1 + 1)
        } else {
            (g, 1)
        };
        if in_group.1 > kept {
            return Err(format!("{} holds more than {kept} elements", group(g)));
        }
    }
    Ok(())
}

/// `over selected`: the elements of `b` at `positions` into `out` (b's rows that meet A's
/// stored elements; `out` as long as `positions`). `positions` must have passed [`check`].
pub fn select(b: &[u64], positions: &[u64], out: &mut [u64]) {
    for (o, &p) in out.iter_mut().zip(positions) {
        *o = b[p as usize];
    }
}

/// `over columns`: append A's row expanded to `columns` elements to `out`: `a[i]` at
/// column `positions[i]`, `zero` in every other. `positions` must have passed [`check`].
pub fn expand(a: &[u64], positions: &[u64], columns: usize, zero: u64, out: &mut Vec<u64>) {
    let at = out.len();
    out.resize(at + columns, zero);
    for (&x, &p) in a.iter().zip(positions) {
        out[at + p as usize] = x;
    }
}

/// Is `x` a zero (either sign) of `format`? What compression leaves out.
pub fn is_zero(format: &Format, x: u64) -> bool {
    matches!(format.decode(x), Decoded::Finite(f) if f.is_zero())
}

/// One record's operands of `checked`'s dense arithmetic, its positions checked: for a
/// dense instruction (no positions) a and b themselves.
pub fn dense_record(
    checked: Checked,
    a: &[u64],
    b: &[u64],
    positions: &[u64],
) -> Result<(Vec<u64>, Vec<u64>), String> {
    let Some(s) = checked.sparsity() else {
        if !positions.is_empty() {
            return Err(format!(
                "`{}` is dense and takes no positions",
                checked.name()
            ));
        }
        return Ok((a.to_vec(), b.to_vec()));
    };
    let columns = checked.columns();
    check(&s, columns, positions)?;
    for (what, got, want) in [("a", a.len(), checked.stored()), ("b", b.len(), columns)] {
        if got != want {
            return Err(format!(
                "{what} has {got} elements, but `{}` takes {want}",
                checked.name()
            ));
        }
    }
    Ok(match s.walk {
        Walk::Selected => {
            let mut kb = vec![0; positions.len()];
            select(b, positions, &mut kb);
            (a.to_vec(), kb)
        }
        Walk::Columns => {
            let mut ka = vec![];
            let zero = checked.arithmetic().a.positive_zero();
            expand(a, positions, columns, zero, &mut ka);
            (ka, b.to_vec())
        }
    })
}

/// The names a caller gives the row, the positions and padding in its errors: the CLI's
/// `--a`, `--meta`, `--pad`; Python's `a`, `meta=`, `pad=True`.
pub struct RowNames<'a> {
    pub row: &'a str,
    pub positions: &'a str,
    pub pad: &'a str,
}

/// A sparse instruction's dense row of a (`columns` elements, the pattern's zeros
/// included) compressed ([`compress`]) to its stored elements and their positions. The
/// errors (a row of another length, a group past the pattern) use the caller's `names`.
pub fn compress_row(
    inst: &Instruction,
    row: &[u64],
    names: &RowNames,
) -> Result<(Vec<u64>, Vec<u64>), String> {
    let Some(s) = &inst.sparsity else {
        return Err(format!(
            "`{}` is dense: its row of a is not compressed",
            inst.name
        ));
    };
    if row.len() != inst.columns() {
        return Err(format!(
            "{} has {} elements: `{}` takes its {} stored elements with {}, or a row of {} with {} of every {} nonzero ({} fills a shorter row with +0)",
            names.row,
            row.len(),
            inst.name,
            inst.stored(),
            names.positions,
            inst.columns(),
            s.kept,
            s.group,
            names.pad,
        ));
    }
    let (mut stored, mut positions) = (vec![], vec![]);
    let zero = |x| is_zero(&inst.arithmetic.a, x);
    compress(s, row, zero, &mut stored, &mut positions)
        .map_err(|e| format!("{}: {e}", names.row))?;
    Ok((stored, positions))
}

/// Compress a dense row of A (`columns` elements, `is_zero` telling the zeros) to its
/// stored elements and their positions: in every group, the nonzero elements (with
/// `pairs`, the pairs that hold one), and where a group has fewer than `kept`, its lowest
/// free columns (pairs). Errors name the group that
/// holds too many nonzero elements.
pub fn compress(
    s: &Sparsity,
    row: &[u64],
    is_zero: impl Fn(u64) -> bool,
    stored: &mut Vec<u64>,
    positions: &mut Vec<u64>,
) -> Result<(), String> {
    let (kept, span) = (s.kept as usize, s.span() as usize);
    let unit = if s.pairs { 2 } else { 1 };
    let what = if s.pairs {
        "pairs holding a nonzero element"
    } else {
        "nonzero elements"
    };
    for (g, cols) in row.chunks(span).enumerate() {
        // a unit (an element, or a pair) is kept when it holds a nonzero element
        let nonzero: Vec<bool> = cols
            .chunks(unit)
            .map(|u| u.iter().any(|&x| !is_zero(x)))
            .collect();
        let count = nonzero.iter().filter(|&&n| n).count();
        if count > kept {
            return Err(format!(
                "group {g} (columns {}..{}) holds {count} {what}, at most {kept}",
                g * span,
                g * span + span - 1
            ));
        }
        let mut free = kept - count;
        for (u, &n) in nonzero.iter().enumerate() {
            let take = n
                || free > 0 && {
                    free -= 1;
                    true
                };
            if take {
                for (j, &x) in cols.iter().enumerate().skip(u * unit).take(unit) {
                    stored.push(x);
                    positions.push((g * span + j) as u64);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_OF_FOUR: Sparsity = Sparsity {
        kept: 2,
        group: 4,
        pairs: false,
        walk: Walk::Selected,
    };

    #[test]
    fn positions_are_checked_against_the_pattern() {
        assert!(check(&TWO_OF_FOUR, 8, &[0, 3, 5, 6]).is_ok());
        let e = check(&TWO_OF_FOUR, 8, &[0, 1, 2, 6]).unwrap_err();
        assert!(e.contains("group 0 (columns 0..3)"), "{e}");
        let e = check(&TWO_OF_FOUR, 8, &[0, 3, 3, 6]).unwrap_err();
        assert!(
            e.contains(
                "group 1 (columns 4..7): positions 3 then 3 (elements 1 and 2) do not increase"
            ),
            "{e}"
        );
        let e = check(&TWO_OF_FOUR, 8, &[0, 3, 5, 8]).unwrap_err();
        assert!(e.contains("group 1 (columns 4..7): position 8"), "{e}");
        assert!(e.contains("outside the 8 columns"), "{e}");
        let e = check(&TWO_OF_FOUR, 8, &[0, 3, 5]).unwrap_err();
        assert!(e.contains("3 positions") && e.contains("makes 4"), "{e}");
        let half = Sparsity {
            kept: 1,
            group: 2,
            ..TWO_OF_FOUR
        };
        assert!(check(&half, 4, &[1, 2]).is_ok());
        assert!(check(&half, 4, &[0, 1]).is_err());
        let pairs = Sparsity {
            pairs: true,
            ..TWO_OF_FOUR
        };
        assert!(check(&pairs, 16, &[0, 1, 6, 7, 10, 11, 12, 13]).is_ok());
        let e = check(&pairs, 16, &[1, 2, 6, 7, 10, 11, 12, 13]).unwrap_err();
        assert!(
            e.contains("group 0 (columns 0..7): position 1 (element 0) does not start a pair"),
            "{e}"
        );
        let e = check(&pairs, 16, &[0, 1, 2, 3, 4, 5, 12, 13]).unwrap_err();
        assert!(
            e.contains("group 0 (columns 0..7) holds more than 4"),
            "{e}"
        );
    }

    /// The one-pass test and the explanation agree; where they accept, the gather picks
    /// the elements at the positions.
    fn agree(pattern: &Sparsity, columns: usize, p: &[u64]) {
        let explained = explain(pattern, columns, p).is_ok();
        assert_eq!(fits(pattern, columns, p), explained, "{pattern:?} {p:?}");
        if p.len() == pattern.stored(columns as u32) as usize {
            let b: Vec<u64> = (0..columns as u64).map(|c| 1000 + c).collect();
            let mut out = vec![0; p.len()];
            let fit = build_fn(pattern)((&b, 0), (p, 0), 0, &mut out, p.len());
            assert_eq!(fit, explained, "{p:?}");
            if explained {
                let want: Vec<u64> = p.iter().map(|&c| 1000 + c).collect();
                assert_eq!(out, want, "{pattern:?} {p:?}");
            }
            // over columns: a's elements (2000 + i) at the positions, 7 elsewhere
            let columns_walk = Sparsity {
                walk: Walk::Columns,
                ..*pattern
            };
            let a: Vec<u64> = (0..p.len() as u64).map(|i| 2000 + i).collect();
            let mut row = vec![0; columns];
            let fit = build_fn(&columns_walk)((&a, 0), (p, 0), 7, &mut row, p.len());
            assert_eq!(fit, explained, "{p:?}");
            if explained {
                let mut want = vec![7; columns];
                for (i, &c) in p.iter().enumerate() {
                    want[c as usize] = 2000 + i as u64;
                }
                assert_eq!(row, want, "{pattern:?} {p:?}");
            }
        }
    }

    /// [`agree`] on every position list of 4 elements in 8 columns (and on random ones
    /// of the other patterns, some with positions far outside).
    #[test]
    fn fits_agrees_with_the_explanation() {
        let mut all = vec![];
        for code in 0..10u64.pow(4) {
            all.push(
                (0..4)
                    .map(|d| code / 10u64.pow(d) % 10)
                    .collect::<Vec<u64>>(),
            );
        }
        for p in &all {
            agree(&TWO_OF_FOUR, 8, p);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for (pattern, columns) in [
            (
                Sparsity {
                    pairs: true,
                    ..TWO_OF_FOUR
                },
                16,
            ),
            (
                Sparsity {
                    kept: 1,
                    group: 2,
                    ..TWO_OF_FOUR
                },
                8,
            ),
        ] {
            for _ in 0..20000 {
                let n = pattern.stored(columns as u32) as usize;
                let mut p: Vec<u64> = (0..n)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if x.is_multiple_of(64) {
                            x.wrapping_neg() >> (x % 7)
                        } else {
                            x % (columns as u64 + 1)
                        }
                    })
                    .collect();
                if x.is_multiple_of(2) {
                    p.sort_unstable();
                }
                agree(&pattern, columns, &p);
            }
        }
    }

    /// The builders the engines use (AVX-512 where the processor has it) and the portable
    /// ones, for both walks, against [`select`] and [`expand`] record by record: chunks of
    /// 1 to 9 records, 1 to 5 blocks of eight positions and masked last blocks (4, 12 and
    /// 20 positions), strides of 0 and wider than a record, and in some chunks one
    /// position moved by -2 to 2, which often breaks the pattern: the result must be false
    /// whichever record breaks it.
    #[test]
    fn the_chunk_builders_agree_with_the_record_by_record_operands() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let half = Sparsity {
            kept: 1,
            group: 2,
            ..TWO_OF_FOUR
        };
        let pairs = Sparsity {
            pairs: true,
            ..TWO_OF_FOUR
        };
        let columns_walk = |s: Sparsity| Sparsity {
            walk: Walk::Columns,
            ..s
        };
        let builders: [(Sparsity, Build); 6] = [
            (TWO_OF_FOUR, build::<2, 4, false, false>),
            (half, build::<1, 2, false, false>),
            (pairs, build::<4, 8, true, false>),
            (columns_walk(TWO_OF_FOUR), build::<2, 4, false, true>),
            (columns_walk(half), build::<1, 2, false, true>),
            (columns_walk(pairs), build::<4, 8, true, true>),
        ];
        for (pattern, portable) in builders {
            let chosen = build_fn(&pattern);
            let expand_a = pattern.walk == Walk::Columns;
            for stored in [4, 8, 12, 16, 20, 40] {
                let columns = 2 * stored;
                let (from_len, out_len) = if expand_a {
                    (stored, columns)
                } else {
                    (columns, stored)
                };
                for round in 0..300 {
                    let records = 1 + next(9) as usize;
                    let (f_stride, p_stride) = match round % 3 {
                        0 => (from_len, stored),
                        1 => (from_len + 3, 0),
                        _ => (0, stored + 5),
                    };
                    let len = |stride: usize, n: usize| (records - 1) * stride + n;
                    let from: Vec<u64> = (0..len(f_stride, from_len))
                        .map(|_| next(1 << 40))
                        .collect();
                    let mut p = vec![0; len(p_stride, stored)];
                    for r in 0..records {
                        let mut rng = crate::random::Rng::new(next(u64::MAX));
                        let row = random_positions(&pattern, columns, &mut rng);
                        let at = r * p_stride;
                        p[at..at + stored].copy_from_slice(&row);
                    }
                    if round % 3 == 2 && next(3) == 0 {
                        // one position moved: often out of the pattern, sometimes not
                        let i = next(p.len() as u64) as usize;
                        p[i] = p[i].wrapping_add(next(5)).wrapping_sub(2);
                    }
                    let zero = next(1 << 40);
                    let (f, pp) = ((&from[..], f_stride), (&p[..], p_stride));
                    let mut portable_out = vec![0; records * out_len];
                    let mut chosen_out = vec![0; records * out_len];
                    let fit = portable(f, pp, zero, &mut portable_out, stored);
                    assert_eq!(chosen(f, pp, zero, &mut chosen_out, stored), fit);
                    let record = |x: &[u64], stride: usize, r: usize, n: usize| {
                        x[r * stride..r * stride + n].to_vec()
                    };
                    let every = (0..records)
                        .all(|r| fits(&pattern, columns, &record(&p, p_stride, r, stored)));
                    assert_eq!(fit, every, "{pattern:?} {p:?}");
                    if !fit {
                        continue;
                    }
                    let mut want = vec![];
                    for r in 0..records {
                        let (x, pos) = (
                            record(&from, f_stride, r, from_len),
                            record(&p, p_stride, r, stored),
                        );
                        if expand_a {
                            expand(&x, &pos, columns, zero, &mut want);
                        } else {
                            let at = want.len();
                            want.resize(at + stored, 0);
                            select(&x, &pos, &mut want[at..]);
                        }
                    }
                    assert_eq!(portable_out, want, "{pattern:?} stored {stored}");
                    assert_eq!(chosen_out, want, "{pattern:?} stored {stored}");
                }
            }
        }
    }

    /// Positions that fit `s` for a row of `columns`: `kept` units (elements, or pairs)
    /// of each group, chosen at random.
    fn random_positions(s: &Sparsity, columns: usize, rng: &mut crate::random::Rng) -> Vec<u64> {
        let unit = if s.pairs { 2 } else { 1 };
        let units = s.group as usize;
        let mut out = vec![];
        for g in 0..columns / s.span() as usize {
            let mut chosen: Vec<usize> = (0..units).collect();
            while chosen.len() > s.kept as usize {
                chosen.remove(rng.below(chosen.len()));
            }
            for u in chosen {
                for j in 0..unit {
                    out.push((g * s.span() as usize + u * unit + j) as u64);
                }
            }
        }
        out
    }

    #[test]
    fn selected_gathers_b_and_columns_expands_a() {
        let (a, b, pos) = (
            [7, 8, 9, 10],
            [20, 21, 22, 23, 24, 25, 26, 27],
            [1, 2, 4, 7],
        );
        let mut x = vec![0; 4];
        select(&b, &pos, &mut x);
        assert_eq!(x, [21, 22, 24, 27]);
        let mut x = vec![];
        expand(&a, &pos, 8, 99, &mut x);
        assert_eq!(x, [99, 7, 8, 99, 9, 99, 99, 10]);
    }

    #[test]
    fn compression_keeps_the_nonzero_elements_and_fills_with_the_lowest_free_columns() {
        let (mut st, mut pos) = (vec![], vec![]);
        compress(
            &TWO_OF_FOUR,
            &[0, 5, 0, 0, 1, 0, 2, 0],
            |x| x == 0,
            &mut st,
            &mut pos,
        )
        .unwrap();
        assert_eq!(st, [0, 5, 1, 2]);
        assert_eq!(pos, [0, 1, 4, 6]);
        let (mut st, mut pos) = (vec![], vec![]);
        let e = compress(
            &TWO_OF_FOUR,
            &[0, 0, 0, 0, 1, 2, 3, 0],
            |x| x == 0,
            &mut st,
            &mut pos,
        )
        .unwrap_err();
        assert!(e.contains("group 1 (columns 4..7) holds 3 nonzero"), "{e}");
        let pairs = Sparsity {
            pairs: true,
            ..TWO_OF_FOUR
        };
        let (mut st, mut pos) = (vec![], vec![]);
        compress(
            &pairs,
            &[0, 0, 0, 3, 0, 0, 0, 0],
            |x| x == 0,
            &mut st,
            &mut pos,
        )
        .unwrap();
        assert_eq!(pos, [0, 1, 2, 3]);
        assert_eq!(st, [0, 0, 0, 3]);
        let (mut st, mut pos) = (vec![], vec![]);
        let e = compress(
            &pairs,
            &[1, 0, 0, 3, 4, 0, 0, 0],
            |x| x == 0,
            &mut st,
            &mut pos,
        )
        .unwrap_err();
        assert!(
            e.contains("holds 3 pairs holding a nonzero element, at most 2"),
            "{e}"
        );
    }
}
