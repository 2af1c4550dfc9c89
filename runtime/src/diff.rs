//! Comparing two instructions (`mmac diff`): whether they take the same operands (and if
//! not, which operand differs), the search for an input on which they differ
//! ([`crate::witness::search`], and the probe battery of both, [`crate::probes`]), shrinking that input to a minimal witness (fewest
//! nonzero products, then the simplest values), both traces with the first stage where
//! their values diverge, and the cause in the spec's own terms: the parameters of the
//! two IRs that differ at that stage ("alignment keeps 25 bits (left) vs 24 (right)").
//! When no input is found, [`crate::observability`] may prove there is none.

use crate::conformance::matches;
use crate::inputs::{Input, encode, hex};
use crate::observability::proven_equivalent;
use crate::witness::{SearchError, SearchOptions, nan_any, search};
use mmac_compiler::Checked;
use mmac_compiler::exact::Dyadic;
use mmac_compiler::format::{Decoded, Format};
use mmac_compiler::interp;
use mmac_compiler::ir::{
    AlignNode, Fused, Instruction, NormalizeStep, Pipeline, ProductRule, Reference, RoundedOp,
    Sequential, TermSource, ZeroExponent,
};
use num_bigint::BigInt;
use num_traits::Signed;

/// Why two instructions cannot be compared: the first operand that differs, named, e.g.
/// "a is f16 (left) vs bf16 (right)" or "k is 4 (left) vs 16 (right)".
pub fn interface_difference(x: &Instruction, y: &Instruction) -> Option<String> {
    let (p, q) = (&x.arithmetic, &y.arithmetic);
    for (operand, l, r) in [
        ("a", &p.a, &q.a),
        ("b", &p.b, &q.b),
        ("c", &p.c, &q.c),
        ("d", &p.d, &q.d),
    ] {
        if l != r {
            return Some(format!(
                "{operand} is {} (left) vs {} (right)",
                l.name, r.name
            ));
        }
    }
    if x.sparsity.is_none() && y.sparsity.is_none() && p.k != q.k {
        return Some(format!("k is {} (left) vs {} (right)", p.k, q.k));
    }
    // a sparse instruction's operands: K columns, and the stored elements of its pattern
    if (x.columns(), x.stored()) != (y.columns(), y.stored()) {
        let shown = |i: &Instruction| match &i.sparsity {
            Some(s) => format!("K = {}, {s} stored", i.columns()),
            None => format!("k = {}", i.k()),
        };
        return Some(format!("{} (left) vs {} (right)", shown(x), shown(y)));
    }
    if x.sparsity.is_some() != y.sparsity.is_some() {
        return Some("one is sparse, the other dense".into());
    }
    // the same count of stored elements in another pattern: other positions are valid
    if let (Some(l), Some(r)) = (x.sparsity, y.sparsity)
        && (l.kept, l.group, l.pairs) != (r.kept, r.group, r.pairs)
    {
        return Some(format!("A is {l} sparse (left) vs {r} (right)"));
    }
    let scale = |i: &Instruction| match (&i.arithmetic.scale, i.scale_block()) {
        (Some(s), Some(block)) => format!("{} per block of {block}", s.format.name),
        _ => "none".into(),
    };
    fn key(i: &Instruction) -> (Option<&Format>, Option<u32>) {
        (
            i.arithmetic.scale.as_ref().map(|s| &s.format),
            i.scale_block(),
        )
    }
    if key(x) != key(y) {
        return Some(format!(
            "scale factors are {} (left) vs {} (right)",
            scale(x),
            scale(y)
        ));
    }
    None
}

/// How hard [`diff`] looks.
#[derive(Clone, Debug)]
pub struct DiffOptions {
    /// Random inputs tried after the structured candidates.
    pub trials: usize,
    pub seed: u64,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            trials: 100_000,
            seed: SearchOptions::default().seed,
        }
    }
}

/// A minimal input on which the two instructions differ, explained.
#[derive(Clone, Debug)]
pub struct Difference {
    pub witness: Input,
    pub left: u64,
    pub right: u64,
    /// The exact value of `c + sum a*b` (scales included); `None` when an input is NaN or
    /// infinite.
    pub exact: Option<Dyadic>,
    pub left_trace: Vec<String>,
    pub right_trace: Vec<String>,
    /// The two traces paired line by line ([`pair`]).
    pub rows: Vec<Row>,
    /// The row of the first paired lines whose values differ.
    pub divergence: usize,
    /// The stage of that line (`alignment`, `normalisation 0`, `chain step 1`, ...).
    pub stage: String,
    /// The parameters that differ at that stage, in the spec's terms.
    pub cause: String,
}

/// What [`diff`] found.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub structured_tried: usize,
    pub random_tried: usize,
    pub difference: Option<Difference>,
    /// When no difference was found: the proof that none exists, if there is one.
    pub proof: Option<String>,
}

impl Comparison {
    pub fn tried(&self) -> usize {
        self.structured_tried + self.random_tried
    }
}

/// Witnesses shrunk before the simplest is kept.
const WITNESSES: usize = 4;

