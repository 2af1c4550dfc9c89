//! Randomness: the one deterministic generator every test, fuzzer and benchmark
//! uses ([`Rng`]), and random finite records laid out as a kernel's batch entry takes them.
//! `mmac bench` and `cargo bench` share them, so both time the same inputs.

use crate::engine::Operands;
use crate::format::{Decoded, Format};
use crate::ir::Instruction;
use rand_core::{Infallible, Rng as _, SeedableRng, TryRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The project's deterministic generator: xoshiro256++ (from `rand_xoshiro`), seeded
/// through SplitMix64 so that any `u64`, 0 and nearby seeds included, gives an unrelated
/// stream, with the few draws mmac's generators need on top. It implements
/// [`rand_core::Rng`], so `rand_distr`'s distributions sample from it.
#[derive(Clone, Debug)]
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    /// A generator from a seed (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// An index in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `lo..=hi` (`lo` when the range is empty).
    pub fn between(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            lo
        } else {
            lo + self.below((hi - lo) as usize + 1) as i64
        }
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        (self.below(100) as u64) < percent
    }

    /// One item of a non-empty slice, uniformly.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A random finite encoding of `f` (0 if 64 draws found none).
    pub fn finite(&mut self, format: &Format) -> u64 {
        for _ in 0..64 {
            let x = self.next_u64() & format.storage_mask();
            if matches!(format.decode(x), Decoded::Finite(_)) {
                return x;
            }
        }
        0
    }
}

impl TryRng for Rng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.0.next_u32())
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.0.next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        self.0.fill_bytes(dst);
        Ok(())
    }
}

/// Random finite operands for `n` dot products: record i is `c[i]`, `a[i*k..]`,
/// `b[i*k..]`, `sa[i*s..]`, `sb[i*s..]`.
pub struct Records {
    pub n: usize,
    /// Elements of a and b per record, and scale factors per record.
    pub k: usize,
    pub s: usize,
    pub c: Vec<u64>,
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub sa: Vec<u64>,
    pub sb: Vec<u64>,
}

impl Records {
    pub fn random(inst: &Instruction, n: usize) -> Records {
        let mut r = Rng::new(0x9e37_79b9_7f4a_7c15);
        let (k, s) = (inst.k(), inst.scale_count());
        let scale = inst.arithmetic.scale.as_ref().map(|x| x.format.clone());
        let mut draw = |f: Option<&Format>, len: usize| -> Vec<u64> {
            (0..len)
                .map(|_| f.map(|f| r.finite(f)).unwrap_or(0))
                .collect()
        };
        Records {
            n,
            k,
            s,
            c: draw(Some(&inst.arithmetic.c), n),
            a: draw(Some(&inst.arithmetic.a), n * k),
            b: draw(Some(&inst.arithmetic.b), n * k),
            sa: draw(scale.as_ref(), n * s),
            sb: draw(scale.as_ref(), n * s),
        }
    }

    /// Record i's operands.
    pub fn operands(&self, i: usize) -> Operands<'_> {
        let (k, s) = (self.k, self.s);
        Operands {
            c: self.c[i],
            a: &self.a[i * k..(i + 1) * k],
            b: &self.b[i * k..(i + 1) * k],
            sa: &self.sa[i * s..(i + 1) * s],
            sb: &self.sb[i * s..(i + 1) * s],
        }
    }
}
