//! The way-partitioned L3 of one domain: a set-associative cache where a group may only fill the
//! ways its capacity bitmask allows but hits wherever a line is, with random replacement among
//! the allowed ways (Arm system caches replace pseudo-randomly; for the streams simulated here it
//! also avoids true LRU's all-or-nothing cliff). Each line remembers the monitor id (RMID, or
//! PARTID+PMG) that allocated it, so occupancy per monitor is an exact count, as CMT/CSU monitors
//! count. Sets are indexed through a hash, as sliced LLCs do, so strided streams use every set.

// The oracle the tuned L3 model is tested and benchmarked against: built for the unit tests
// below and the benches only (the `test-oracles` feature, Cargo.toml).
#[cfg(any(test, feature = "test-oracles"))]
pub mod reference;

/// Tag bits holding the line address + 1; the monitor id sits above them, so one load per way
/// answers both "is it here" and "whose is it".
const LINE_BITS: u32 = 48;
const LINE_MASK: u64 = (1 << LINE_BITS) - 1;

/// Line addresses the cache can hold: below 2^48 - 1.
pub(crate) const MAX_LINE: u64 = LINE_MASK - 1;

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

/// Asks the CPU to start loading the cache line holding `address`: a hint that never faults,
/// whatever the address. x86_64 has `prefetcht0` in its baseline (SSE) and aarch64 `prfm
/// pldl1keep` in its base instruction set (the Arm Architecture Reference Manual, PRFM), so
/// both get the overlapped set lookups the simulated runs are tuned for; elsewhere it does
/// nothing and the runs only wait longer on memory.
#[inline(always)]
pub(crate) fn prefetch_line(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; SSE is part of the x86_64 baseline.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>());
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: PRFM only hints the cache: it reads no register but `address`, writes none and
    // never faults.
    unsafe {
        core::arch::asm!(
            "prfm pldl1keep, [{address}]",
            address = in(reg) address,
            options(nostack, readonly, preserves_flags)
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = address;
}

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
#[derive(Debug)]
pub struct L3Cache {
    sets: usize,
    ways: usize,
    /// The ways as a bitmask (`ways` low bits set).
    way_mask: u64,
    /// Tags per set in `tags`: `ways` rounded up to whole vectors of four, so that a vector scan
    /// never reads past its set; the spare tags hold [`SPARE_TAG`].
    stride: usize,
    /// Where set 0 starts in `tags`: the first host-cache-line boundary, so that a 15- or
    /// 16-way set (128 bytes) lies in exactly two cache lines instead of three for most sets.
    origin: usize,
    /// `sets * stride` tags from `origin`: 0 is an empty way, otherwise `rmid << 48 | (line + 1)`.
    tags: Vec<u64>,
    occupancy: Vec<u64>,
    rng: u64,
}

/// What a set's tags past its last way hold: neither empty (0) nor any line (line + 1 is never
/// 0), so a vector scan needs no mask for them; outside every fill mask, they are never written.
const SPARE_TAG: u64 = 1 << LINE_BITS;

/// Tags per host cache line: the slack allocated so `origin` can be aligned.
const TAGS_PER_HOST_LINE: usize = 8;

impl Clone for L3Cache {
    /// A copy with its own tags aligned (a plain copy of the vector may start elsewhere in its
    /// cache line).
    fn clone(&self) -> L3Cache {
        let mut copy = L3Cache::new(self.sets, self.ways, self.occupancy.len());
        let len = self.sets * self.stride;
        copy.tags[copy.origin..copy.origin + len]
            .copy_from_slice(&self.tags[self.origin..self.origin + len]);
        copy.occupancy.clone_from(&self.occupancy);
        copy.rng = self.rng;
        copy
    }
}

impl L3Cache {
    /// A cold cache of `ways` ways (1 to 64); `monitors` is one more than the largest monitor id
    /// expected (it grows).
    pub fn new(sets: usize, ways: usize, monitors: usize) -> L3Cache {
        assert!(
            (1..=64).contains(&ways),
            "an L3 domain has 1 to 64 ways, not {ways}"
        );
        let (sets, stride) = (sets.max(1), ways.next_multiple_of(4));
        let mut tags = vec![0u64; sets * stride + TAGS_PER_HOST_LINE - 1];
        let origin = tags.as_ptr().align_offset(8 * TAGS_PER_HOST_LINE);
        for set in tags[origin..origin + sets * stride].chunks_exact_mut(stride) {
            set[ways..].fill(SPARE_TAG);
        }
        L3Cache {
            sets,
            ways,
            way_mask: u64::MAX >> (64 - ways),
            stride,
            origin,
            tags,
            occupancy: vec![0; monitors.max(1)],
            rng: 0x2545_f491_4f6c_dd1d,
        }
    }

    /// Lines the domain holds.
    pub(crate) fn lines(&self) -> usize {
        self.sets * self.ways
    }

    /// Accesses in flight in [`L3Cache::access_run`]: enough to overlap the tag loads of several
    /// random sets, few enough that prefetched sets are still in L1 when their turn comes (on
    /// the full-domain bench 8 measured up to 10 % slower than 16; 12 to 32 measured alike).
    const LOOKAHEAD: usize = 16;

    /// The first tag of the set `line` maps to.
    #[inline(always)]
    fn set_base(&self, line: u64) -> usize {
        let hash = line.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (line >> 29);
        let set = ((hash as u128 * self.sets as u128) >> 64) as usize;
        self.origin + set * self.stride
    }

    /// Ask the CPU to start loading the tags of the set at `base` ([`prefetch_line`]). With
    /// `origin` on a line boundary, a set of up to 16 ways lies in at most two host cache lines,
    /// its first and its last tag's (128-byte sets start on a boundary, 96-byte ones at most 32
    /// bytes past one): one prefetch each and no more (a third, redundant one measured 8 %
    /// slower); only larger sets, which no preset has, walk the lines between.
    #[inline(always)]
    fn prefetch_set(&self, base: usize) {
        let first = self.tags.as_ptr().wrapping_add(base).cast::<u8>();
        let last = first.wrapping_add(8 * self.stride - 1);
        prefetch_line(first);
        prefetch_line(last);
        if self.stride > 16 {
            let mut line = first.wrapping_add(64);
            while line < last {
                prefetch_line(line);
                line = line.wrapping_add(64);
            }
        }
    }

    /// `n` accesses, each `(line, alloc_mask, rmid)` as [`L3Cache::access`] takes them, made in
    /// the order `next` yields them (so with the same hits, victims and occupancy), but with the
    /// sets of the following accesses prefetched: a random set lookup waits on memory, and
    /// overlapping those waits is most of the speed. `next` is called exactly `n` times.
    ///
    /// Where the CPU has AVX2 (checked at run time, once per call), the run is compiled a second
    /// time with it enabled, so that a set's tags are compared four at a time and the victim
    /// count uses the POPCNT instruction.
    pub fn access_run(&mut self, n: usize, next: impl FnMut() -> (u64, u64, u16)) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if !cfg!(debug_assertions) && has_avx2() {
            // SAFETY: the CPU has just been seen to support the features the function enables.
            return unsafe { self.access_run_avx2(n, next) };
        }
        // Unoptimised builds (the tests) take the scalar run: there every vector intrinsic is an
        // out-of-line call, and the AVX2 run is about four times slower than the scalar one (the
        // qos_trends tests took 14.7 s instead of 3.5 s). The decisions are the same; the tests
        // run both explicitly.
        self.run::<ScalarScan>(n, next)
    }

    /// [`L3Cache::access_run`] compiled for CPUs with AVX2 and POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    fn access_run_avx2(&mut self, n: usize, next: impl FnMut() -> (u64, u64, u16)) -> u64 {
        self.run::<Avx2Scan>(n, next)
    }

    /// The prefetching run with set scans by `S`; inlined into each caller so that it is
    /// compiled with that caller's CPU features.
    #[inline(always)]
    fn run<S: WayScan>(&mut self, n: usize, mut next: impl FnMut() -> (u64, u64, u16)) -> u64 {
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
            hits += self.access_set::<S>(base, line, mask, rmid) as u64;
        }
        hits
    }

    /// One access to line `line` (at most `MAX_LINE`) by monitor `rmid` allowed to fill the
    /// ways in `alloc_mask` (bits at or above the way count are ignored); returns whether it hit.
    #[inline]
    #[cfg(test)]
    pub(crate) fn access(&mut self, line: u64, alloc_mask: u64, rmid: u16) -> bool {
        self.access_set::<ScalarScan>(self.set_base(line), line, alloc_mask, rmid)
    }

    /// [`L3Cache::access`] with the set's first tag already found.
    #[inline(always)]
    fn access_set<S: WayScan>(
        &mut self,
        base: usize,
        line: u64,
        alloc_mask: u64,
        rmid: u16,
    ) -> bool {
        debug_assert!(line <= MAX_LINE);
        let key = line.wrapping_add(1);
        let Some(empty) = S::scan(&self.tags[base..base + self.stride], self.ways, key) else {
            return true;
        };
        let allowed = alloc_mask & self.way_mask;
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
        let tag = &mut self.tags[base + way];
        let old = std::mem::replace(tag, (rmid as u64) << LINE_BITS | key);
        // A monitor replacing its own line keeps its count: skipping the two updates takes them
        // off the chain of loads and stores to the same counter that every miss would extend.
        if old == 0 || old >> LINE_BITS != rmid as u64 {
            if old != 0 {
                self.occupancy[(old >> LINE_BITS) as usize] -= 1;
            }
            if rmid as usize >= self.occupancy.len() {
                self.occupancy.resize(rmid as usize + 1, 0);
            }
            self.occupancy[rmid as usize] += 1;
        }
        false
    }

    /// (monitor id, lines) for every monitor holding lines.
    pub(crate) fn occupancy_by_monitor(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.occupancy
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| (r as u32, *n))
    }

    /// Lines currently allocated by monitor `rmid`.
    #[cfg(test)]
    pub(crate) fn occupancy_lines(&self, rmid: u32) -> u64 {
        self.occupancy.get(rmid as usize).copied().unwrap_or(0)
    }
}

