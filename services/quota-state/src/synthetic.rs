//! Synthetic state for benchmarks: a two-level tree (one parent per 100 leaf quotas) and running
//! pods spread over the leaves.

use admission_kit::compat::go::QuantityFormat;

use crate::ledger::{Amount, Amounts, Ledger, QuotaSpec};

fn cpu_mem(cpu: i64, mem_gi: i64) -> Amounts {
    Amounts::from([
        (
            "cpu".to_owned(),
            Amount {
                nano: i128::from(cpu) * 1_000_000_000,
                format: QuantityFormat::DecimalSI,
            },
        ),
        (
            "memory".to_owned(),
            Amount {
                nano: (i128::from(mem_gi) << 30) * 1_000_000_000,
                format: QuantityFormat::BinarySI,
            },
        ),
    ])
}

/// Name of leaf quota `i`.
pub fn leaf(i: usize) -> String {
    format!("leaf-{i}")
}

/// Name of member cluster `i` of a synthetic fleet.
pub fn member(i: usize) -> String {
    format!("m{i}")
}

/// Fills `ledger` with `quotas` quotas (≈1 % of them parents) and `pods` running pods.
pub fn fill(ledger: &Ledger, quotas: usize, pods: usize) {
    fill_fleet(ledger, quotas, pods, 0);
}

/// [`fill`], the pods spread over `members` member clusters ([`member`]) in turn; 0: one
/// cluster.
pub fn fill_fleet(ledger: &Ledger, quotas: usize, pods: usize, members: usize) {
    let parents = quotas.div_ceil(101).max(1);
    let leaves = quotas.saturating_sub(parents).max(1);
    for p in 0..parents {
        let mut q = QuotaSpec::simple(
            &format!("parent-{p}"),
            &format!("team-{p}"),
            None,
            cpu_mem(1_000_000, 4_000_000),
        );
        q.info.is_parent = true;
        ledger.upsert_quota(q);
    }
    for i in 0..leaves {
        let mut q = QuotaSpec::simple(
            &leaf(i),
            &format!("team-{}", i % parents),
            Some(&format!("parent-{}", i % parents)),
            cpu_mem(10_000, 40_000),
        );
        q.namespaces = vec![format!("ns-{i}")];
        ledger.upsert_quota(q);
    }
    for n in 0..pods {
        let q = leaf(n % leaves);
        let cluster = if members == 0 {
            String::new()
        } else {
            member(n % members)
        };
        ledger.observe_pod_usage_in(
            &cluster,
            &format!("ns-{}", n % leaves),
            &format!("pod-{n}"),
            &q,
            Ok(cpu_mem(1, 2)),
        );
    }
}
