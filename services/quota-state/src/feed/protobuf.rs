//! The Pod watch in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`).
//!
//! Hand-written rather than kube-runtime's `watcher`, which reads JSON only: every Pod event
//! (four per pod start, more per status change) is 2 to 10 KiB of JSON that serde has to scan
//! byte by byte for the few fields the ledger reads. In protobuf every field carries its length,
//! so prost steps over what [`wire`] does not name (managed fields, environment, status) without
//! reading it, and the event is a third smaller on the wire and through TLS.
//!
//! The states follow kube-runtime's watcher with `watcher::Config::default()`: a consistent
//! list in pages of 500, then a watch from the list's resource version with bookmarks and the
//! server's 290 s timeout, resumed from the last version seen when it ends (or is idle past
//! that); a `410 Gone` relists. It yields kube-runtime's [`Event`] and [`watcher::Error`], so the
//! feed and its backoff read it as they read the watcher.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::Stream;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Resource;
use kube::core::params::{ListParams, WatchParams};
use kube::core::response::Status;
use kube::runtime::watcher::{self, Event};
use prost::Message;

use super::pod::{WatchedPod, wire as json};

/// What the API server sends, by message; each names only the fields the ledger reads (tags
/// from `k8s.io/api/core/v1/generated.proto` and apimachinery's) and prost skips the rest.
mod wire {
    use std::collections::BTreeMap;