/// Whether this CPU can run [`L3Cache::access_run_avx2`].
#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("popcnt")
}

/// How a set's tags are searched for a line.
trait WayScan {
    /// `None` when one of the first `ways` tags of `set` holds `key` (line + 1), else those of
    /// them that are empty, as a bitmask (`set` holds whole vectors of four tags, the spare ones
    /// [`SPARE_TAG`]).
    fn scan(set: &[u64], ways: usize, key: u64) -> Option<u64>;
}

/// One tag at a time, stopping at a hit: any CPU.
struct ScalarScan;

impl WayScan for ScalarScan {
    #[inline(always)]
    fn scan(set: &[u64], ways: usize, key: u64) -> Option<u64> {
        let mut empty = 0u64;
        for (w, &t) in set[..ways].iter().enumerate() {
            if t & LINE_MASK == key {
                return None;
            }
            empty |= ((t == 0) as u64) << w;
        }
        Some(empty)
    }
}

/// Four tags per AVX2 compare, without branches inside a vector: most accesses in the simulated
/// streams miss and read every way anyway, and a 15-way set is four vectors instead of fifteen
/// compare-and-branch steps. The compares of all vectors are ORed and tested once for a hit and
/// once for an empty way; only a set that has empty ways (while the cache fills, or ways that no
/// group may use) is compared again to find which. Only for code compiled with AVX2 enabled.
#[cfg(target_arch = "x86_64")]
struct Avx2Scan;