/// Compare two instructions that take the same operands: search, shrink, explain.
pub fn diff(x: Checked, y: Checked, options: &DiffOptions) -> Result<Comparison, SearchError> {
    let found = search(
        x,
        y,
        &SearchOptions {
            random_draws: options.trials,
            seed: options.seed,
            wanted: WITNESSES,
        },
    )?;
    // the probe battery of each, and the probes read from both IRs, as more structured
    // candidates (on the interpreter: a few hundred)
    let probes: Vec<Input> = [x.instruction(), y.instruction()]
        .iter()
        .flat_map(|i| crate::probes::battery(i).into_iter().map(|p| p.input()))
        .filter(|p| {
            p.a.len() == x.instruction().k()
                && p.sa.len() == x.instruction().scale_count()
                && p.sb.len() == p.sa.len()
        })
        .collect();
    let from_probes: Vec<Input> = probes
        .iter()
        .filter(|p| differs(x, y, p))
        .take(WITNESSES)
        .cloned()
        .collect();
    let mut best: Option<(Simplicity, Input)> = None;
    let inputs = found.witnesses.iter().map(|w| &w.input).chain(&from_probes);
    for input in inputs {
        // each pass can open the way for another (simpler values let a product move
        // into c): repeat until nothing changes
        let mut shrunk = shrink(x, y, input);
        for _ in 0..8 {
            let again = shrink(x, y, &shrunk);
            if again == shrunk {
                break;
            }
            shrunk = again;
        }
        let s = simplicity(x.instruction(), &shrunk);
        if best.as_ref().is_none_or(|(b, _)| s < *b) {
            best = Some((s, shrunk));
        }
    }
    let difference = match best {
        Some((_, input)) => Some(explain(x, y, input)?),
        None => None,
    };
    let proof = if difference.is_none() {
        proven_equivalent(x, y.instruction())
    } else {
        None
    };
    Ok(Comparison {
        structured_tried: found.structured_tried + probes.len(),
        random_tried: found.random_tried,
        difference,
        proof,
    })
}

fn differs(x: Checked, y: Checked, i: &Input) -> bool {
    let nan = nan_any(x.instruction()) || nan_any(y.instruction());
    match (interp::run(x, &i.operands()), interp::run(y, &i.operands())) {
        (Ok(l), Ok(r)) => !matches(&x.instruction().arithmetic.d, l, r, nan),
        _ => false,
    }
}

/// How simple an input is, smaller first: nonzero products, then significant bits of all
/// nonzero elements, then the spread of their exponents, then the last lane used.
type Simplicity = (usize, u64, i64, usize);

fn value(format: &Format, raw: u64) -> Option<Dyadic> {
    match format.decode(raw) {
        Decoded::Finite(x) => Some(x.value()),
        _ => None,
    }
}

/// Bits from the leading to the trailing one of a nonzero value.
fn significant_bits(v: &Dyadic) -> u64 {
    let m = v.mantissa.magnitude();
    match m.trailing_zeros() {
        Some(tz) => m.bits() - tz,
        None => 0,
    }
}

fn product_values(inst: &Instruction, i: &Input) -> Vec<Option<Dyadic>> {
    let ar = &inst.arithmetic;
    (0..inst.k())
        .map(|k| {
            let mut p = value(&ar.a, i.a[k])?.mul(&value(&ar.b, i.b[k])?);
            if let Some(s) = &ar.scale {
                let j = k / s.block as usize;
                p = p
                    .mul(&value(&s.format, i.sa[j])?)
                    .mul(&value(&s.format, i.sb[j])?);
            }
            Some(p)
        })
        .collect()
}

fn simplicity(inst: &Instruction, i: &Input) -> Simplicity {
    let ar = &inst.arithmetic;
    let products = product_values(inst, i);
    let nonzero = products
        .iter()
        .filter(|p| p.as_ref().is_none_or(|p| !p.is_zero()))
        .count();
    let mut bits = 0;
    let mut exps = vec![];
    let mut elements: Vec<(&Format, u64)> = vec![(&ar.c, i.c)];
    elements.extend(i.a.iter().map(|&r| (&ar.a, r)));
    elements.extend(i.b.iter().map(|&r| (&ar.b, r)));
    if let Some(s) = &ar.scale {
        elements.extend(i.sa.iter().chain(&i.sb).map(|&r| (&s.format, r)));
    }
    for (f, raw) in elements {
        match value(f, raw) {
            Some(v) if !v.is_zero() => bits += significant_bits(&v),
            Some(_) => {}
            None => bits += 1,
        }
    }
    for v in std::iter::once(value(&ar.c, i.c)).chain(products).flatten() {
        if let Some(e) = v.leading_exponent() {
            exps.push(e);
        }
    }
    let spread = match (exps.iter().min(), exps.iter().max()) {
        (Some(lo), Some(hi)) => hi - lo,
        _ => 0,
    };
    let last = (0..inst.k())
        .rev()
        .find(|&k| value(&ar.a, i.a[k]).is_none_or(|v| !v.is_zero()))
        .map_or(0, |k| k + 1);
    (nonzero, bits, spread, last)
}

/// Simpler values of one element: a power of two at its leading exponent, and the
/// value with its lowest significant bit cleared.
fn simpler(format: &Format, raw: u64) -> Vec<u64> {
    let Some(v) = value(format, raw) else {
        return vec![];
    };
    let Some(le) = v.leading_exponent() else {
        return vec![];
    };
    let mut out = vec![];
    let pow = Dyadic::from_parts(v.is_negative(), 1, le);
    if pow != v {
        out.extend(encode(format, &pow));
    }
    if significant_bits(&v) > 1 {
        let tz = v.mantissa.trailing_zeros().unwrap_or(0) as i64;
        let low = Dyadic::from_parts(v.is_negative(), 1, v.exponent + tz);
        out.extend(encode(format, &v.add(&low.neg())));
    }
    out.retain(|&r| r != raw);
    out
}