    /// `runtime.Unknown`, the envelope after the `k8s\0` prefix: the object's own bytes.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Unknown {
        #[prost(bytes = "bytes", optional, tag = "2")]
        pub raw: Option<bytes::Bytes>,
    }

    /// `meta.v1.WatchEvent`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct WatchEvent {
        #[prost(string, optional, tag = "1")]
        pub r#type: Option<String>,
        #[prost(message, optional, tag = "2")]
        pub object: Option<RawExtension>,
    }

    /// `runtime.RawExtension`: the event's object, itself enveloped.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RawExtension {
        #[prost(bytes = "bytes", optional, tag = "1")]
        pub raw: Option<bytes::Bytes>,
    }

    /// `meta.v1.Status`, as an error event or an error response carries it.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        #[prost(string, optional, tag = "3")]
        pub message: Option<String>,
        #[prost(string, optional, tag = "4")]
        pub reason: Option<String>,
        #[prost(int32, optional, tag = "6")]
        pub code: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PodList {
        #[prost(message, optional, tag = "1")]
        pub metadata: Option<ListMeta>,
        #[prost(message, repeated, tag = "2")]
        pub items: Vec<Pod>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListMeta {
        #[prost(string, optional, tag = "2")]
        pub resource_version: Option<String>,
        #[prost(string, optional, tag = "3")]
        pub r#continue: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Pod {
        #[prost(message, optional, tag = "1")]
        pub metadata: Option<Meta>,
        #[prost(message, optional, tag = "2")]
        pub spec: Option<Spec>,
        #[prost(message, optional, tag = "3")]
        pub status: Option<PodStatus>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Meta {
        #[prost(string, optional, tag = "1")]
        pub name: Option<String>,
        #[prost(string, optional, tag = "3")]
        pub namespace: Option<String>,
        #[prost(string, optional, tag = "5")]
        pub uid: Option<String>,
        #[prost(string, optional, tag = "6")]
        pub resource_version: Option<String>,
        #[prost(btree_map = "string, string", tag = "11")]
        pub labels: BTreeMap<String, String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Spec {
        #[prost(message, repeated, tag = "2")]
        pub containers: Vec<Container>,
        #[prost(message, repeated, tag = "20")]
        pub init_containers: Vec<Container>,
        #[prost(btree_map = "string, message", tag = "32")]
        pub overhead: BTreeMap<String, Quantity>,
        #[prost(message, optional, tag = "40")]
        pub resources: Option<Requirements>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Container {
        #[prost(message, optional, tag = "8")]
        pub resources: Option<Requirements>,
        #[prost(string, optional, tag = "24")]
        pub restart_policy: Option<String>,
    }

    /// `ResourceRequirements`' amounts (its claims count for nothing).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Requirements {
        #[prost(btree_map = "string, message", tag = "1")]
        pub limits: BTreeMap<String, Quantity>,
        #[prost(btree_map = "string, message", tag = "2")]
        pub requests: BTreeMap<String, Quantity>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Quantity {
        #[prost(string, optional, tag = "1")]
        pub string: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PodStatus {
        #[prost(string, optional, tag = "1")]
        pub phase: Option<String>,
    }
}

/// The media types asked for: objects, and the watch's length-prefixed stream of events.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// What starts every enveloped object.
const MAGIC: &[u8] = b"k8s\0";
/// The largest event taken: etcd holds objects of at most about 1.5 MiB, so anything near this
/// is not an event, and the buffer stays bounded whatever the connection sends.
const MAX_FRAME: usize = 16 << 20;
/// How long a watch may stay silent: the server's timeout plus kube-runtime's margin.
const IDLE: Duration = Duration::from_secs(290 + 5);

/// A JSON `null` map and a missing protobuf map are both empty: the JSON decode sees `None`.
fn some_if_any<K, V>(m: BTreeMap<K, V>) -> Option<BTreeMap<K, V>> {
    (!m.is_empty()).then_some(m)
}

fn quantities(m: BTreeMap<String, wire::Quantity>) -> Option<BTreeMap<String, Quantity>> {
    some_if_any(
        m.into_iter()
            .map(|(k, q)| (k, Quantity(q.string.unwrap_or_default())))
            .collect(),
    )
}

fn requirements(r: wire::Requirements) -> ResourceRequirements {
    ResourceRequirements {
        limits: quantities(r.limits),
        requests: quantities(r.requests),
        claims: None,
    }
}

impl From<wire::Pod> for WatchedPod {
    fn from(p: wire::Pod) -> Self {
        let meta = p.metadata.unwrap_or_default();
        let container = |c: wire::Container| json::Resources {
            resources: c.resources.map(requirements),
            restart_policy: c.restart_policy,
        };
        // The JSON reading of the same pod, so both encodings charge through one function.
        json::Pod {
            metadata: json::Meta {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                resource_version: meta.resource_version,
                labels: some_if_any(meta.labels),
            },
            spec: p.spec.map(|s| json::Spec {
                containers: s.containers.into_iter().map(container).collect(),
                init_containers: (!s.init_containers.is_empty())
                    .then(|| s.init_containers.into_iter().map(container).collect()),
                resources: s.resources.map(requirements),
                overhead: quantities(s.overhead),
            }),
            status: p.status.map(|s| json::Status { phase: s.phase }),
        }
        .into()
    }
}

/// Why bytes from the API server could not be read.
fn invalid(what: impl std::fmt::Display) -> kube::Error {
    kube::Error::ReadEvents(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        what.to_string(),
    ))
}

/// The object inside an envelope (`k8s\0` and a `runtime.Unknown`).
fn unwrap_envelope(mut b: Bytes) -> Result<Bytes, kube::Error> {
    if !b.starts_with(MAGIC) {
        return Err(invalid("protobuf object without the k8s envelope"));
    }
    b.advance(MAGIC.len());
    let env = wire::Unknown::decode(b).map_err(invalid)?;
    Ok(env.raw.unwrap_or_default())
}

/// A `Status` of an error event or an error response (JSON when the server wrote one).
fn status_of(body: Bytes, http_code: u16) -> Status {
    if let Ok(s) = serde_json::from_slice::<Status>(&body) {
        return s;
    }
    match unwrap_envelope(body.clone()).and_then(|raw| wire::Status::decode(raw).map_err(invalid)) {
        Ok(s) => Status::failure(
            s.message.as_deref().unwrap_or_default(),
            s.reason.as_deref().unwrap_or_default(),
        )
        .with_code(
            s.code
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(http_code),
        ),
        Err(_) => Status::failure(
            String::from_utf8_lossy(&body).trim(),
            "Failed to parse error data",
        )
        .with_code(http_code),
    }
}

/// Sends `req` asking for `accept`; an error status becomes `kube::Error::Api`.
async fn send(
    client: &kube::Client,
    req: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    accept: &'static str,
) -> Result<kube::client::Body, kube::Error> {
    let mut req = req.map_err(kube::Error::BuildRequest)?;
    let headers = req.headers_mut();
    headers.insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
    if accept == PROTOBUF_WATCH {
        // As kube's own watch: its decompression layer reads one gzip member, a watch sends one
        // per event.
        headers.insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
    }
    let res = client.send(req.map(kube::client::Body::from)).await?;
    let code = res.status();
    if code.is_client_error() || code.is_server_error() {
        let body = res
            .into_body()
            .collect()
            .await
            .map_err(|e| kube::Error::Service(e.into()))?
            .to_bytes();
        return Err(kube::Error::Api(status_of(body, code.as_u16()).boxed()));
    }
    Ok(res.into_body())
}

fn request() -> kube::core::Request {
    kube::core::Request::new(<WatchedPod as kube::Resource>::url_path(&(), None))
}

/// One page of the list: its pods, resource version and continue token.
async fn list_page(
    client: &kube::Client,
    continue_token: Option<String>,
) -> Result<wire::PodList, kube::Error> {
    let lp = ListParams {
        limit: Some(500),
        continue_token,
        ..ListParams::default()
    };
    let body = send(client, request().list(&lp), PROTOBUF).await?;
    let bytes = body
        .collect()
        .await
        .map_err(|e| kube::Error::Service(e.into()))?
        .to_bytes();
    wire::PodList::decode(unwrap_envelope(bytes)?).map_err(invalid)
}

/// A watch's body, cut into its length-prefixed events.
pub(super) struct Frames {
    body: kube::client::Body,
    buf: BytesMut,
}

impl Frames {
    /// The next event's bytes; `None` when the body ends.
    pub(super) async fn next(&mut self) -> Option<Result<Bytes, kube::Error>> {
        loop {
            if let Some(frame) = self.cut() {
                return Some(frame);
            }
            match self.body.frame().await? {
                Ok(f) => {
                    if let Ok(data) = f.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                Err(e) => return Some(Err(kube::Error::Service(e.into()))),
            }
        }
    }

    /// A whole frame at the buffer's start, if there is one.
    fn cut(&mut self) -> Option<Result<Bytes, kube::Error>> {
        let len = u32::from_be_bytes(self.buf.get(..4)?.try_into().ok()?) as usize;
        if len > MAX_FRAME {
            self.buf.clear();
            return Some(Err(invalid(format!(
                "watch event of {len} bytes, above {MAX_FRAME}"
            ))));
        }
        if self.buf.len() < 4 + len {
            self.buf.reserve(4 + len - self.buf.len());
            return None;
        }
        self.buf.advance(4);
        Some(Ok(self.buf.split_to(len).freeze()))
    }
}

/// A watch event, decoded.
pub(super) enum WatchEvent {
    Added(WatchedPod),
    Modified(WatchedPod),
    Deleted(WatchedPod),
    Bookmark(String),
    Error(Status),
}

/// Decodes one event's bytes.
pub(super) fn decode_event(frame: Bytes) -> Result<WatchEvent, kube::Error> {
    let ev = wire::WatchEvent::decode(frame).map_err(invalid)?;
    let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
    let pod = || -> Result<WatchedPod, kube::Error> {
        Ok(wire::Pod::decode(unwrap_envelope(raw.clone())?)
            .map_err(invalid)?
            .into())
    };
    Ok(match ev.r#type.as_deref().unwrap_or_default() {
        "ADDED" => WatchEvent::Added(pod()?),
        "MODIFIED" => WatchEvent::Modified(pod()?),
        "DELETED" => WatchEvent::Deleted(pod()?),
        "BOOKMARK" => WatchEvent::Bookmark(version(&pod()?).unwrap_or_default()),
        "ERROR" => WatchEvent::Error(status_of(raw, 500)),
        other => return Err(invalid(format!("watch event of type {other:?}"))),
    })
}

/// The pod's resource version, if it has one.
fn version(p: &WatchedPod) -> Option<String> {
    p.meta().resource_version.clone().filter(|v| !v.is_empty())
}

/// Where the watch is (kube-runtime's watcher states).
enum State {
    Empty,
    Listing {
        continue_token: Option<String>,
        pods: VecDeque<wire::Pod>,
        resource_version: Option<String>,
    },
    Listed {
        resource_version: String,
    },
    Watching {
        resource_version: String,
        frames: Frames,
    },
}

type Step = (Option<watcher::Result<Event<WatchedPod>>>, State);

async fn step(client: &kube::Client, state: State) -> Step {
    match state {
        State::Empty => (
            Some(Ok(Event::Init)),
            State::Listing {
                continue_token: None,
                pods: VecDeque::new(),
                resource_version: None,
            },
        ),
        State::Listing {
            continue_token,
            mut pods,
            resource_version,
        } => {
            if let Some(p) = pods.pop_front() {
                return (
                    Some(Ok(Event::InitApply(p.into()))),
                    State::Listing {
                        continue_token,
                        pods,
                        resource_version,
                    },
                );
            }
            if let (None, Some(resource_version)) = (&continue_token, &resource_version) {
                return (
                    Some(Ok(Event::InitDone)),
                    State::Listed {
                        resource_version: resource_version.clone(),
                    },
                );
            }
            match list_page(client, continue_token).await {
                Ok(list) => {
                    let meta = list.metadata.unwrap_or_default();
                    let resource_version = meta.resource_version.filter(|s| !s.is_empty());
                    let continue_token = meta.r#continue.filter(|s| !s.is_empty());
                    if resource_version.is_none() && continue_token.is_none() {
                        return (Some(Err(watcher::Error::NoResourceVersion)), State::Empty);
                    }
                    (
                        None,
                        State::Listing {
                            continue_token,
                            pods: list.items.into(),
                            resource_version,
                        },
                    )
                }
                Err(e) => (
                    Some(Err(watcher::Error::InitialListFailed(e))),
                    State::Empty,
                ),
            }
        }
        State::Listed { resource_version } => {
            let wp = WatchParams::default().timeout(290);
            match send(
                client,
                request().watch(&wp, &resource_version),
                PROTOBUF_WATCH,
            )
            .await
            {
                Ok(body) => (
                    None,
                    State::Watching {
                        resource_version,
                        frames: Frames {
                            body,
                            buf: BytesMut::new(),
                        },
                    },
                ),
                Err(e) => (
                    Some(Err(watcher::Error::WatchStartFailed(e))),
                    State::Listed { resource_version },
                ),
            }
        }
        State::Watching {
            resource_version,
            mut frames,
        } => {
            let frame = tokio::time::timeout(IDLE, frames.next())
                .await
                .ok()
                .flatten();
            let Some(frame) = frame else {
                return (None, State::Listed { resource_version });
            };
            let watching = |resource_version, frames| State::Watching {
                resource_version,
                frames,
            };
            match frame.and_then(decode_event) {
                Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) => match version(&p) {
                    Some(v) => (Some(Ok(Event::Apply(p))), watching(v, frames)),
                    None => (Some(Err(watcher::Error::NoResourceVersion)), State::Empty),
                },
                Ok(WatchEvent::Deleted(p)) => match version(&p) {
                    Some(v) => (Some(Ok(Event::Delete(p))), watching(v, frames)),
                    None => (Some(Err(watcher::Error::NoResourceVersion)), State::Empty),
                },
                Ok(WatchEvent::Bookmark(v)) => (None, watching(v, frames)),
                Ok(WatchEvent::Error(status)) => {
                    // 410 Gone: the version is compacted away, only a new list catches up.
                    let next = if status.code == 410 {
                        State::Empty
                    } else {
                        watching(resource_version, frames)
                    };
                    (Some(Err(watcher::Error::WatchError(status.boxed()))), next)
                }
                Err(e) => (
                    Some(Err(watcher::Error::WatchFailed(e))),
                    watching(resource_version, frames),
                ),
            }
        }
    }
}

/// Every Pod of the cluster, listed and then watched, in protobuf.
pub fn pods(client: kube::Client) -> impl Stream<Item = watcher::Result<Event<WatchedPod>>> + Send {
    futures::stream::unfold((client, State::Empty), |(client, mut state)| async move {
        loop {
            match step(&client, state).await {
                (Some(ev), next) => return Some((ev, (client, next))),
                (None, next) => state = next,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `object` enveloped as the API server sends it.
    fn enveloped(object: &impl Message) -> Bytes {
        let mut out = MAGIC.to_vec();
        wire::Unknown {
            raw: Some(object.encode_to_vec().into()),
        }
        .encode(&mut out)
        .unwrap_or_default();
        out.into()
    }

    fn event(kind: &str, object: &impl Message) -> Bytes {
        wire::WatchEvent {
            r#type: Some(kind.into()),
            object: Some(wire::RawExtension {
                raw: Some(enveloped(object)),
            }),
        }
        .encode_to_vec()
        .into()
    }

    fn pod(name: &str, rv: &str, cpu: &str) -> wire::Pod {
        let q = |s: &str| wire::Quantity {
            string: Some(s.into()),
        };
        wire::Pod {
            metadata: Some(wire::Meta {
                name: Some(name.into()),
                namespace: Some("n".into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some(rv.into()),
                labels: [(quota_protocol::tree::keys::NAME.to_owned(), "q".to_owned())].into(),
            }),
            spec: Some(wire::Spec {
                containers: vec![wire::Container {
                    resources: Some(wire::Requirements {
                        requests: [("cpu".to_owned(), q(cpu))].into(),
                        ..Default::default()
                    }),
                    restart_policy: None,
                }],
                overhead: [("cpu".to_owned(), q("10m"))].into(),
                ..Default::default()
            }),
            status: Some(wire::PodStatus {
                phase: Some("Running".into()),
            }),
        }
    }

    /// The watched pod of the same pod in JSON.
    fn from_json(name: &str, rv: &str, cpu: &str) -> WatchedPod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "n", "uid": format!("uid-{name}"),
                         "resourceVersion": rv, "labels": {(quota_protocol::tree::keys::NAME): "q"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                     "overhead": {"cpu": "10m"}},
            "status": {"phase": "Running"}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn events_decode_to_what_the_json_watch_gives() {
        match decode_event(event("ADDED", &pod("a", "5", "250m"))) {
            Ok(WatchEvent::Added(p)) => {
                assert_eq!(
                    format!("{p:?}"),
                    format!("{:?}", from_json("a", "5", "250m"))
                )
            }
            _ => panic!("not an added pod"),
        }
        assert!(matches!(
            decode_event(event("MODIFIED", &pod("a", "6", "1"))),
            Ok(WatchEvent::Modified(p)) if format!("{p:?}") == format!("{:?}", from_json("a", "6", "1"))
        ));
        assert!(matches!(
            decode_event(event("DELETED", &pod("a", "7", "1"))),
            Ok(WatchEvent::Deleted(_))
        ));
        let mark = wire::Pod {
            metadata: Some(wire::Meta {
                resource_version: Some("99".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matches!(
            decode_event(event("BOOKMARK", &mark)),
            Ok(WatchEvent::Bookmark(v)) if v == "99"
        ));
        let gone = wire::Status {
            message: Some("too old resource version: 1 (42)".into()),
            reason: Some("Expired".into()),
            code: Some(410),
        };
        assert!(matches!(
            decode_event(event("ERROR", &gone)),
            Ok(WatchEvent::Error(s)) if s.code == 410 && s.reason == "Expired"
        ));
    }

    #[test]
    fn what_is_not_a_watch_event_is_an_error_not_a_pod() {
        // No envelope, an unknown type, bytes that are not protobuf.
        let bare = wire::WatchEvent {
            r#type: Some("ADDED".into()),
            object: Some(wire::RawExtension {
                raw: Some(pod("a", "1", "1").encode_to_vec().into()),
            }),
        };
        assert!(decode_event(bare.encode_to_vec().into()).is_err());
        assert!(decode_event(event("RENAMED", &pod("a", "1", "1"))).is_err());
        assert!(decode_event(Bytes::from_static(b"\xff\xff\xff\xff")).is_err());
    }

    /// Frames cut from `chunks`, as a body would deliver them.
    fn cut_all(chunks: &[&[u8]]) -> Vec<Result<Bytes, String>> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for c in chunks {
            buf.extend_from_slice(c);
            let mut f = Frames {
                body: kube::client::Body::empty(),
                buf: std::mem::take(&mut buf),
            };
            while let Some(frame) = f.cut() {
                out.push(frame.map_err(|e| e.to_string()));
            }
            buf = f.buf;
        }
        out
    }

    #[test]
    fn frames_are_cut_at_their_lengths_across_reads_and_bounded() {
        let stream = [
            &3u32.to_be_bytes()[..],
            b"abc",
            &0u32.to_be_bytes(),
            &2u32.to_be_bytes(),
            b"xy",
        ]
        .concat();
        // Whole, then one byte per read.
        let whole = cut_all(&[&stream]);
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        for got in [whole, cut_all(&bytewise)] {
            assert_eq!(
                got,
                vec![
                    Ok(Bytes::from_static(b"abc")),
                    Ok(Bytes::new()),
                    Ok(Bytes::from_static(b"xy"))
                ]
            );
        }
        // A length past the bound is refused before anything is buffered for it.
        let huge = ((MAX_FRAME + 1) as u32).to_be_bytes();
        let got = cut_all(&[&huge]);
        assert!(
            matches!(&got[..], [Err(e)] if e.contains("above")),
            "{got:?}"
        );
    }

    /// A client whose every request fails, for the states that must not send one.
    fn unreachable_client() -> kube::Client {
        let svc = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no API server"))
        });
        kube::Client::new(svc, "default")
    }

    fn frame(b: Bytes) -> Vec<u8> {
        [&(b.len() as u32).to_be_bytes()[..], &b].concat()
    }

    fn status(code: i32) -> wire::Status {
        wire::Status {
            message: Some(format!("code {code}")),
            reason: None,
            code: Some(code),
        }
    }

    #[tokio::test]
    async fn the_watch_resumes_from_the_last_version_and_relists_only_when_gone() {
        let client = unreachable_client();
        let mark = wire::Pod {
            metadata: Some(wire::Meta {
                resource_version: Some("9".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let body = [
            frame(event("ADDED", &pod("a", "5", "1"))),
            frame(event("BOOKMARK", &mark)),
            frame(event("ERROR", &status(500))),
            frame(event("ERROR", &status(410))),
        ]
        .concat();
        let watching = |body: Vec<u8>| State::Watching {
            resource_version: "1".into(),
            frames: Frames {
                body: kube::client::Body::from(body),
                buf: BytesMut::new(),
            },
        };
        let version = |s: &State| match s {
            State::Watching {
                resource_version, ..
            }
            | State::Listed { resource_version } => Some(resource_version.clone()),
            _ => None,
        };
        let (ev, s) = step(&client, watching(body)).await;
        assert!(matches!(ev, Some(Ok(Event::Apply(_)))));
        assert_eq!(version(&s).as_deref(), Some("5"));
        let (ev, s) = step(&client, s).await;
        assert!(ev.is_none(), "a bookmark is no event");
        assert_eq!(version(&s).as_deref(), Some("9"));
        let (ev, s) = step(&client, s).await;
        assert!(matches!(ev, Some(Err(watcher::Error::WatchError(e))) if e.code == 500));
        assert_eq!(
            version(&s).as_deref(),
            Some("9"),
            "other errors keep watching"
        );
        let (ev, s) = step(&client, s).await;
        assert!(matches!(ev, Some(Err(watcher::Error::WatchError(e))) if e.code == 410));
        assert!(matches!(s, State::Empty), "410 Gone relists");

        // The body's end resumes from the last version seen.
        let body = frame(event("MODIFIED", &pod("a", "12", "1")));
        let (_, s) = step(&client, watching(body)).await;
        let (ev, s) = step(&client, s).await;
        assert!(ev.is_none());
        assert!(matches!(&s, State::Listed { resource_version } if resource_version == "12"));
        // Starting it again fails here: the version is kept for the retry.
        let (ev, s) = step(&client, s).await;
        assert!(matches!(ev, Some(Err(watcher::Error::WatchStartFailed(_)))));
        assert!(matches!(&s, State::Listed { resource_version } if resource_version == "12"));
    }

    #[tokio::test]
    async fn a_failed_list_starts_over() {
        use futures::StreamExt;
        let stream = pods(unreachable_client());
        futures::pin_mut!(stream);
        assert!(matches!(stream.next().await, Some(Ok(Event::Init))));
        assert!(matches!(
            stream.next().await,
            Some(Err(watcher::Error::InitialListFailed(_)))
        ));
        assert!(matches!(stream.next().await, Some(Ok(Event::Init))));
    }
}
