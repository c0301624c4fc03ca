//! The property only a global optimum has, on DMA rows made by the platform model itself plus
//! measurement noise: the fit is never beaten on its own rows by the parameters that made them.
//! A fit that stops at a local optimum (a per-TLP slot or a rate limit left where it paces no
//! row) fails it. Here on the case that the particle swarm failed; the random property tests
//! are not in the suite because the branch and bound fails them too (docs/calibration.md,
//! "Counterexamples the branch and bound fails"). "Never beaten" is up to the fit's stated
//! tolerance: 0.1 % of the cost.

use pcielab::model::fit::{fit, predict};
use pcielab::model::platform::{DmaDirection, PlatformModel, P};
use pcielab::model::transfer::LinkParams;
use pcielab::model::{Measurement, Workload};
use pcielab::pcie::Generation;

fn link() -> LinkParams {
    LinkParams::new(Generation::Gen3, 8)
}

/// Writes and reads of every size in `sizes`, as `truth` predicts them times `1 + noise`.
fn rows(truth: &PlatformModel, sizes: &[u64], noise: &[f64]) -> Vec<Measurement> {
    let mut out = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        for (k, direction) in [DmaDirection::Write, DmaDirection::Read]
            .into_iter()
            .enumerate()
        {
            let workload = Workload::Dma { direction, size };
            let mbps =
                predict(truth, &workload, &link()).0 * (1.0 + noise[(2 * i + k) % noise.len()]);
            out.push(Measurement {
                workload,
                mbps,
                latency_ns: None,
                line: out.len() + 2,
                link: None,
            });
        }
    }
    out
}

/// The least-squares cost the fit minimises: Σ ln(predicted / measured)².
fn cost(model: &PlatformModel, rows: &[Measurement]) -> f64 {
    rows.iter()
        .map(|m| {
            (predict(model, &m.workload, &link()).0 / m.mbps)
                .ln()
                .powi(2)
        })
        .sum()
}

/// Within the global stage's tolerance (0.1 % of the cost, and 1e-9 for rows reproduced
/// exactly).
fn no_worse(fitted: f64, rival: f64) -> bool {
    fitted <= rival * (1.0 + 1e-3) + 1e-9
}

/// The counterexample that the particle swarm's fit (before issue 34's branch and bound) failed,
/// kept from proptest's saved case:
/// writes bound by a 1500 MB/s posted rate, reads by five requests in flight, sizes at and one
/// past 1 KB and up to 1 MiB.
#[test]
fn the_fit_beats_the_parameters_that_made_the_swarms_counterexample() {
    let mut truth = PlatformModel::default();
    truth.set(P::PostedWriteMbps, 1500.0);
    truth.set(P::CompletionMbps, 5285.507672178148);
    truth.set(P::ReadLatencyNs, 436.580576295144);
    truth.set(P::ReadLatencyPerByteNs, 0.26769595165107263);
    truth.set(P::DmaSetupNs, 300.0);
    truth.set(P::DmaMaxReadRequests, 5.0);
    let noise = [
        0.0,
        0.0,
        0.01707579103141672,
        0.0,
        0.0,
        -0.012497793477603367,
        0.0,
        0.0,
        0.0,
        0.0,
    ];
    let rows = rows(&truth, &[1024, 1025, 4096, 65536, 1 << 20], &noise);
    let fitted = fit(&rows, &link(), "counterexample").unwrap();
    let (got, made) = (cost(&fitted.model, &rows), cost(&truth, &rows));
    assert!(
        no_worse(got, made),
        "fit {got:.3e} against the truth's {made:.3e}\n{}",
        fitted.to_text()
    );
}
