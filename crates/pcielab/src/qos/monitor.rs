//! `qos monitor`: each group's L3 occupancy and memory-bandwidth rates over fixed intervals,
//! from two readings of the monitoring counters an interval apart.

use std::time::Duration;

use super::backend::QosBackend;
use super::view::{monitor_rows, MonitorRow};
use crate::error::{Error, Result};

/// Reads `count` intervals of `interval` each; `each` gets an interval's rows as soon as it
/// ends (a failure there stops the monitor). The machine's state is saved after the last.
pub fn monitor(
    backend: &mut dyn QosBackend,
    interval: Duration,
    count: u32,
    mut each: impl FnMut(Vec<MonitorRow>) -> Result<()>,
) -> Result<()> {
    if interval.is_zero() {
        return Err(Error::bad_input("-I must be at least 1 ms"));
    }
    backend.check_waits(interval, count)?;
    for _ in 0..count.max(1) {
        let before = backend.mon_data()?;
        backend.wait(interval)?;
        let after = backend.mon_data()?;
        // Whole milliseconds over 1000, as the interval was given.
        let seconds = interval.as_millis() as f64 / 1000.0;
        each(monitor_rows(&before, &after, seconds))?;
    }
    backend.save()
}
