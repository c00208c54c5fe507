//! The fuzzing entry point (`quota_state::fuzzing::run`, also the libFuzzer target in
//! `fuzz/`, run by `cargo xtask fuzz`) on seeded inputs, bounded, in the test command: random bytes, and
//! sequences of well-formed calls with extreme amounts, names and sizes. Nothing may panic.

use prost::Message;
use quota_protocol::proto::{
    AdmitPodRequest, AdmitPodsRequest, Amount, LookupRequest, ReleaseRequest,
};

fn chunk(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.extend_from_slice(payload);
}

fn name(rng: &mut fastrand::Rng) -> String {
    match rng.u32(0..6) {
        0 => String::new(),
        1 => "x".repeat(rng.usize(60..300)),
        2 => "Bad Name/..".into(),
        _ => format!("p{}", rng.u32(0..4)),
    }
}

fn amount(rng: &mut fastrand::Rng) -> Amount {
    let milli = match rng.u32(0..6) {
        0 => i64::MAX,
        1 => i64::MIN,
        2 => -rng.i64(1..1_000_000),
        _ => rng.i64(0..100_000),
    };
    Amount {
        milli,
        milli_high: match rng.u32(0..5) {
            0 => i64::MAX,
            1 => i64::MIN,
            2 => 1,
            _ => 0,
        },
        format: rng.u32(0..4),
        sub_milli_nano: match rng.u32(0..5) {
            0 => i32::MAX,
            1 => i32::MIN,
            2 => -rng.i32(0..1_000_000),
            _ => 0,
        },
    }
}

#[test]
fn arbitrary_inputs_never_panic() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2_000 {
        let len = rng.usize(0..2048);
        let bytes: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
        quota_state::fuzzing::run(&bytes);
    }
    let quota = br#"{"metadata":{"name":"p0","namespace":"p1","labels":{"quota.scheduling.koordinator.sh/parent":"p2"}},"spec":{"max":{"cpu":"1e40","memory":"-1"}}}"#;
    for _ in 0..500 {
        let mut data = Vec::new();
        chunk(&mut data, 4, quota);
        for _ in 0..rng.u32(1..40) {
            let kind = rng.u8(0..8);
            let payload = match kind {
                1 | 6 => ReleaseRequest {
                    namespace: name(&mut rng),
                    name: name(&mut rng),
                    review_uid: name(&mut rng),
                    cluster: name(&mut rng),
                }
                .encode_to_vec(),
                2 => LookupRequest {
                    names: (0..rng.usize(0..80)).map(|_| name(&mut rng)).collect(),
                    namespace: name(&mut rng),
                }
                .encode_to_vec(),
                7 => AdmitPodsRequest {
                    pods: (0..rng.usize(0..70)).map(|_| admit_pod(&mut rng)).collect(),
                }
                .encode_to_vec(),
                _ => admit_pod(&mut rng).encode_to_vec(),
            };
            chunk(&mut data, kind, &payload);
        }
        quota_state::fuzzing::run(&data);
    }
}

fn admit_pod(rng: &mut fastrand::Rng) -> AdmitPodRequest {
    AdmitPodRequest {
        namespace: name(rng),
        name: name(rng),
        quota_label: name(rng),
        check_admission: rng.bool(),
        check_parent: rng.bool(),
        dry_run: rng.f64() < 0.2,
        requests: (0..rng.usize(0..4))
            .map(|i| {
                (
                    ["cpu", "memory", "nvidia.com/gpu", ""][i].to_owned(),
                    amount(rng),
                )
            })
            .collect(),
        ..AdmitPodRequest::default()
    }
}
