//! The L3 model as it was before the vector way scan: one tag at a time with an early exit on a
//! hit, kept unchanged as the oracle that [`super::L3Cache`] is tested against decision for
//! decision (hits, tags, victims, occupancy; tests in `cache.rs`) and benchmarked against
//! (benches/qos.rs). Not for other use: it is slower and answers nothing the tuned model does not.
//! Its set hash and victim RNG are its own copies on purpose, so that a change to the tuned
//! model's copies shows up as a difference instead of being shared by both sides.

use super::{nth_set_bit, prefetch_line, LINE_BITS, LINE_MASK};

/// One L3 domain, as [`super::L3Cache`] models it, the way it was computed before.
#[derive(Debug, Clone)]
pub struct L3Cache {
    sets: usize,
    ways: usize,
    /// `sets * ways` tags: 0 is an empty way, otherwise `rmid << 48 | (line + 1)`.
    pub(super) tags: Vec<u64>,
    occupancy: Vec<u64>,
    pub(super) rng: u64,
}

impl L3Cache {
    /// A cold cache with `ways` below 64 (its way mask is `(1 << ways) - 1`).
    pub fn new(sets: usize, ways: usize, monitors: usize) -> L3Cache {
        L3Cache {
            sets: sets.max(1),
            ways,
            tags: vec![0; sets.max(1) * ways],
            occupancy: vec![0; monitors.max(1)],
            rng: 0x2545_f491_4f6c_dd1d,
        }
    }

    const LOOKAHEAD: usize = 8;

    #[inline]
    fn set_base(&self, line: u64) -> usize {
        let hash = line.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (line >> 29);
        let set = ((hash as u128 * self.sets as u128) >> 64) as usize;
        set * self.ways
    }

    #[inline]
    fn prefetch_set(&self, base: usize) {
        let tags = self.tags[base..base + self.ways].as_ptr_range();
        let (first, last) = (tags.start.cast::<u8>(), tags.end.cast::<u8>());
        prefetch_line(first);
        prefetch_line(first.wrapping_add(64).min(last.wrapping_sub(1)));
        prefetch_line(last.wrapping_sub(1));
    }

    /// `n` accesses from `next`, the sets of the next `Self::LOOKAHEAD` prefetched.
    pub fn access_run(&mut self, n: usize, mut next: impl FnMut() -> (u64, u64, u16)) -> u64 {
        let mut ahead = [(0u64, 0u64, 0u16, 0usize); Self::LOOKAHEAD];
        for slot in ahead.iter_mut().take(n) {
            let (line, mask, rmid) = next();
            let base = self.set_base(line);
            self.prefetch_set(base);
            *slot = (line, mask, rmid, base);
        }
        let mut hits = 0;
        for k in 0..n {
            let slot = k % Self::LOOKAHEAD;
            let (line, mask, rmid, base) = ahead[slot];
            if k + Self::LOOKAHEAD < n {
                let (l, m, r) = next();
                let b = self.set_base(l);
                self.prefetch_set(b);
                ahead[slot] = (l, m, r, b);
            }
            hits += self.access_set(base, line, mask, rmid) as u64;
        }
        hits
    }

    /// One access; returns whether it hit.
    #[inline]
    pub fn access(&mut self, line: u64, alloc_mask: u64, rmid: u16) -> bool {
        self.access_set(self.set_base(line), line, alloc_mask, rmid)
    }

    #[inline]
    fn access_set(&mut self, base: usize, line: u64, alloc_mask: u64, rmid: u16) -> bool {
        let key = line.wrapping_add(1);
        let tags = &mut self.tags[base..base + self.ways];
        let mut empty = 0u64;
        for (w, &t) in tags.iter().enumerate() {
            if t & LINE_MASK == key {
                return true;
            }
            empty |= ((t == 0) as u64) << w;
        }
        let allowed = alloc_mask & ((1u64 << self.ways) - 1);
        if allowed == 0 {
            return false;
        }
        let way = if empty & allowed != 0 {
            (empty & allowed).trailing_zeros() as usize
        } else {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let pick = ((self.rng >> 32) * allowed.count_ones() as u64) >> 32;
            nth_set_bit(allowed, pick as u32) as usize
        };
        let old = tags[way];
        tags[way] = (rmid as u64) << LINE_BITS | key;
        if old != 0 {
            self.occupancy[(old >> LINE_BITS) as usize] -= 1;
        }
        if rmid as usize >= self.occupancy.len() {
            self.occupancy.resize(rmid as usize + 1, 0);
        }
        self.occupancy[rmid as usize] += 1;
        false
    }

    /// (monitor id, lines) for every monitor holding lines.
    #[cfg(test)]
    pub(crate) fn occupancy_by_monitor(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.occupancy
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| (r as u32, *n))
    }
}
