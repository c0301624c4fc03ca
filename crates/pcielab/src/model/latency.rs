//! The latency bound on reads: a requester can only have so many read requests in flight (tags,
//! and the completer's non-posted header credits), each fetching at most MRRS bytes and taking a
//! round trip to complete, so a read stream cannot beat `outstanding bytes / round-trip time`
//! however fast the link is. The simulator combines this with the link time from
//! [`super::transfer`]; `pcielab model` prints the link-limited figure only.

#[cfg(test)]
use super::transfer::{LinkParams, Overheads, Traffic};

/// What limits reads in flight, and how long one takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ReadConcurrency {
    /// Read tags the requester may have outstanding (32 with 5-bit tags, 256 with 8-bit, 768 or
    /// more with 10-bit tags).
    pub(crate) tags: u32,
    /// Non-posted request header credits the completer advertises; `None` for infinite.
    pub(crate) np_header_credits: Option<u32>,
    /// From issuing a read request to receiving its last completion, in nanoseconds.
    pub(crate) round_trip_ns: f64,
}

impl ReadConcurrency {
    /// Read requests that can be in flight at once.
    pub(crate) fn outstanding_requests(&self) -> u32 {
        self.np_header_credits
            .map_or(self.tags, |credits| credits.min(self.tags))
    }

    /// Bytes in flight at once with requests of `mrrs` bytes.
    pub(crate) fn outstanding_bytes(&self, mrrs: u32) -> u64 {
        u64::from(self.outstanding_requests()) * u64::from(mrrs)
    }

    /// The read throughput ceiling this concurrency allows, in MB/s (bytes per microsecond).
    pub(crate) fn bound_mbps(&self, mrrs: u32) -> f64 {
        self.outstanding_bytes(mrrs) as f64 / self.round_trip_ns * 1000.0
    }

    /// Time to finish one read: requests go out in waves of `outstanding_requests`, each wave
    /// taking a round trip, unless the link itself is slower (then it is link time plus the one
    /// round trip before the first completion arrives).
    #[cfg(test)]
    pub(crate) fn read_time_ns(
        &self,
        read: &Traffic,
        link: &LinkParams,
        overheads: Overheads,
    ) -> f64 {
        if read.mem_reads == 0 {
            return 0.0;
        }
        let waves = read
            .mem_reads
            .div_ceil(u64::from(self.outstanding_requests().max(1)));
        let latency_bound = waves as f64 * self.round_trip_ns;
        let link_bound = read.link_time_ns(link, overheads) + self.round_trip_ns;
        latency_bound.max(link_bound)
    }
}

/// Streaming read throughput: the lesser of the link's and the latency bound, in MB/s.
#[cfg(test)]
pub(crate) fn read_mbps(
    read: &Traffic,
    link: &LinkParams,
    overheads: Overheads,
    concurrency: &ReadConcurrency,
) -> f64 {
    read.throughput_mbps(link, overheads)
        .min(concurrency.bound_mbps(link.mrrs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::transfer::read;
    use crate::pcie::Generation;

    #[test]
    fn credits_cap_tags_and_the_bound_follows_littles_law() {
        let c = ReadConcurrency {
            tags: 32,
            np_header_credits: Some(16),
            round_trip_ns: 1000.0,
        };
        assert_eq!(c.outstanding_requests(), 16);
        // 16 × 512 B per microsecond.
        assert!((c.bound_mbps(512) - 8192.0).abs() < 1e-9);
    }

    #[test]
    fn slow_round_trips_cap_a_fast_link() {
        let link = LinkParams::new(Generation::Gen4, 16);
        let r = read(1 << 20, &link);
        let few_tags = ReadConcurrency {
            tags: 8,
            np_header_credits: None,
            round_trip_ns: 2000.0,
        };
        // 8 × 512 B / 2 µs = 2048 MB/s, far below the x16 link.
        let mbps = read_mbps(&r, &link, Overheads::Full, &few_tags);
        assert!((mbps - 2048.0).abs() < 1e-9, "{mbps}");
        // 2048 requests in waves of 8, 2 µs each.
        let t = few_tags.read_time_ns(&r, &link, Overheads::Full);
        assert!((t - 256.0 * 2000.0).abs() < 1e-6, "{t}");
        let many_tags = ReadConcurrency {
            tags: 1024,
            ..few_tags
        };
        let t = many_tags.read_time_ns(&r, &link, Overheads::Full);
        let link_ns = r.link_time_ns(&link, Overheads::Full);
        assert!((t - (link_ns + 2000.0)).abs() < 1e-6);
    }
}
