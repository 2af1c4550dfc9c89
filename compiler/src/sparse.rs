//! Structured sparsity at the dot product (`sparse a 2 of 4`): the positions of A's stored
//! elements checked against the instruction's pattern, and the operands of the dense
//! arithmetic built from them: B's selected rows (`over selected`), or A expanded with +0
//! at the unselected columns (`over columns`). Both engines run a sparse instruction
//! through these (see [`crate::engine::Engine::sparse_dot`]), so it is as exact as its
//! dense arithmetic.

use crate::checked::Checked;
use crate::format::{Decoded, Format};
use crate::ir::{Sparsity, Walk};

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
/// [`select_fn`] for how).
pub fn fits(s: &Sparsity, columns: usize, positions: &[u64]) -> bool {
    positions.len() == s.stored(columns as u32) as usize
        && match pattern(s) {
            Some((1, 2, false)) => pass::<1, 2, false>(positions, None),
            Some((2, 4, false)) => pass::<2, 4, false>(positions, None),
            Some((4, 8, true)) => pass::<4, 8, true>(positions, None),
            _ => false,
        }
}

/// A record's selected elements for the engines' batches: `f(b, positions, out)` puts
/// the elements of `b` (a record's `columns`) at `positions` (its `stored`) into `out`
/// (`stored` long), checking the positions against `s` in the same pass, and returns
/// whether they fit it (if not, `out` is meaningless and [`check`] says why).
///
/// One pass with no early exit, monomorphised per pattern. With exactly `kept` elements in
/// every group (what the count and at most `kept` per group imply), element i lies in
/// group g = i / kept_columns: its offset in the group, position - g * span, must be below
/// the span (wrapping, a position below the group is a huge offset), the offsets must
/// increase, and with `pairs` element 2j + 1 is its pair partner's column + 1. The offset,
/// masked to the span, picks b's element, so a wrong position never reads outside the
/// record.
pub fn select_fn(s: &Sparsity) -> fn(&[u64], &[u64], &mut [u64]) -> bool {
    match pattern(s) {
        Some((1, 2, false)) => |b, p, out| pass::<1, 2, false>(p, Some((b, out))),
        Some((2, 4, false)) => |b, p, out| pass::<2, 4, false>(p, Some((b, out))),
        Some((4, 8, true)) => |b, p, out| pass::<4, 8, true>(p, Some((b, out))),
        _ => |_, _, _| false,
    }
}

/// The engines' patterns (those [`Sparsity::is_known`] accepts): kept columns, span, pairs.
fn pattern(s: &Sparsity) -> Option<(u32, u32, bool)> {
    s.is_known()
        .then_some((s.kept_columns(), s.span(), s.pairs))
}

/// [`select_fn`]'s pass for `KEPT` positions per group of `SPAN` columns, gathering b's
/// elements into `out` when given them. `positions` must be a whole number of groups
/// (and then b `SPAN` and out `KEPT` elements for each).
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
    let mut in_group = (usize::MAX, 0u32);
    for (i, &p) in positions.iter().enumerate() {
        if p >= columns as u64 {
            return Err(format!(
                "position {p} (element {i}) is outside the {columns} columns"
            ));
        }
        if i > 0 && p <= positions[i - 1] {
            return Err(format!(
                "positions {} then {p} (elements {} and {i}) do not increase",
                positions[i - 1],
                i - 1
            ));
        }
        if s.pairs && i % 2 == 0 && (p % 2 != 0 || positions.get(i + 1) != Some(&(p + 1))) {
            return Err(format!(
                "position {p} (element {i}) does not start a pair of adjacent columns 2j, 2j+1 stored together"
            ));
        }
        let g = p as usize / span;
        in_group = if in_group.0 == g {
            (g, in_group.1 + 1)
        } else {
            (g, 1)
        };
        if in_group.1 > s.kept_columns() {
            return Err(format!(
                "group {g} (columns {}..{}) holds more than {} elements",
                g * span,
                g * span + span - 1,
                s.kept_columns()
            ));
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
        assert!(e.contains("do not increase"), "{e}");
        let e = check(&TWO_OF_FOUR, 8, &[0, 3, 5, 8]).unwrap_err();
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
            e.contains("position 1 (element 0) does not start a pair"),
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
            assert_eq!(select_fn(pattern)(&b, p, &mut out), explained, "{p:?}");
            if explained {
                let want: Vec<u64> = p.iter().map(|&c| 1000 + c).collect();
                assert_eq!(out, want, "{pattern:?} {p:?}");
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
