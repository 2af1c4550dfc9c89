//! The host's floating-point control state around kernel calls. Kernels use native f32
//! and f64 operations (sequential FMA chains, exact f64 alignment in SIMD lanes, the
//! f32 encoding of results) that give the interpreter's bits only under IEEE defaults:
//! round to nearest even, subnormals neither flushed (FTZ) nor read as zero (DAZ), and
//! exceptions masked. An embedder may have changed that state (ML runtimes set FTZ/DAZ),
//! so every kernel call runs inside an [`IeeeDefaults`] guard that sets the defaults when
//! they are not in force and restores the caller's state afterwards.
//!
//! A kernel whose code flushes every subnormal result itself may ask for flush-to-zero
//! on top of the defaults: the bits are the same either way, and x86 computes subnormal
//! results on a slow path that flush-to-zero avoids. A GEMM panel of a truncating
//! pipeline asks for rounding toward zero instead (`jit::panel`).
//!
//! x86-64 (MXCSR) and AArch64 (FPCR) are handled; on other hosts the guard does nothing
//! and the caller's state must be the default.

/// Sets the IEEE default control state (with flush-to-zero if asked) for its lifetime,
/// if it is not in force.
pub(crate) struct IeeeDefaults {
    saved: Option<u64>,
}

impl IeeeDefaults {
    #[inline]
    pub(crate) fn enter(flush_to_zero: bool) -> IeeeDefaults {
        IeeeDefaults::control(if flush_to_zero {
            DEFAULT | FLUSH_TO_ZERO
        } else {
            DEFAULT
        })
    }

    /// The defaults with every operation rounded toward zero (subnormals kept).
    #[inline]
    pub(crate) fn enter_toward_zero() -> IeeeDefaults {
        IeeeDefaults::control(DEFAULT | TOWARD_ZERO)
    }

    #[inline]
    fn control(wanted: u64) -> IeeeDefaults {
        let current = read();
        if current & CONTROL_MASK == wanted {
            return IeeeDefaults { saved: None };
        }
        // SAFETY: writes the documented default control word (plus flush-to-zero or
        // rounding toward zero); status flags are kept.
        unsafe { write((current & !CONTROL_MASK) | wanted) };
        IeeeDefaults {
            saved: Some(current),
        }
    }
}

impl Drop for IeeeDefaults {
    #[inline]
    fn drop(&mut self) {
        if let Some(saved) = self.saved {
            // SAFETY: restores the exact state read on entry.
            unsafe { write(saved) };
        }
    }
}

// MXCSR: bits 0-5 are sticky status flags; 6 DAZ, 7-12 exception masks, 13-14 rounding
// control, 15 FTZ are control. The default is every exception masked, round to nearest.
#[cfg(target_arch = "x86_64")]
pub(crate) const CONTROL_MASK: u64 = 0xffc0;
#[cfg(target_arch = "x86_64")]
pub(crate) const DEFAULT: u64 = 0x1f80;
/// FTZ: tiny results become zeros of their sign.
#[cfg(target_arch = "x86_64")]
const FLUSH_TO_ZERO: u64 = 0x8000;
/// RC = 11: round toward zero.
#[cfg(target_arch = "x86_64")]
const TOWARD_ZERO: u64 = 0x6000;

#[cfg(target_arch = "x86_64")]
#[inline]
fn read() -> u64 {
    let mut csr: u32 = 0;
    // SAFETY: stmxcsr stores the 32-bit MXCSR to the given address.
    unsafe {
        std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags));
    }
    csr as u64
}

#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn write(value: u64) {
    let csr = value as u32;
    // SAFETY: ldmxcsr loads a valid MXCSR value (reserved bits are never set here).
    unsafe {
        std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, preserves_flags));
    }
}

// FPCR: bits 8-12 and 15 trap enables, 19 FZ16, 22-23 rounding mode, 24 FZ, 25 DN (default
// NaN), 26 AHP. The default is all zero.
#[cfg(target_arch = "aarch64")]
pub(crate) const CONTROL_MASK: u64 = 0x07c8_9f00;
#[cfg(target_arch = "aarch64")]
pub(crate) const DEFAULT: u64 = 0;
/// FZ: tiny results (and subnormal inputs) become zeros of their sign.
#[cfg(target_arch = "aarch64")]
const FLUSH_TO_ZERO: u64 = 1 << 24;
/// RMode = 11: round toward zero.
#[cfg(target_arch = "aarch64")]
const TOWARD_ZERO: u64 = 3 << 22;

#[cfg(target_arch = "aarch64")]
#[inline]
fn read() -> u64 {
    let fpcr: u64;
    // SAFETY: reading FPCR has no side effects.
    unsafe { std::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack)) };
    fpcr
}

#[cfg(target_arch = "aarch64")]
#[inline]
unsafe fn write(value: u64) {
    // SAFETY: writes a valid FPCR value (only documented control bits change).
    unsafe { std::arch::asm!("msr fpcr, {}", in(reg) value, options(nomem, nostack)) };
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const CONTROL_MASK: u64 = 0;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const DEFAULT: u64 = 0;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const FLUSH_TO_ZERO: u64 = 0;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const TOWARD_ZERO: u64 = 0;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline]
fn read() -> u64 {
    0
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline]
unsafe fn write(_: u64) {}
