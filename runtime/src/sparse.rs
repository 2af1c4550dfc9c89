//! Sparse instructions at the dot product: the operands a user gives (a's stored elements,
//! their columns, all K of b), random ones in the pattern, the dense arithmetic's inputs
//! lifted to them (for `mmac gen`), their exact value, and the search for an input on
//! which two sparse instructions differ: what tells the two hypotheses of what the unit
//! does with the selected elements apart (`over selected` vs `over columns`; `mmac diff`,
//! `mmac gen`).

use crate::inputs::{Input, hex};
use mmac_compiler::Checked;
use mmac_compiler::engine::{Choice, Engine, Operands};
use mmac_compiler::exact::Dyadic;
use mmac_compiler::format::{Decoded, Format};
use mmac_compiler::ir::{Instruction, Sparsity, Walk};
use mmac_compiler::random::Rng;

/// One dot product of a sparse instruction as its user gives it: `input.a` holds a's
/// stored elements, `input.b` all K elements of b, `positions` the column of each stored
/// element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparseInput {
    pub input: Input,
    pub positions: Vec<u64>,
}

/// `kept` of every `group` units (columns, or adjacent pairs of columns with `pairs`),
/// drawn uniformly: their columns in increasing order.
pub fn random_positions(s: &Sparsity, columns: usize, rng: &mut Rng) -> Vec<u64> {
    let (group, unit) = (s.group as usize, if s.pairs { 2 } else { 1 });
    let span = s.span() as usize;
    let mut out = Vec::with_capacity(s.stored(columns as u32) as usize);
    for g in 0..columns / span {
        let mut units: Vec<usize> = (0..group).collect();
        // a partial Fisher-Yates shuffle picks `kept` distinct units
        for i in 0..s.kept as usize {
            let j = i + rng.below(group - i);
            units.swap(i, j);
        }
        let mut chosen = units[..s.kept as usize].to_vec();
        chosen.sort_unstable();
        for u in chosen {
            out.extend((u * unit..(u + 1) * unit).map(|c| (g * span + c) as u64));
        }
    }
    out
}

/// `dense` with the products of a group that holds more than `kept` nonzero elements of
/// a moved (a's and b's element together) to the nearest columns of groups with room:
/// the same products, most often in the same chained step, in the pattern where the
/// groups have room for them all. (Pairs are moved as they stand: not spread.)
fn spread(s: &Sparsity, dense: &Input, is_zero: impl Fn(u64) -> bool) -> Input {
    let mut out = dense.clone();
    if s.pairs {
        return out;
    }
    let (span, kept) = (s.span() as usize, s.kept as usize);
    let groups = out.a.len() / span;
    let count = |a: &[u64], g: usize| {
        (g * span..(g + 1) * span)
            .filter(|&j| !is_zero(a[j]))
            .count()
    };
    for g in 0..groups {
        while count(&out.a, g) > kept {
            let j = (g * span..(g + 1) * span)
                .rev()
                .find(|&j| !is_zero(out.a[j]))
                .unwrap_or(g * span);
            // the nearest group with room, later ones first
            let room = (1..groups)
                .flat_map(|d| [g + d, g.wrapping_sub(d)])
                .filter(|&h| h < groups)
                .find(|&h| count(&out.a, h) < kept);
            let Some(h) = room else { return out };
            let q = (h * span..(h + 1) * span)
                .find(|&q| is_zero(out.a[q]))
                .unwrap_or(h * span);
            out.a.swap(j, q);
            out.b.swap(j, q);
        }
    }
    out
}

/// The first `kept` units of every group: columns 0, 1, 4, 5, ... for 2 of 4.
pub fn first_positions(s: &Sparsity, columns: usize) -> Vec<u64> {
    let span = s.span() as usize;
    (0..columns as u64)
        .filter(|&c| (c as usize % span) < s.kept_columns() as usize)
        .collect()
}