/// Shrink an input on which `x` and `y` differ: drop products (both elements to +0) while
/// they still differ, then simplify values while that lowers [`simplicity`].
pub fn shrink(x: Checked, y: Checked, input: &Input) -> Input {
    let inst = x.instruction();
    let ar = &inst.arithmetic;
    let (za, zb) = (
        crate::inputs::zero(&ar.a, false),
        crate::inputs::zero(&ar.b, false),
    );
    let mut best = input.clone();
    // fewest products: drop one at a time, while the difference survives
    let mut changed = true;
    while changed {
        changed = false;
        for k in 0..inst.k() {
            if best.a[k] == za && best.b[k] == zb {
                continue;
            }
            let mut t = best.clone();
            t.a[k] = za;
            t.b[k] = zb;
            if differs(x, y, &t) {
                best = t;
                changed = true;
            }
        }
    }
    // fewer products still: a product's value moved into c, when c's format holds the sum
    let mut changed = true;
    while changed {
        changed = false;
        let products = product_values(inst, &best);
        for (k, p) in products.iter().enumerate() {
            let (Some(p), Some(c)) = (p, value(&ar.c, best.c)) else {
                continue;
            };
            if p.is_zero() {
                continue;
            }
            let Some(moved) = encode(&ar.c, &c.add(p)) else {
                continue;
            };
            let mut t = best.clone();
            t.c = moved;
            t.a[k] = za;
            t.b[k] = zb;
            if differs(x, y, &t) {
                best = t;
                changed = true;
                break;
            }
        }
    }
    // simplest values
    let mut score = simplicity(inst, &best);
    for _round in 0..64 {
        let mut tries: Vec<Input> = vec![];
        let c_zero = crate::inputs::zero(&ar.c, false);
        if best.c != c_zero {
            let mut t = best.clone();
            t.c = c_zero;
            tries.push(t);
        }
        for r in simpler(&ar.c, best.c) {
            let mut t = best.clone();
            t.c = r;
            tries.push(t);
        }
        for k in 0..inst.k() {
            // the product in the first lane of its block that is free
            let free = |t: &Input, l: usize| t.a[l] == za && t.b[l] == zb;
            let same_block = |l: usize| match &ar.scale {
                Some(s) => l / s.block as usize == k / s.block as usize,
                None => true,
            };
            if !free(&best, k)
                && let Some(l) = (0..k).find(|&l| free(&best, l) && same_block(l))
            {
                let mut t = best.clone();
                t.a.swap(k, l);
                t.b.swap(k, l);
                tries.push(t);
            }
            for r in simpler(&ar.a, best.a[k]) {
                let mut t = best.clone();
                t.a[k] = r;
                tries.push(t);
            }
            for r in simpler(&ar.b, best.b[k]) {
                let mut t = best.clone();
                t.b[k] = r;
                tries.push(t);
            }
            // the same product, factored the canonical way
            if let Some(p) = product_values(inst, &best)[k].as_ref()
                && ar.scale.is_none()
                && let Some((a, b)) = crate::inputs::split_product(&ar.a, &ar.b, p)
                && (a, b) != (best.a[k], best.b[k])
            {
                let mut t = best.clone();
                t.a[k] = a;
                t.b[k] = b;
                tries.push(t);
            }
        }
        if let Some(s) = &ar.scale {
            let one = crate::inputs::pow2(&s.format, 0, false);
            for j in 0..best.sa.len() {
                for side in [0, 1] {
                    let mut t = best.clone();
                    let v = if side == 0 {
                        &mut t.sa[j]
                    } else {
                        &mut t.sb[j]
                    };
                    if let Some(one) = one
                        && *v != one
                    {
                        *v = one;
                        tries.push(t);
                    }
                }
            }
        }
        let mut improved = false;
        for t in tries {
            let s = simplicity(inst, &t);
            if s < score && differs(x, y, &t) {
                best = t;
                score = s;
                improved = true;
                break;
            }
        }
        if !improved {
            break;
        }
    }
    best
}

/// The exact `c + sum a*b` (scales included), or `None` if an input is not finite.
pub fn exact_result(inst: &Instruction, i: &Input) -> Option<Dyadic> {
    let c = value(&inst.arithmetic.c, i.c)?;
    let mut sum = c;
    for p in product_values(inst, i) {
        sum = sum.add(&p?);
    }
    Some(sum)
}

/// A value as an exact decimal that `mmac run` reads back: `1.0`, `-0.0`,
/// `1.490116119384765625e-8`.
pub fn exact_decimal(v: &Dyadic, negative_zero: bool) -> String {
    if v.is_zero() {
        return if negative_zero { "-0.0" } else { "0.0" }.into();
    }
    let neg = v.is_negative();
    let m: BigInt = v.mantissa.abs();
    // m * 2^q = digits * 10^t
    let (digits, mut t): (BigInt, i64) = if v.exponent >= 0 {
        (m << v.exponent as usize, 0)
    } else {
        let n = (-v.exponent) as u32;
        (
            m * num_traits::pow(BigInt::from(5), n as usize),
            -(n as i64),
        )
    };
    let mut s = digits.to_string();
    while s.len() > 1 && s.ends_with('0') {
        s.pop();
        t += 1;
    }
    let exp10 = t + s.len() as i64 - 1;
    let (int, frac) = s.split_at(1);
    let mantissa = if frac.is_empty() {
        format!("{int}.0")
    } else {
        format!("{int}.{frac}")
    };
    let sign = if neg { "-" } else { "" };
    if (0..16).contains(&exp10) {
        // positional: 1.5, 1024.0, 3.25
        let point = exp10 as usize + 1;
        let digits = format!("{s:0<point$}");
        let (int, frac) = digits.split_at(point);
        let frac = if frac.is_empty() { "0" } else { frac };
        format!("{sign}{int}.{frac}")
    } else if (-4..0).contains(&exp10) {
        let zeros = "0".repeat((-exp10 - 1) as usize);
        format!("{sign}0.{zeros}{s}")
    } else {
        format!("{sign}{mantissa}e{exp10}")
    }
}

