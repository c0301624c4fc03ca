//! The way-partitioned L3 of one domain: a set-associative cache where a group may only fill the
//! ways its capacity bitmask allows but hits wherever a line is, with random replacement among
//! the allowed ways (Arm system caches replace pseudo-randomly; for the streams simulated here it
//! also avoids true LRU's all-or-nothing cliff). Each line remembers the monitor id (RMID, or
//! PARTID+PMG) that allocated it, so occupancy per monitor is an exact count, as CMT/CSU monitors
//! count. Sets are indexed through a hash, as sliced LLCs do, so strided streams use every set.

/// Tag bits holding the line address + 1; the monitor id sits above them, so one load per way
/// answers both "is it here" and "whose is it".
const LINE_BITS: u32 = 48;
const LINE_MASK: u64 = (1 << LINE_BITS) - 1;

/// Line addresses the cache can hold: below 2^48 - 1.
pub const MAX_LINE: u64 = LINE_MASK - 1;

/// `NTH_SET_BIT[b][n]`: the position of the `n`-th set bit of byte `b` (0 where there is none), so
/// the random victim among a group's ways is two table loads instead of a data-dependent loop.
const NTH_SET_BIT: [[u8; 8]; 256] = {
    let mut table = [[0u8; 8]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut n = 0;
        let mut bit = 0;
        while bit < 8 {
            if byte & (1 << bit) != 0 {
                table[byte][n] = bit as u8;
                n += 1;
            }
            bit += 1;
        }
        byte += 1;
    }
    table
};

/// Position of the `n`-th (from 0) set bit of `mask`, which has more than `n` set bits.
#[inline]
fn nth_set_bit(mask: u64, n: u32) -> u32 {
    let low = (mask & 0xff) as usize;
    let low_count = low.count_ones();
    if mask >> 16 == 0 {
        // Both candidates load from valid entries, so the choice compiles to a select.
        let high = (mask >> 8) as usize;
        let in_low = NTH_SET_BIT[low][(n & 7) as usize] as u32;
        let in_high = 8 + NTH_SET_BIT[high][(n.wrapping_sub(low_count) & 7) as usize] as u32;
        return if n < low_count { in_low } else { in_high };
    }
    let mut m = mask;
    for _ in 0..n {
        m &= m - 1;
    }
    m.trailing_zeros()
}

/// One L3 domain.
#[derive(Debug, Clone)]
pub struct L3Cache {
    sets: usize,
    ways: usize,
    /// `sets * ways` tags: 0 is an empty way, otherwise `rmid << 48 | (line + 1)`.
    tags: Vec<u64>,
    occupancy: Vec<u64>,
    rng: u64,
}

impl L3Cache {
    /// A cold cache; `monitors` is one more than the largest monitor id expected (it grows).
    pub fn new(sets: usize, ways: usize, monitors: usize) -> L3Cache {
        L3Cache {
            sets: sets.max(1),
            ways,
            tags: vec![0; sets.max(1) * ways],
            occupancy: vec![0; monitors.max(1)],
            rng: 0x2545_f491_4f6c_dd1d,
        }
    }

    pub fn lines(&self) -> usize {
        self.sets * self.ways
    }

    /// Accesses in flight in [`L3Cache::access_run`]: enough to overlap the tag loads of several
    /// random sets, few enough that prefetched sets are still in L1 when their turn comes.
    const LOOKAHEAD: usize = 8;

    /// The first tag of the set `line` maps to.
    #[inline]
    fn set_base(&self, line: u64) -> usize {
        let hash = line.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (line >> 29);
        let set = ((hash as u128 * self.sets as u128) >> 64) as usize;
        set * self.ways
    }