impl SparseInput {
    /// Random finite operands in the instruction's pattern: uniform encodings, or (one
    /// input in four) a and b of the format's smallest magnitudes, so that whole chained
    /// steps of products lie below the zero exponents.
    pub fn random(inst: &Instruction, rng: &mut Rng) -> SparseInput {
        let ar = &inst.arithmetic;
        let s = inst.sparsity.expect("a sparse instruction");
        let scale = ar.scale.as_ref().map(|x| &x.format);
        let tiny = rng.percent(25);
        let mut draw = |f: &Format, n: usize| {
            (0..n)
                .map(|_| match (tiny, f.as_float()) {
                    // the low code bits and the sign: subnormals and the smallest normals
                    (true, Some(ff)) => {
                        let x = rng.next_u64();
                        let low = x & ((1 << (ff.mantissa_bits + 1)) - 1);
                        let sign = match ff.signed {
                            true => (x >> 63) << (ff.code_bits() - 1),
                            false => 0,
                        };
                        let code = (sign | low) << ff.ignored_low_bits;
                        match f.decode(code) {
                            Decoded::Finite(_) => code,
                            _ => rng.finite(f),
                        }
                    }
                    _ => rng.finite(f),
                })
                .collect::<Vec<_>>()
        };
        let input = Input {
            c: draw(&ar.c, 1)[0],
            a: draw(&ar.a, inst.stored()),
            b: draw(&ar.b, inst.columns()),
            sa: scale.map_or(vec![], |f| draw(f, inst.scale_count())),
            sb: scale.map_or(vec![], |f| draw(f, inst.scale_count())),
        };
        SparseInput {
            input,
            positions: random_positions(&s, inst.columns(), rng),
        }
    }

    /// An input of the dense arithmetic `checked` runs, as the sparse operands that give
    /// it those operands, with random positions (see [`SparseInput::lift_at`]).
    /// For `over columns`, an A that already fits the pattern keeps every element (its
    /// positions are the compressed row's), so the input does not change.
    pub fn lift(checked: Checked, dense: &Input, rng: &mut Rng) -> SparseInput {
        let inst = checked.instruction();
        let s = inst.sparsity.expect("a sparse instruction");
        if s.walk == Walk::Columns {
            let zero = |x| mmac_compiler::sparse::is_zero(&inst.arithmetic.a, x);
            let spread = spread(&s, dense, zero);
            let (mut stored, mut positions) = (vec![], vec![]);
            if mmac_compiler::sparse::compress(&s, &spread.a, zero, &mut stored, &mut positions)
                .is_ok()
            {
                return SparseInput::lift_at(checked, &spread, positions, rng);
            }
        }
        let positions = random_positions(&s, inst.columns(), rng);
        SparseInput::lift_at(checked, dense, positions, rng)
    }

    /// An input of the dense arithmetic `checked` runs, as sparse operands with the
    /// stored elements at `positions`: `over selected`, a as it is and b's elements
    /// placed at the positions (b's other rows random: they are not read); `over
    /// columns`, a's elements at the positions (the others are left out: the input
    /// changes unless they were zero) and b as it is.
    pub fn lift_at(
        checked: Checked,
        dense: &Input,
        positions: Vec<u64>,
        rng: &mut Rng,
    ) -> SparseInput {
        let inst = checked.instruction();
        let s = inst.sparsity.expect("a sparse instruction");
        let mut input = dense.clone();
        match s.walk {
            Walk::Selected => {
                input.b = (0..inst.columns())
                    .map(|_| rng.finite(&inst.arithmetic.b))
                    .collect();
                for (&p, &x) in positions.iter().zip(&dense.b) {
                    input.b[p as usize] = x;
                }
            }
            Walk::Columns => {
                input.a = positions.iter().map(|&p| dense.a[p as usize]).collect();
            }
        }
        SparseInput { input, positions }
    }

    /// The operands of one dot product.
    pub fn operands(&self) -> Operands<'_> {
        self.input.operands()
    }

    /// The input as `mmac run` arguments (`--meta` with the positions).
    pub fn run_arguments(&self, inst: &Instruction) -> String {
        let ar = &inst.arithmetic;
        let list =
            |f: &Format, v: &[u64]| v.iter().map(|&x| hex(f, x)).collect::<Vec<_>>().join(",");
        let mut s = format!(
            "--c {} --a {} --b {}",
            hex(&ar.c, self.input.c),
            list(&ar.a, &self.input.a),
            list(&ar.b, &self.input.b)
        );
        if let Some(sc) = &ar.scale {
            s.push_str(&format!(
                " --sa {} --sb {}",
                list(&sc.format, &self.input.sa),
                list(&sc.format, &self.input.sb)
            ));
        }
        let meta: Vec<String> = self.positions.iter().map(u64::to_string).collect();
        s.push_str(&format!(" --meta {}", meta.join(",")));
        s
    }

    /// The exact `c + sum a[i] * b[positions[i]]` (scales included), or `None` when an
    /// input is not finite.
    pub fn exact(&self, inst: &Instruction) -> Option<Dyadic> {
        let ar = &inst.arithmetic;
        let value = |f: &Format, raw: u64| match f.decode(raw) {
            Decoded::Finite(x) => Some(x.value()),
            _ => None,
        };
        let mut sum = value(&ar.c, self.input.c)?;
        for (&x, &p) in self.input.a.iter().zip(&self.positions) {
            let mut prod = value(&ar.a, x)?.mul(&value(&ar.b, self.input.b[p as usize])?);
            if let (Some(sc), Some(block)) = (&ar.scale, inst.scale_block()) {
                let j = p as usize / block as usize;
                prod = prod
                    .mul(&value(&sc.format, self.input.sa[j])?)
                    .mul(&value(&sc.format, self.input.sb[j])?);
            }
            sum = sum.add(&prod);
        }
        Some(sum)
    }
}