/// An element as an exact decimal `mmac run` accepts (`inf`, `nan` for specials).
pub fn element_decimal(format: &Format, raw: u64) -> String {
    match format.decode(raw) {
        Decoded::Finite(x) => exact_decimal(&x.value(), x.negative),
        Decoded::Inf { negative } => if negative { "-inf" } else { "inf" }.into(),
        Decoded::Nan => "nan".into(),
    }
}

/// The input as `mmac run` arguments in exact decimals (a and b up to their last nonzero
/// lane, then `--pad`).
pub fn decimal_arguments(inst: &Instruction, i: &Input) -> String {
    i.run_arguments_with(inst, element_decimal)
}

/// A trace line with the parameters it quotes removed, so that two traces compare by
/// their values: `(keep 25 bits RZ, dropped X)` becomes `(dropped X)`, a normalisation's
/// `(24 bits RZ, exponent floor -126)` is cut.
fn values_of(line: &str) -> String {
    let mut s = line.to_string();
    if let Some(start) = s.find("(keep ")
        && let Some(end) = s[start..].find(", dropped")
    {
        s.replace_range(start + 1..start + end + 2, "");
    }
    if s.starts_with("normalize[")
        && let Some(cut) = s.rfind(" (")
    {
        s.truncate(cut);
    }
    // what one pipeline kind adds to an input line and another does not: a product's
    // exponent in the max search, c's value after decoding
    let t = s.trim_start();
    if t.starts_with("p[")
        && s.ends_with(')')
        && let Some(cut) = s.rfind(" (e = ")
    {
        s.truncate(cut);
    } else if t.starts_with("c = ")
        && let Some(cut) = s.find(" -> ")
    {
        s.truncate(cut);
    }
    s
}

/// The section a trace line belongs to: the alignment header above an indented line.
fn section(lines: &[String], at: usize) -> Option<&str> {
    let l = &lines[at];
    if !l.starts_with("  ") || l.trim_start().starts_with("step result") {
        return None;
    }
    (0..at)
        .rev()
        .map(|i| lines[i].as_str())
        .find(|h| h.starts_with("align "))
        .map(|h| h.split(':').next().unwrap_or(h))
}

/// What a trace line is about, without its values: `c`, `p[ 1]`, `align sum`,
/// `align sum / c`, `normalize[0]`, `step result`, or a chain header whole. The lines of
/// two traces with the same key are compared.
fn key_of(lines: &[String], at: usize) -> String {
    let t = lines[at].trim();
    if t.starts_with("-- ") {
        return t.to_string();
    }
    if t.starts_with("step result") {
        return "step result".into();
    }
    let cut = [t.find(" = "), t.find(": ")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(t.len());
    let own = t[..cut].trim().to_string();
    match section(lines, at) {
        Some(h) => format!("{h} / {own}"),
        None => own,
    }
}

/// The stage of a trace line.
fn stage_of(lines: &[String], at: usize) -> String {
    let key = key_of(lines, at);
    let t = key.as_str();
    if let Some(h) = section(lines, at) {
        return format!("alignment {}", h.trim_start_matches("align ").trim());
    }
    if t.starts_with("-- chained step") {
        return t.trim_start_matches("-- ").to_string();
    }
    if t.starts_with("step result") {
        return "chained step result".into();
    }
    if let Some(name) = t.strip_prefix("align ") {
        return format!("alignment {}", name.trim());
    }
    if let Some(rest) = t.strip_prefix("normalize[") {
        return format!("normalisation {}", rest.trim_end_matches(']'));
    }
    for (prefix, stage) in [
        ("p[", "products"),
        ("group[", "groups"),
        ("acc[", "accumulation"),
        ("c", "c"),
        ("overflow", "overflow"),
        ("special", "special values"),
        ("sparse", "sparsity"),
    ] {
        if t.starts_with(prefix) {
            return stage.into();
        }
    }
    "result".into()
}

/// Every line of a trace (`mmac run --trace`) with what it is about and its stage, as
/// `mmac diff` reads them: the key (`c`, `p[ 1]`, `align sum / p[ 1]`, `normalize[0]`,
/// `step result`) and the stage (`c`, `products`, `alignment sum`, `normalisation 0`,
/// `chained step 1 (k = 16..31)`, `sparsity` (where a sparse A's elements sit),
/// `result`, ...), one pair per line.
pub fn trace_stages(lines: &[String]) -> Vec<(String, String)> {
    (0..lines.len())
        .map(|i| (key_of(lines, i), stage_of(lines, i)))
        .collect()
}

/// One row of two traces side by side: a line of each, or of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub left: Option<usize>,
    pub right: Option<usize>,
}