    /// Ask the CPU to start loading the tags at `base` (a hint: nothing happens off x86_64).
    #[inline]
    fn prefetch_set(&self, base: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let tags = self.tags[base..base + self.ways].as_ptr_range();
            let (first, last) = (tags.start as *const i8, tags.end as *const i8);
            // SAFETY: prefetching is a hint that never faults; SSE is part of the x86_64
            // baseline. A set spans at most three host cache lines.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(first);
                _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(64).min(last.wrapping_sub(1)));
                _mm_prefetch::<_MM_HINT_T0>(last.wrapping_sub(1));
            }
        }
    }

    /// `n` accesses, each `(line, alloc_mask, rmid)` as [`L3Cache::access`] takes them, made in
    /// the order `next` yields them (so with the same hits, victims and occupancy), but with the
    /// sets of the following accesses prefetched: a random set lookup waits on memory, and
    /// overlapping those waits is most of the speed. `next` is called exactly `n` times.
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

    /// One access to line `line` (at most [`MAX_LINE`]) by monitor `rmid` allowed to fill the
    /// ways in `alloc_mask`; returns whether it hit.
    #[inline]
    pub fn access(&mut self, line: u64, alloc_mask: u64, rmid: u16) -> bool {
        self.access_set(self.set_base(line), line, alloc_mask, rmid)
    }

    /// [`L3Cache::access`] with the set's first tag already found.
    #[inline]
    fn access_set(&mut self, base: usize, line: u64, alloc_mask: u64, rmid: u16) -> bool {
        debug_assert!(line <= MAX_LINE);
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
        // An empty way the group may fill, else a random one of its ways.
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
    pub fn occupancy_by_monitor(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.occupancy
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| (r as u32, *n))
    }

    /// Lines currently allocated by monitor `rmid`.
    pub fn occupancy_lines(&self, rmid: u32) -> u64 {
        self.occupancy.get(rmid as usize).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_fills_only_its_ways_but_hits_anywhere() {
        let mut c = L3Cache::new(64, 4, 3);
        // Group 1 may use way 0 only: at most 64 lines, whatever it streams.
        for line in 0..10_000 {
            c.access(line, 0b0001, 1);
        }
        assert_eq!(c.occupancy_lines(1), 64);
        // Group 2 (ways 1-3) streams 192 lines, about what fits in its 3 ways.
        for _ in 0..4 {
            for line in 100_000..100_192 {
                c.access(line, 0b1110, 2);
            }
        }
        let filled = c.occupancy_lines(2);
        assert!((150..=192).contains(&filled), "{filled}");
        // Group 1 reading group 2's lines hits where they are; its misses only refill way 0.
        let hits = (100_000..100_192)
            .filter(|&l| c.access(l, 0b0001, 1))
            .count();
        assert!(hits > 120, "{hits}");
        assert_eq!(c.occupancy_lines(1), 64);
        assert_eq!(c.occupancy_lines(2), filled);
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;

    /// Three groups with overlapping masks, one of them allowed no way of a 3-way cache.
    fn mixed_access(i: u64, rng: &mut u64, lines: u64) -> (u64, u64, u16) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        match i % 3 {
            0 => ((*rng >> 40) % (2 * lines), 0x7ff0, 1),
            1 => (1 << 36 | (i % (3 * lines)), 0x000f, 2),
            _ => (2 << 36 | ((*rng >> 20) % 5000), !0, 3),
        }
    }

    #[test]
    fn a_prefetching_run_decides_exactly_as_single_accesses() {
        for (sets, ways) in [(1024, 15), (512, 11), (300, 16), (7, 3)] {
            let lines = (sets * ways) as u64;
            let mut single = L3Cache::new(sets, ways, 4);
            let mut rng = 0x1234_5678_9abc_def1;
            let mut hits = 0;
            for i in 0..60_000 {
                let (line, mask, rmid) = mixed_access(i, &mut rng, lines);
                hits += single.access(line, mask, rmid) as u64;
            }
            let mut run = L3Cache::new(sets, ways, 4);
            let mut rng = 0x1234_5678_9abc_def1;
            let mut i = 0;
            let mut run_hits = 0;
            // Runs shorter and longer than the lookahead, as the engine's quotas are.
            for n in [0, 1, 5, 8, 9, 3000].into_iter().cycle() {
                let n = n.min(60_000 - i as usize);
                run_hits += run.access_run(n, || {
                    i += 1;
                    mixed_access(i - 1, &mut rng, lines)
                });
                if i == 60_000 {
                    break;
                }
            }
            assert!(hits > 1000 && hits < 59_000, "{sets}x{ways}: {hits}");
            assert_eq!(run_hits, hits, "{sets}x{ways}");
            assert_eq!(run.tags, single.tags, "{sets}x{ways}");
            assert_eq!(
                run.occupancy_by_monitor().collect::<Vec<_>>(),
                single.occupancy_by_monitor().collect::<Vec<_>>()
            );
        }
    }
}