/// Two sparse instructions that disagree on an input, confirmed by the interpreter.
#[derive(Clone, Debug)]
pub struct SparseWitness {
    pub input: SparseInput,
    pub left: u64,
    pub right: u64,
}

/// Do `x` and `y` disagree on `d` (two NaNs agree when either side's NaN rule lets any
/// NaN stand for another)?
fn differ(x: &Instruction, y: &Instruction, l: u64, r: u64) -> bool {
    let nan_any = crate::witness::nan_any(x) || crate::witness::nan_any(y);
    !crate::conformance::matches(&x.arithmetic.d, l, r, nan_any)
}

/// Look for an input on which the sparse instructions `x` and `y` (the same operands)
/// differ: first the structured candidates of their dense arithmetic (alignment cuts,
/// ties, carries, zero exponents, chain and group boundaries: [`crate::corners`]), each
/// lifted into the pattern at the first columns of every group and at the last; then
/// `trials` random inputs in the pattern; run in batches through both JIT kernels, a
/// difference confirmed by the interpreter before it is returned. Also returns the
/// inputs tried (structured and random).
pub fn search(
    x: Checked,
    y: Checked,
    trials: usize,
    seed: u64,
) -> Result<(Option<SparseWitness>, usize), String> {
    let (ex, ey) = (Engine::new(x, Choice::QUICK), Engine::new(y, Choice::QUICK));
    let inst = x.instruction();
    let mut rng = Rng::new(seed);
    let structured = structured_candidates(x, y, &mut rng);
    let mut tried = 0;
    for batch in structured.chunks(512) {
        if let Some((w, at)) = first_difference(x, y, (&ex, &ey), batch)? {
            return Ok((Some(w), tried + at + 1));
        }
        tried += batch.len();
    }
    let mut random = 0;
    while random < trials {
        let n = (trials - random).min(512);
        let batch: Vec<SparseInput> = (0..n)
            .map(|_| SparseInput::random(inst, &mut rng))
            .collect();
        if let Some((w, at)) = first_difference(x, y, (&ex, &ey), &batch)? {
            return Ok((Some(w), tried + at + 1));
        }
        tried += n;
        random += n;
    }
    Ok((None, tried))
}

/// The structured candidates of `x` and `y`'s dense arithmetic ([`crate::corners`]) as
/// sparse inputs: each at the first columns of every group, and at the last (b's unread
/// elements drawn at random).
fn structured_candidates(x: Checked, y: Checked, rng: &mut Rng) -> Vec<SparseInput> {
    let (xi, yi) = (x.instruction(), y.instruction());
    let Some(s) = xi.sparsity else {
        return vec![];
    };
    let focus = crate::corners::Focus::of(&[xi, yi]);
    let first = first_positions(&s, xi.columns());
    // the last kept units of every group: every pattern keeps half of a group, so they
    // are the first moved up by half the span
    let half = s.span() as u64 / 2;
    let last: Vec<u64> = first.iter().map(|&p| p + half).collect();
    let mut out = vec![];
    for (_, dense) in crate::corners::structured(xi, &focus) {
        for positions in [&first, &last] {
            out.push(SparseInput::lift_at(x, &dense, positions.clone(), rng));
        }
    }
    out
}