#[cfg(target_arch = "x86_64")]
impl WayScan for Avx2Scan {
    #[inline(always)]
    fn scan(set: &[u64], _ways: usize, key: u64) -> Option<u64> {
        use core::arch::x86_64::*;
        // SAFETY: every load reads four tags inside `set` (`chunks_exact`); this runs only
        // inside functions compiled with AVX2 enabled, on CPUs checked to have it.
        unsafe {
            let key = _mm256_set1_epi64x(key as i64);
            let line_mask = _mm256_set1_epi64x(LINE_MASK as i64);
            let zero = _mm256_setzero_si256();
            let (mut hits, mut empties) = (zero, zero);
            for four in set.chunks_exact(4) {
                let t = _mm256_loadu_si256(four.as_ptr() as *const __m256i);
                let hit = _mm256_cmpeq_epi64(_mm256_and_si256(t, line_mask), key);
                hits = _mm256_or_si256(hits, hit);
                empties = _mm256_or_si256(empties, _mm256_cmpeq_epi64(t, zero));
            }
            if _mm256_testz_si256(hits, hits) == 0 {
                return None;
            }
            if _mm256_testz_si256(empties, empties) == 1 {
                return Some(0);
            }
            let mut empty = 0u64;
            for (v, four) in set.chunks_exact(4).enumerate() {
                let t = _mm256_loadu_si256(four.as_ptr() as *const __m256i);
                let lanes = _mm256_castsi256_pd(_mm256_cmpeq_epi64(t, zero));
                empty |= (_mm256_movemask_pd(lanes) as u64) << (4 * v);
            }
            Some(empty)
        }
    }
}

