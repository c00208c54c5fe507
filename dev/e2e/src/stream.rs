//! A steady stream of creations through the API server, for fault tests: one create every
//! `1/rate` seconds whatever the answers take (each in its own task, as independent clients
//! would send them), every answer kept with the time it was sent.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use tokio::task::JoinSet;

/// How one creation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Created.
    Created,
    /// Refused by the API server with this status code and message (a webhook's denial, or
    /// the API server's own answer when it calls no webhook).
    Refused(u16, String),
    /// No answer from the API server (connection refused or reset, timeout): it was down.
    Unreachable(String),
}

/// One creation sent.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Its sequence number (the object was made from it).
    pub n: u64,
    /// When it was sent, from the stream's start.
    pub at: Duration,
    /// How long the answer took.
    pub took: Duration,
    /// The answer.
    pub answer: Answer,
}

/// A running stream; [`Stream::stop`] ends it and returns every answer.
pub struct Stream {
    started: Instant,
    stop: tokio::sync::oneshot::Sender<()>,
    driver: tokio::task::JoinHandle<()>,
    sent: Arc<Mutex<Vec<Sent>>>,
}

fn answer_of(r: Result<DynamicObject, kube::Error>) -> Answer {
    match r {
        Ok(_) => Answer::Created,
        Err(kube::Error::Api(e)) => Answer::Refused(e.code, e.message),
        Err(e) => Answer::Unreachable(e.to_string()),
    }
}

impl Stream {
    /// Starts creating `make(n)` for n = 0, 1, … in `api`, `per_second` a second.
    pub fn start(
        api: Api<DynamicObject>,
        per_second: u32,
        make: impl Fn(u64) -> DynamicObject + Send + Sync + 'static,
    ) -> Self {
        let started = Instant::now();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let record = sent.clone();
        let driver = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
            // A late tick is sent at once, not skipped: the rate holds on a busy machine.
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut inflight = JoinSet::new();
            for n in 0u64.. {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tick.tick() => {}
                }
                let (api, obj, record) = (api.clone(), make(n), record.clone());
                inflight.spawn(async move {
                    let at = started.elapsed();
                    let answer = answer_of(api.create(&PostParams::default(), &obj).await);
                    let took = started.elapsed().saturating_sub(at);
                    if let Ok(mut v) = record.lock() {
                        v.push(Sent {
                            n,
                            at,
                            took,
                            answer,
                        });
                    }
                });
                while inflight.try_join_next().is_some() {}
            }
            while inflight.join_next().await.is_some() {}
        });
        Self {
            started,
            stop,
            driver,
            sent,
        }
    }

    /// Time since the stream started (to relate events to [`Sent::at`]).
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Answers so far, in sending order.
    pub fn so_far(&self) -> Vec<Sent> {
        in_order(&self.sent)
    }

    /// Stops sending, waits for the creations in flight and returns every answer in sending
    /// order.
    pub async fn stop(self) -> Vec<Sent> {
        let _ = self.stop.send(());
        let _ = self.driver.await;
        in_order(&self.sent)
    }
}

fn in_order(sent: &Mutex<Vec<Sent>>) -> Vec<Sent> {
    let mut v = sent.lock().map(|v| v.clone()).unwrap_or_default();
    v.sort_by_key(|s| s.n);
    v
}

/// Sent per second over the whole stream (first to last send).
pub fn rate(sent: &[Sent]) -> f64 {
    match (sent.first(), sent.last()) {
        (Some(a), Some(b)) if b.at > a.at => (sent.len() - 1) as f64 / (b.at - a.at).as_secs_f64(),
        _ => 0.0,
    }
}

/// The answer times' 99th percentile.
pub fn p99(sent: &[Sent]) -> Duration {
    let mut t: Vec<Duration> = sent.iter().map(|s| s.took).collect();
    t.sort();
    t.get((t.len() * 99 / 100).min(t.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}