/// Is a trace line a product's line (`p[ 3] = ...`)?
fn is_product(key: &str) -> bool {
    key.starts_with("p[")
}

/// Pair the lines of two traces by [`key_of`], in order. First the longest common
/// subsequence of the other lines (alignments, their terms, normalisations, chain steps),
/// preferring the earliest pairing on the right; then, between two such anchors, the
/// products' lines by key. Lines without a partner stand alone.
pub fn pair(left: &[String], right: &[String]) -> Vec<Row> {
    let lk: Vec<String> = (0..left.len()).map(|i| key_of(left, i)).collect();
    let rk: Vec<String> = (0..right.len()).map(|i| key_of(right, i)).collect();
    let li: Vec<usize> = (0..left.len()).filter(|&i| !is_product(&lk[i])).collect();
    let ri: Vec<usize> = (0..right.len()).filter(|&j| !is_product(&rk[j])).collect();
    // suffix LCS lengths over the anchor candidates
    let (n, m) = (li.len(), ri.len());
    let mut l = vec![vec![0u32; m + 1]; n + 1];
    for a in (0..n).rev() {
        for b in (0..m).rev() {
            l[a][b] = if lk[li[a]] == rk[ri[b]] {
                l[a + 1][b + 1] + 1
            } else {
                l[a + 1][b].max(l[a][b + 1])
            };
        }
    }
    let mut anchors: Vec<(usize, usize)> = vec![];
    let (mut a, mut b) = (0, 0);
    while a < n && b < m {
        if lk[li[a]] == rk[ri[b]] && l[a][b] == l[a + 1][b + 1] + 1 {
            anchors.push((li[a], ri[b]));
            a += 1;
            b += 1;
        } else if l[a][b + 1] > l[a + 1][b] {
            b += 1;
        } else if l[a][b + 1] < l[a + 1][b] {
            a += 1;
        } else if ri[b..].iter().any(|&y| rk[y] == lk[li[a]]) {
            // either way loses nothing: keep the left line while it can still pair,
            // so that it pairs with its earliest partner
            b += 1;
        } else {
            a += 1;
        }
    }
    anchors.push((left.len(), right.len()));
    let mut rows = vec![];
    let (mut i, mut j) = (0, 0);
    for (ai, aj) in anchors {
        // the gap before the anchor: products paired by key, the rest alone, in order
        let mut next_right = j;
        for (x, key) in lk.iter().enumerate().take(ai).skip(i) {
            let partner = is_product(key)
                .then(|| (next_right..aj).find(|&y| rk[y] == *key))
                .flatten();
            match partner {
                Some(y) => {
                    rows.extend((next_right..y).map(|r| Row {
                        left: None,
                        right: Some(r),
                    }));
                    rows.push(Row {
                        left: Some(x),
                        right: Some(y),
                    });
                    next_right = y + 1;
                }
                None => rows.push(Row {
                    left: Some(x),
                    right: None,
                }),
            }
        }
        rows.extend((next_right..aj).map(|r| Row {
            left: None,
            right: Some(r),
        }));
        if ai < left.len() {
            rows.push(Row {
                left: Some(ai),
                right: Some(aj),
            });
        }
        (i, j) = (ai + 1, aj + 1);
    }
    rows
}

/// The broad kind of a stage, which the parameters are filed under.
fn stage_kind(stage: &str) -> &'static str {
    for (prefix, kind) in [
        ("chain", "chain"),
        ("alignment", "alignment"),
        ("normalisation", "normalisation"),
        ("overflow", "normalisation"),
        ("products", "products"),
        ("c", "products"),
        ("special", "products"),
        ("groups", "groups"),
        ("accumulation", "accumulation"),
    ] {
        if stage.starts_with(prefix) {
            return kind;
        }
    }
    "result"
}

/// One parameter of an instruction in the spec's terms: a key that pairs it with the
/// other instruction's, the stage kind it belongs to, a phrase and a value.
struct Fact {
    key: String,
    kind: &'static str,
    phrase: String,
    value: String,
}

fn fact(
    key: impl Into<String>,
    kind: &'static str,
    phrase: impl Into<String>,
    value: impl Into<String>,
) -> Fact {
    Fact {
        key: key.into(),
        kind,
        phrase: phrase.into(),
        value: value.into(),
    }
}

fn zero_exponent(z: ZeroExponent) -> String {
    match z {
        ZeroExponent::Natural => "their format's minimum".into(),
        ZeroExponent::Fixed(e) => format!("{e}"),
        ZeroExponent::Never => "none (left out)".into(),
    }
}

fn op(o: &RoundedOp) -> String {
    format!("{} {}", o.format.name, o.rounding.short())
}

