//! Counter semantics shared by every backend: hardware registers of a fixed width that wrap
//! silently (these PMUs raise no overflow interrupt), the driver's accumulation of masked
//! deltas between reads, and the high-low-high protocol for reading a 64-bit counter exposed as
//! two 32-bit registers. The register model ([`HwCounter`]) and the two protocols are what the
//! tick-by-tick oracle (`session::emulate_stepwise`) steps, so they are built for tests and
//! benches only (the `test-oracles` feature); shipped counting uses the closed form and [`mask`].

/// The all-ones value of a `bits`-wide register.
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// How far a `bits`-wide register advanced from `prev` to `now`, assuming at most one wrap.
#[cfg(any(test, feature = "test-oracles"))]
pub(crate) fn wrapping_delta(prev: u64, now: u64, bits: u32) -> u64 {
    now.wrapping_sub(prev) & mask(bits)
}

/// Reads a 64-bit counter from its two 32-bit halves: high, low, high again, retrying until
/// both high reads agree, so a carry out of the low half between the reads is never mixed
/// with a stale high half. Returns the value and the number of attempts it took.
#[cfg(any(test, feature = "test-oracles"))]
pub(crate) fn read_split_64(
    mut read_high: impl FnMut() -> u32,
    mut read_low: impl FnMut() -> u32,
) -> (u64, u32) {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let high = read_high();
        let low = read_low();
        if read_high() == high {
            return ((u64::from(high) << 32) | u64::from(low), attempts);
        }
    }
}

/// One hardware counter as the driver sees it: a `bits`-wide register that the hardware
/// increments and wraps, and the 64-bit perf count the driver accumulates from masked deltas
/// each time it reads the register (on every stop, rotation and user read).
#[cfg(any(test, feature = "test-oracles"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HwCounter {
    pub(crate) bits: u32,
    /// The register's current content.
    register: u64,
    /// The register value at the driver's last read.
    last_read: u64,
    /// What perf reports: the sum of deltas seen at reads.
    pub(crate) count: u64,
}

#[cfg(any(test, feature = "test-oracles"))]
impl HwCounter {
    pub(crate) fn new(bits: u32) -> HwCounter {
        HwCounter {
            bits,
            register: 0,
            last_read: 0,
            count: 0,
        }
    }

    /// The hardware counts `events` more (wrapping at the register width).
    pub(crate) fn add(&mut self, events: u64) {
        self.register = self.register.wrapping_add(events) & mask(self.bits);
    }

    /// The driver (re)programs the counter when perf schedules the event: the register starts
    /// from zero, the accumulated count stays.
    pub(crate) fn restart(&mut self) {
        self.register = 0;
        self.last_read = 0;
    }

    #[cfg(test)]
    pub(crate) fn register(&self) -> u64 {
        self.register
    }

    /// The driver reads the register and folds the delta into `count`. Events beyond one full
    /// wrap since the previous read are lost, as on the hardware.
    pub(crate) fn read(&mut self) -> u64 {
        let now = if self.bits > 32 {
            let reg = self.register;
            read_split_64(|| (reg >> 32) as u32, || reg as u32).0
        } else {
            self.register
        };
        self.count += wrapping_delta(self.last_read, now, self.bits);
        self.last_read = now;
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn high_low_high_retries_across_a_carry() {
        // The counter sits at 0x1_ffff_fffe and the hardware adds 4 between our reads of the
        // high and low halves on the first attempt only.
        let value = Cell::new(0x1_ffff_fffeu64);
        let reads = Cell::new(0);
        let high = || {
            reads.set(reads.get() + 1);
            (value.get() >> 32) as u32
        };
        let low = || {
            if reads.get() == 1 {
                value.set(value.get() + 4);
            }
            value.get() as u32
        };
        let (v, attempts) = read_split_64(high, low);
        assert_eq!(v, 0x2_0000_0002);
        assert_eq!(attempts, 2);
    }

    #[test]
    fn narrow_counters_wrap_and_lose_full_periods() {
        let mut c = HwCounter::new(4);
        c.add(13);
        assert_eq!(c.read(), 13);
        c.add(5); // register 18 mod 16 = 2
        assert_eq!(c.register(), 2);
        assert_eq!(c.read(), 18);
        c.add(16 + 3); // more than a full period between reads: 16 are lost
        assert_eq!(c.read(), 21);
        let mut wide = HwCounter::new(64);
        wide.add(6_777_637_176);
        assert_eq!(wide.read(), 6_777_637_176);
        let mut lane = HwCounter::new(32);
        lane.add(6_777_637_176);
        assert_eq!(lane.read(), 6_777_637_176 - (1 << 32));
        assert_eq!(wrapping_delta(0xffff_fff0, 0x10, 32), 0x20);
    }
}