/// The first of `batch` on which `x` and `y` differ (on their kernels `engines`, then
/// confirmed by the interpreter), shrunk, and its index.
fn first_difference(
    x: Checked,
    y: Checked,
    (ex, ey): (&Engine, &Engine),
    batch: &[SparseInput],
) -> Result<Option<(SparseWitness, usize)>, String> {
    let inst = x.instruction();
    let n = batch.len();
    let cat = |part: fn(&SparseInput) -> &[u64]| -> Vec<u64> {
        batch.iter().flat_map(|i| part(i).iter().copied()).collect()
    };
    let c: Vec<u64> = batch.iter().map(|i| i.input.c).collect();
    let (a, b) = (cat(|i| &i.input.a), cat(|i| &i.input.b));
    let (sa, sb, p) = (
        cat(|i| &i.input.sa),
        cat(|i| &i.input.sb),
        cat(|i| &i.positions),
    );
    let (stored, columns, s) = (x.stored(), x.columns(), x.scale_count());
    let run = |e: &Engine| -> Result<Vec<u64>, String> {
        let mut d = vec![0; n];
        e.sparse_batch_strided(
            &c,
            (&a, stored),
            (&b, columns),
            (&sa, s),
            (&sb, s),
            (&p, stored),
            &mut d,
        )
        .map_err(|e| e.to_string())?;
        Ok(d)
    };
    let (dx, dy) = (run(ex)?, run(ey)?);
    for (i, w) in batch.iter().enumerate() {
        if !differ(inst, y.instruction(), dx[i], dy[i]) {
            continue;
        }
        let ops = w.operands();
        let left = Engine::interpreter(x)
            .sparse_dot(&ops, &w.positions)
            .map_err(|e| e.to_string())?;
        let right = Engine::interpreter(y)
            .sparse_dot(&ops, &w.positions)
            .map_err(|e| e.to_string())?;
        if differ(inst, y.instruction(), left, right) {
            let w = SparseWitness {
                input: w.clone(),
                left,
                right,
            };
            return Ok(Some((shrink(x, y, w), i)));
        }
    }
    Ok(None)
}

/// A simpler witness of the same difference, on the interpreter: each of a's stored
/// elements set to +0 where the difference stays, then c, then every element of b that
/// meets no nonzero element of a (the fewest nonzero products to capture).
fn shrink(x: Checked, y: Checked, mut w: SparseWitness) -> SparseWitness {
    let inst = x.instruction();
    let ar = &inst.arithmetic;
    let run = |i: &SparseInput| -> Option<(u64, u64)> {
        let ops = i.operands();
        let l = Engine::interpreter(x).sparse_dot(&ops, &i.positions).ok()?;
        let r = Engine::interpreter(y).sparse_dot(&ops, &i.positions).ok()?;
        differ(inst, y.instruction(), l, r).then_some((l, r))
    };
    let attempt = |w: &mut SparseWitness, change: &dyn Fn(&mut SparseInput)| {
        let mut t = w.input.clone();
        change(&mut t);
        if t != w.input
            && let Some((l, r)) = run(&t)
        {
            *w = SparseWitness {
                input: t,
                left: l,
                right: r,
            };
        }
    };
    let (za, zb, zc) = (
        ar.a.positive_zero(),
        ar.b.positive_zero(),
        ar.c.positive_zero(),
    );
    for i in 0..w.input.input.a.len() {
        attempt(&mut w, &|t| t.input.a[i] = za);
    }
    attempt(&mut w, &|t| t.input.c = zc);
    let used: Vec<usize> = w
        .input
        .positions
        .iter()
        .zip(&w.input.input.a)
        .filter(|&(_, &x)| !mmac_compiler::sparse::is_zero(&ar.a, x))
        .map(|(&p, _)| p as usize)
        .collect();
    for j in 0..w.input.input.b.len() {
        if !used.contains(&j) {
            attempt(&mut w, &|t| t.input.b[j] = zb);
        }
    }
    w
}

/// The other hypothesis of a sparse instruction: the same instruction with its pipeline
/// run over the other walk, checked again from its file (`None` for a dense instruction
/// or one without a file).
pub fn other_walk(checked: Checked) -> Option<mmac_compiler::checked::CheckedInstruction> {
    let s = checked.sparsity()?;
    let other = match s.walk {
        Walk::Selected => Walk::Columns,
        Walk::Columns => Walk::Selected,
    };
    checked.walked(other)?.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_positions_keep_the_pattern() {
        let s = Sparsity {
            kept: 2,
            group: 4,
            pairs: false,
            walk: Walk::Selected,
        };
        let mut rng = Rng::new(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let p = random_positions(&s, 8, &mut rng);
            mmac_compiler::sparse::check(&s, 8, &p).unwrap();
            seen.insert(p[..2].to_vec());
        }
        // all six choices of 2 of 4 columns turn up
        assert_eq!(seen.len(), 6);
        let pairs = Sparsity { pairs: true, ..s };
        for _ in 0..50 {
            let p = random_positions(&pairs, 16, &mut rng);
            mmac_compiler::sparse::check(&pairs, 16, &p).unwrap();
        }
    }
}