fn facts(inst: &Instruction) -> Vec<Fact> {
    let mut out = vec![fact(
        "pipeline",
        "pipeline",
        "pipeline",
        inst.provenance.pipeline.clone(),
    )];
    match &inst.arithmetic.pipeline {
        Pipeline::Fused(f) => {
            product_facts(inst, f, &mut out);
            let last = f.nodes.len().saturating_sub(1);
            for (ni, node) in f.nodes.iter().enumerate() {
                let name = inst
                    .provenance
                    .node_names
                    .get(ni)
                    .cloned()
                    .flatten()
                    .map(|n| format!("alignment {n}"))
                    .unwrap_or_else(|| {
                        if f.nodes.len() == 1 {
                            "alignment".into()
                        } else {
                            format!("alignment {ni}")
                        }
                    });
                let slot = if ni == last {
                    "last".to_string()
                } else {
                    ni.to_string()
                };
                node_facts(node, &name, &slot, &mut out);
            }
            let steps = f.normalize.len();
            for (si, step) in f.normalize.iter().enumerate() {
                let slot = if si + 1 == steps {
                    "last".to_string()
                } else {
                    si.to_string()
                };
                let name = if steps == 1 {
                    "normalisation".to_string()
                } else {
                    format!("normalisation {si}")
                };
                normalize_facts(step, &name, &slot, &mut out);
            }
        }
        Pipeline::Sequential(s) => sequential_facts(s, &mut out),
        Pipeline::Integer(_) | Pipeline::Composed(_) => {}
    }
    out
}

/// A fused pipeline's facts before alignment: flushed inputs, product overflow, chains,
/// groups and the exponents zero terms take.
fn product_facts(inst: &Instruction, fused: &Fused, out: &mut Vec<Fact>) {
    let cond = fused.conditioning;
    for (name, on) in [
        ("a", cond.flush_a),
        ("b", cond.flush_b),
        ("c", cond.flush_c),
    ] {
        if on {
            out.push(fact(
                format!("flush.{name}"),
                "products",
                format!("subnormal {name}"),
                "flushed to zero",
            ));
        }
    }
    if let Some(x) = fused.product_overflow {
        out.push(fact(
            "product_overflow",
            "products",
            "products overflow at",
            format!("2^{x}"),
        ));
    }
    if (fused.chain as usize) < inst.k() {
        out.push(fact(
            "chain",
            "chain",
            "chained every",
            format!("{} products", fused.chain),
        ));
    }
    if let Some(g) = fused.grouping {
        out.push(fact(
            "group",
            "groups",
            "products summed exactly in groups of",
            format!("{}", g.size),
        ));
    }
    let z = fused.zero_exponent;
    if z.products == z.c && z.c == z.groups {
        out.push(fact(
            "zero",
            "alignment",
            "zero terms take the exponent",
            zero_exponent(z.products),
        ));
    } else {
        for (what, z) in [("products", z.products), ("c", z.c), ("groups", z.groups)] {
            out.push(fact(
                format!("zero.{what}"),
                "alignment",
                format!("zero {what} take the exponent"),
                zero_exponent(z),
            ));
        }
    }
}

/// One alignment node's facts (`name` as the trace calls it, `slot` its key: its index,
/// or `last`): a fixed reference, and per term what it keeps, how it rounds and what it
/// drops.
fn node_facts(node: &AlignNode, name: &str, slot: &str, out: &mut Vec<Fact>) {
    if let Reference::Fixed(r) = node.reference {
        out.push(fact(
            format!("node.{slot}.reference"),
            "alignment",
            format!("{name} is fixed at"),
            format!("2^{r}"),
        ));
    }
    for t in &node.terms {
        let src = match t.source {
            TermSource::Products(_) => "products".to_string(),
            TermSource::C => "c".into(),
            TermSource::Groups => "groups".into(),
            TermSource::Node(i) => format!("node {i}"),
        };
        let of = if node.terms.len() > 1 {
            format!(" ({src})")
        } else {
            String::new()
        };
        match t.keep {
            Some((bits, mode)) => {
                out.push(fact(
                    format!("node.{slot}.{src}.keep"),
                    "alignment",
                    format!("{name}{of} keeps"),
                    format!("{bits} bits"),
                ));
                out.push(fact(
                    format!("node.{slot}.{src}.mode"),
                    "alignment",
                    format!("{name}{of} rounds by"),
                    mode.short(),
                ));
            }
            None => out.push(fact(
                format!("node.{slot}.{src}.keep"),
                "alignment",
                format!("{name}{of} keeps"),
                "every bit",
            )),
        }
        if let Some(n) = t.drop_below {
            out.push(fact(
                format!("node.{slot}.{src}.drop"),
                "alignment",
                format!("{name}{of} drops terms more than"),
                format!("{n} bits below the reference"),
            ));
        }
    }
}

/// One normalisation step's facts: bits kept, rounding, exponent floor, overflow.
fn normalize_facts(step: &NormalizeStep, name: &str, slot: &str, out: &mut Vec<Fact>) {
    out.push(fact(
        format!("norm.{slot}.bits"),
        "normalisation",
        format!("{name} keeps"),
        format!("{} bits", step.fraction_bits),
    ));
    out.push(fact(
        format!("norm.{slot}.mode"),
        "normalisation",
        format!("{name} rounds by"),
        step.rounding.short(),
    ));
    out.push(fact(
        format!("norm.{slot}.floor"),
        "normalisation",
        format!("{name} has the exponent floor"),
        format!("{}", step.min_exponent),
    ));
    if step.max_exponent.is_some() {
        out.push(fact(
            format!("norm.{slot}.overflow"),
            "normalisation",
            format!("{name} overflows to"),
            step.overflow.keyword(),
        ));
    }
}

/// A sequential pipeline's facts: how products, pairwise groups and each step round.
fn sequential_facts(s: &Sequential, out: &mut Vec<Fact>) {
    let p = match &s.product {
        ProductRule::Exact => "exact".to_string(),
        ProductRule::Rounded(o) => op(o),
    };
    out.push(fact("seq.product", "products", "products are", p));
    if let Some((g, o)) = &s.pairwise {
        out.push(fact(
            "seq.pairwise",
            "groups",
            "pairwise groups of",
            format!("{g} products, {}", op(o)),
        ));
    }
    out.push(fact(
        "seq.accumulate",
        "accumulation",
        "each step rounds to",
        op(&s.accumulate),
    ));
}