#[cfg(test)]
impl L3Cache {
    /// The `ways` tags of every set, set after set (as the reference stores them); checks that
    /// every spare tag is still [`SPARE_TAG`].
    fn tags_by_set(&self) -> Vec<u64> {
        let sets =
            self.tags[self.origin..self.origin + self.sets * self.stride].chunks(self.stride);
        assert!(sets
            .clone()
            .all(|set| set[self.ways..].iter().all(|&t| t == SPARE_TAG)));
        sets.flat_map(|set| &set[..self.ways]).copied().collect()
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
            for n in [0, 1, 5, 15, 16, 17, 3000].into_iter().cycle() {
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
            assert_eq!(run.tags_by_set(), single.tags_by_set(), "{sets}x{ways}");
            assert_eq!(
                run.occupancy_by_monitor().collect::<Vec<_>>(),
                single.occupancy_by_monitor().collect::<Vec<_>>()
            );
        }
    }
}

/// The tuned model against [`reference`], the implementation it replaced: every hit, tag (so
/// every victim and owner) and occupancy count must be the same, for every way of making
/// accesses (dispatched run, scalar run, single accesses).
#[cfg(test)]
mod oracle_tests {
    use super::*;

    fn xorshift(rng: &mut u64) -> u64 {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    }

    /// A random access: lines from a stream, from random picks over twice the cache and from a
    /// small hot set (so runs both hit and miss); masks from contiguous way ranges, whole random
    /// 64-bit words (bits above the way count included), all ways, none, and only bits above
    /// the way count; monitors mostly below the 4 the caches start with, sometimes up to 299
    /// (growing the occupancy counters).
    fn random_access(i: u64, rng: &mut u64, lines: u64, ways: usize) -> (u64, u64, u16) {
        let r = xorshift(rng);
        let line = match r % 3 {
            0 => i % (3 * lines),
            1 => (1 << 40) | ((r >> 20) % (2 * lines)),
            _ => (3 << 36) | ((r >> 24) % 97),
        };
        let low = (r >> 8) as usize % ways;
        let mask = match (r >> 16) % 8 {
            0..=2 => (u64::MAX >> (63 - (r >> 24) as usize % (ways - low))) << low,
            3 | 4 => xorshift(rng),
            5 => !0,
            6 => 0,
            _ => !0 << (ways - 1) << 1,
        };
        let rmid = if (r >> 40).is_multiple_of(64) {
            (r >> 48) % 300
        } else {
            (r >> 48) % 4
        } as u16;
        (line.min(MAX_LINE), mask, rmid)
    }

