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

    /// One access to line `line` (at most [`MAX_LINE`]) by monitor `rmid` allowed to fill the
    /// ways in `alloc_mask`; returns whether it hit.
    #[inline]
    pub fn access(&mut self, line: u64, alloc_mask: u64, rmid: u16) -> bool {
        debug_assert!(line <= MAX_LINE);
        let key = line.wrapping_add(1);
        let hash = line.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (line >> 29);
        let set = ((hash as u128 * self.sets as u128) >> 64) as usize;
        let base = set * self.ways;
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
            let mut m = allowed;
            for _ in 0..pick {
                m &= m - 1;
            }
            m.trailing_zeros() as usize
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