/// `25 bits` vs `24 bits` reads `25 bits (left) vs 24 (right)`.
fn versus(phrase: &str, l: &str, r: &str) -> String {
    let unit = |s: &str| s.split_once(' ').map(|(_, u)| u.to_string());
    let r_shown = match (unit(l), unit(r)) {
        (Some(a), Some(b)) if a == b => r.split_once(' ').unwrap().0.to_string(),
        _ => r.to_string(),
    };
    format!("{phrase} {l} (left) vs {r_shown} (right)")
}

/// A parameter that differs between two instructions: its key, stage kind and message.
pub struct ParameterDifference {
    pub key: String,
    pub kind: &'static str,
    pub message: String,
}

/// The parameters that differ between two instructions, in the spec's terms.
pub fn parameter_differences(x: &Instruction, y: &Instruction) -> Vec<ParameterDifference> {
    let (fx, fy) = (facts(x), facts(y));
    let mut out = vec![];
    let mut push = |f: &Fact, message: String| {
        out.push(ParameterDifference {
            key: f.key.clone(),
            kind: f.kind,
            message,
        })
    };
    for f in &fx {
        match fy.iter().find(|g| g.key == f.key) {
            Some(g) if g.value != f.value => push(f, versus(&f.phrase, &f.value, &g.value)),
            Some(_) => {}
            None => push(f, format!("{} {} (left)", f.phrase, f.value)),
        }
    }
    for g in &fy {
        if !fx.iter().any(|f| f.key == g.key) {
            push(g, format!("{} {} (right)", g.phrase, g.value));
        }
    }
    out
}

/// Which alignment parameters a diverging trace line points at: a term's (`c`,
/// `products`, `groups`, `node`), the node's reference (`reference`), or any (`*`).
fn term_of(key: &str) -> &'static str {
    match key.split_once(" / ") {
        None if key.starts_with("align ") => "reference",
        None => "*",
        Some((header, term)) => {
            let node = header.trim_start_matches("align ").trim();
            if term == "c" {
                "c"
            } else if term.starts_with("p[") {
                "products"
            } else if term.starts_with("group[") {
                "groups"
            } else if term == node || term == "sum" {
                "*"
            } else {
                "node"
            }
        }
    }
}

/// Does a parameter (by key) belong to `term` of an alignment?
fn about_term(key: &str, term: &str) -> bool {
    match term {
        "*" => true,
        "reference" => key.starts_with("zero") || key.ends_with(".reference"),
        "node" => key.contains(".node "),
        t => key.contains(&format!(".{t}.")),
    }
}