    /// The AVX2 run, whatever the build (`access_run` takes it only in optimised ones); the
    /// scalar run where the CPU lacks AVX2.
    fn vector_run(cache: &mut L3Cache, n: usize, next: impl FnMut() -> (u64, u64, u16)) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: the CPU has the features the function enables.
            return unsafe { cache.access_run_avx2(n, next) };
        }
        cache.run::<ScalarScan>(n, next)
    }

    /// A `next` for [`L3Cache::access_run`] that yields `batch` in order.
    fn replay(batch: &[(u64, u64, u16)]) -> impl FnMut() -> (u64, u64, u16) + '_ {
        let mut next = batch.iter().copied();
        move || next.next().unwrap()
    }

    /// Run lengths around the lookahead and long ones, as the engine's quotas are.
    const RUNS: [usize; 9] = [0, 1, 7, 15, 16, 17, 100, 5000, 40_000];

    fn check_shape(sets: usize, ways: usize, accesses: usize) {
        let lines = (sets * ways) as u64;
        let mut oracle = reference::L3Cache::new(sets, ways, 4);
        let mut dispatched = L3Cache::new(sets, ways, 4);
        let mut vector = L3Cache::new(sets, ways, 4);
        let mut scalar = L3Cache::new(sets, ways, 4);
        let mut single = L3Cache::new(sets, ways, 4);
        let mut rng = 0x0bad_5eed_1234_5678 ^ lines;
        let (mut done, mut hits) = (0, 0);
        for n in RUNS.into_iter().cycle() {
            let n = n.min(accesses - done);
            let batch: Vec<_> = (done..done + n)
                .map(|i| random_access(i as u64, &mut rng, lines, ways))
                .collect();
            done += n;
            let expected = oracle.access_run(n, replay(&batch));
            let shape = format!("{sets}x{ways} after {done}");
            assert_eq!(
                dispatched.access_run(n, replay(&batch)),
                expected,
                "{shape}"
            );
            assert_eq!(
                scalar.run::<ScalarScan>(n, replay(&batch)),
                expected,
                "{shape}"
            );
            assert_eq!(
                vector_run(&mut vector, n, replay(&batch)),
                expected,
                "{shape}"
            );
            let single_hits = batch
                .iter()
                .filter(|&&(l, m, r)| single.access(l, m, r))
                .count();
            assert_eq!(single_hits as u64, expected, "{shape}");
            hits += expected;
            if done == accesses {
                break;
            }
        }
        // Hits and misses both common, so victims were chosen in every way (random and empty).
        assert!(hits > accesses as u64 / 20, "{sets}x{ways}: {hits}");
        assert!(hits < accesses as u64 * 19 / 20, "{sets}x{ways}: {hits}");
        let occupancy: Vec<_> = oracle.occupancy_by_monitor().collect();
        // Monitors above the initial four filled lines, so the counters grew.
        assert!(dispatched.occupancy.len() > 4, "{sets}x{ways}");
        for cache in [&dispatched, &vector, &scalar, &single, &dispatched.clone()] {
            assert_eq!(cache.tags_by_set(), oracle.tags, "{sets}x{ways}");
            assert_eq!(cache.occupancy_by_monitor().collect::<Vec<_>>(), occupancy);
            assert_eq!(cache.rng, oracle.rng, "{sets}x{ways}");
        }
    }

    #[test]
    fn the_tuned_model_decides_exactly_as_the_reference() {
        // The presets' 15 and 11 ways, a power of two, vectors with 1 and 3 spare lanes, a
        // single way, and the most ways the reference handles (its mask is `(1 << ways) - 1`).
        for (sets, ways) in [
            (1024, 15),
            (512, 11),
            (300, 16),
            (97, 3),
            (64, 1),
            (50, 40),
            (20, 63),
        ] {
            check_shape(sets, ways, 300_000);
        }
    }

    #[test]
    fn sixty_four_ways_are_all_filled() {
        // One set: every line maps to it, and an all-ways mask fills every way before evicting.
        let mut cache = L3Cache::new(1, 64, 1);
        for line in 0..64 {
            assert!(!cache.access(line, !0, 0));
        }
        assert_eq!(cache.occupancy_lines(0), 64);
        let mut lines = 0..64;
        assert_eq!(cache.access_run(64, || (lines.next().unwrap(), !0, 0)), 64);
    }
}