/// The cause of a divergence at `stage` (on the trace line `key`, which both traces have
/// when `paired`): the differing parameters of that stage, narrowed to the term the line
/// is about, else every differing parameter; prefixed by the pipelines when they differ.
fn cause(x: &Instruction, y: &Instruction, stage: &str, key: &str, paired: bool) -> String {
    let diffs = parameter_differences(x, y);
    // a stage only one side has (another pipeline kind, another chain) narrows nothing
    let kind = if paired { stage_kind(stage) } else { "-" };
    let of_kind: Vec<&ParameterDifference> = diffs.iter().filter(|d| d.kind == kind).collect();
    let term = term_of(key);
    let narrowed: Vec<&ParameterDifference> = of_kind
        .iter()
        .copied()
        .filter(|d| kind != "alignment" || about_term(&d.key, term))
        .collect();
    let chosen: Vec<&ParameterDifference> = if !narrowed.is_empty() {
        narrowed
    } else if !of_kind.is_empty() {
        of_kind
    } else {
        diffs.iter().filter(|d| d.kind != "pipeline").collect()
    };
    let pipelines = diffs.iter().find(|d| d.kind == "pipeline");
    let text = chosen
        .iter()
        .map(|d| d.message.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    match (pipelines, text.is_empty()) {
        (Some(p), false) => format!("{}: {text}", p.message),
        (Some(p), true) => p.message.clone(),
        (None, false) => text,
        (None, true) => "the two IRs have the same parameters but different structure".into(),
    }
}

/// The arguments that decide a witness, by experiment: for two instructions of the same
/// pipeline, each numeric argument of the left that differs from the right's is moved
/// alone to the right's value (the spec re-checked with that one change); those that
/// alone turn the left result into the right one are described as parameter differences.
/// Empty when the left instruction has no spec file, the pipelines differ, or no single
/// argument decides.
fn decisive_arguments(left: Checked, y: &Instruction, witness: &Input, right: u64) -> Vec<String> {
    let x = left.instruction();
    if x.provenance.pipeline != y.provenance.pipeline {
        return vec![];
    }
    let nan = nan_any(x) || nan_any(y);
    let mut out = vec![];
    for (name, value) in &x.provenance.arguments {
        let Some((_, other)) = y.provenance.arguments.iter().find(|(n, _)| n == name) else {
            continue;
        };
        let (Some(_), Some(new)) = (value.as_int(), other.as_int()) else {
            continue;
        };
        if value == other {
            continue;
        }
        let Some(Ok(moved)) = left.moved(name, new) else {
            continue;
        };
        let hybrid = moved.checked();
        if let Ok(d) = interp::run(hybrid, &witness.operands())
            && matches(&x.arithmetic.d, d, right, nan)
        {
            out.extend(
                parameter_differences(x, hybrid.instruction())
                    .into_iter()
                    .filter(|p| p.kind != "pipeline")
                    .map(|p| p.message),
            );
        }
    }
    out
}

fn explain(x: Checked, y: Checked, witness: Input) -> Result<Difference, SearchError> {
    let (left, left_trace) = interp::run_traced(x, &witness.operands())?;
    let (right, right_trace) = interp::run_traced(y, &witness.operands())?;
    let rows = pair(&left_trace, &right_trace);
    // the first paired lines whose values differ; else the first line of one side only
    let differ = |r: &Row| match (r.left, r.right) {
        (Some(i), Some(j)) => values_of(&left_trace[i]) != values_of(&right_trace[j]),
        _ => false,
    };
    let divergence = rows
        .iter()
        .position(differ)
        .or_else(|| {
            // else the first line of one side only; between pipelines of different kinds
            // (whose traces differ in form), a chain header last
            let same_kind = std::mem::discriminant(&x.instruction().arithmetic.pipeline)
                == std::mem::discriminant(&y.instruction().arithmetic.pipeline);
            let alone = |r: &Row| r.left.is_none() || r.right.is_none();
            let header = |r: &Row| match (r.left, r.right) {
                (Some(i), _) => left_trace[i].starts_with("-- "),
                (_, Some(j)) => right_trace[j].starts_with("-- "),
                _ => false,
            };
            rows.iter()
                .position(|r| alone(r) && (same_kind || !header(r)))
                .or_else(|| rows.iter().position(alone))
        })
        .unwrap_or(rows.len());
    let stage = match rows.get(divergence) {
        Some(Row { left: Some(i), .. }) => stage_of(&left_trace, *i),
        Some(Row { right: Some(j), .. }) => stage_of(&right_trace, *j),
        _ => "result".into(),
    };
    let key = match rows.get(divergence) {
        Some(Row { left: Some(i), .. }) => key_of(&left_trace, *i),
        Some(Row { right: Some(j), .. }) => key_of(&right_trace, *j),
        _ => String::new(),
    };
    let paired = rows
        .get(divergence)
        .is_some_and(|r| r.left.is_some() && r.right.is_some());
    let decisive = decisive_arguments(x, y.instruction(), &witness, right);
    let cause = if decisive.is_empty() {
        cause(x.instruction(), y.instruction(), &stage, &key, paired)
    } else {
        decisive.join("; ")
    };
    Ok(Difference {
        exact: exact_result(x.instruction(), &witness),
        witness,
        left,
        right,
        left_trace,
        right_trace,
        rows,
        divergence,
        stage,
        cause,
    })
}

/// The two traces side by side, paired by what each line is about, `>` marking the first
/// row whose values differ.
pub fn side_by_side(d: &Difference) -> String {
    let width = d
        .left_trace
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut s = format!("  {:width$} | right\n", "left");
    // runs of zero products that both sides show alike are folded into one row
    let zero = |l: &str| l.trim_start().starts_with("p[") && l.ends_with("= +0");
    let zero_alike = |row: &Row| match (row.left, row.right) {
        (Some(i), Some(j)) => zero(&d.left_trace[i]) && d.left_trace[i] == d.right_trace[j],
        (Some(i), None) => zero(&d.left_trace[i]),
        (None, Some(j)) => zero(&d.right_trace[j]),
        _ => false,
    };
    let side = |row: &Row| (row.left.is_some(), row.right.is_some());
    let mut n = 0;
    while n < d.rows.len() {
        let row = &d.rows[n];
        if zero_alike(row) && n != d.divergence {
            let run = d.rows[n..]
                .iter()
                .enumerate()
                .take_while(|(m, r)| zero_alike(r) && n + m != d.divergence && side(r) == side(row))
                .count();
            if run > 1 {
                let key = |r: &Row| match r.left {
                    Some(i) => key_of(&d.left_trace, i),
                    None => key_of(&d.right_trace, r.right.unwrap_or(0)),
                };
                let folded = format!("{} .. {} = +0", key(row), key(&d.rows[n + run - 1]));
                let (l, r) = side(row);
                let (l, r) = (
                    if l { folded.as_str() } else { "" },
                    if r { folded.as_str() } else { "" },
                );
                s.push_str(format!("  {l:width$} | {r}").trim_end());
                s.push('\n');
                n += run;
                continue;
            }
        }
        let l = row.left.map(|i| d.left_trace[i].as_str()).unwrap_or("");
        let r = row.right.map(|j| d.right_trace[j].as_str()).unwrap_or("");
        let mark = if n == d.divergence { '>' } else { ' ' };
        s.push_str(format!("{mark} {l:width$} | {r}").trim_end());
        s.push('\n');
        n += 1;
    }
    s
}

/// An element as `HEX (value)`.
pub fn shown(format: &Format, raw: u64) -> String {
    format!("{} ({})", hex(format, raw), format.decode(raw).describe())
}

/// The exact value for people: the exact decimal, and an approximation when long.
pub fn exact_shown(v: &Dyadic) -> String {
    let e = exact_decimal(v, false);
    if e.len() > 24 {
        format!(
            "{e} (~{})",
            mmac_compiler::format::show_f64(v.to_f64_lossy())
        )
    } else {
        e
    }
}
