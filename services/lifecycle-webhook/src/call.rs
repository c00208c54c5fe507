//! The drain call (LD-9): `POST http://<status.podIP>:<port><path>` to the Pod itself.
//!
//! The address is the Pod's own IP and the port and path its annotations declare; nothing in a
//! Pod's spec or annotations can name another host ([`Target`] holds an IP, a port and a path
//! only). No redirect is followed, no proxy is used, the answer's body is read up to
//! [`MAX_BODY`] bytes, and the whole call is bounded by the time the review has left.

use std::net::IpAddr;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::uri::PathAndQuery;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The most of an answer's body read (its first line is the progress text).
pub const MAX_BODY: usize = 4096;

/// The longest progress text quoted in a refusal.
pub const MAX_PROGRESS: usize = 200;

/// Where a Pod's drain is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The Pod's `status.podIP`.
    pub ip: IpAddr,
    /// The declared port.
    pub port: u16,
    /// The declared path (and query).
    pub path: PathAndQuery,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ip {
            IpAddr::V4(ip) => write!(f, "http://{ip}:{}{}", self.port, self.path),
            IpAddr::V6(ip) => write!(f, "http://[{ip}]:{}{}", self.port, self.path),
        }
    }
}

/// What the Pod answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 200: drained.
    Done,
    /// 202: draining, with the first line of the body when there is one.
    Draining(Option<String>),
    /// Anything else: no answer in time, a refused connection, another status.
    Unanswered(String),
}

/// Asks a Pod to drain and how far it is.
pub trait Caller: Send + Sync {
    /// One idempotent drain call to `target`, answered within `limit`.
    fn drain<'a>(&'a self, target: &'a Target, limit: Duration) -> BoxFuture<'a, Answer>;
}

/// Drain calls over plain HTTP/1.1 (hyper), one connection per call: Pods come and go, and a
/// pool would keep connections to Pods that are being deleted.
pub struct Http {
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl Default for Http {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.enforce_http(true);
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        Self { client }
    }
}

impl Caller for Http {
    fn drain<'a>(&'a self, target: &'a Target, limit: Duration) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            let request = http::Request::post(target.to_string())
                .header(http::header::USER_AGENT, "lifecycle-webhook")
                .body(Empty::new());
            let request = match request {
                Ok(r) => r,
                Err(e) => return Answer::Unanswered(format!("no request: {e}")),
            };
            let call = async {
                let response = self.client.request(request).await.map_err(|e| {
                    // The whole cause for the operator's log; the warning, which whoever sent
                    // the review reads, says only what kind of failure it was.
                    tracing::debug!(target = %target, error = %causes(&e), "drain call failed");
                    if e.is_connect() {
                        "could not connect".to_owned()
                    } else {
                        "the call failed".to_owned()
                    }
                })?;
                let status = response.status().as_u16();
                // A body over the limit or cut short only loses the progress text.
                let body = Limited::new(response.into_body(), MAX_BODY)
                    .collect()
                    .await
                    .map(|c| c.to_bytes())
                    .unwrap_or_default();
                Ok::<_, String>((status, body))
            };
            match tokio::time::timeout(limit, call).await {
                Err(_) => Answer::Unanswered(format!(
                    "no answer within {}",
                    crate::rules::go_duration(limit)
                )),
                Ok(Err(e)) => Answer::Unanswered(e),
                Ok(Ok((200, _))) => Answer::Done,
                Ok(Ok((202, body))) => Answer::Draining(progress(&body)),
                Ok(Ok((status, _))) => Answer::Unanswered(format!("answered {status}")),
            }
        })
    }
}

/// An error and its causes, `: `-separated (hyper's own text is only "client error (Connect)").
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The progress text of a 202: the body's first line, printable characters only, at most
/// [`MAX_PROGRESS`] of them; `None` when empty.
pub fn progress(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let line = text.lines().next().unwrap_or_default();
    let clean: String = line
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_PROGRESS)
        .collect();
    let clean = clean.trim();
    (!clean.is_empty()).then(|| clean.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_print_as_urls() {
        let t = Target {
            ip: "10.1.2.3".parse().unwrap(),
            port: 8080,
            path: PathAndQuery::from_static("/drain?grace=1"),
        };
        assert_eq!(t.to_string(), "http://10.1.2.3:8080/drain?grace=1");
        let t6 = Target {
            ip: "fd00::1".parse().unwrap(),
            ..t
        };
        assert_eq!(t6.to_string(), "http://[fd00::1]:8080/drain?grace=1");
    }

    #[test]
    fn progress_is_one_clean_line() {
        assert_eq!(
            progress(b"12 requests in flight\nmore"),
            Some("12 requests in flight".into())
        );
        assert_eq!(progress(b"  \n"), None);
        assert_eq!(progress(b""), None);
        assert_eq!(progress(b"a\x1b[31mred\x07"), Some("a[31mred".into()));
        assert_eq!(progress(&[b'x'; 1000]).unwrap().len(), MAX_PROGRESS);
    }

    async fn one_answer(
        status: &'static str,
        body: &'static str,
    ) -> (std::net::SocketAddr, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            s.write_all(answer.as_bytes()).await.unwrap();
            head
        });
        (addr, task)
    }

    fn target(addr: std::net::SocketAddr) -> Target {
        Target {
            ip: addr.ip(),
            port: addr.port(),
            path: PathAndQuery::from_static("/drain"),
        }
    }

    #[tokio::test]
    async fn answers_are_read_by_status() {
        let http = Http::default();
        let (addr, seen) = one_answer("202 Accepted", "3 requests in flight\n").await;
        assert_eq!(
            http.drain(&target(addr), Duration::from_secs(5)).await,
            Answer::Draining(Some("3 requests in flight".into()))
        );
        let head = seen.await.unwrap();
        assert!(head.starts_with("POST /drain HTTP/1.1\r\n"), "{head}");
        let (addr, _) = one_answer("200 OK", "").await;
        assert_eq!(
            http.drain(&target(addr), Duration::from_secs(5)).await,
            Answer::Done
        );
        let (addr, _) = one_answer("302 Found", "").await;
        assert_eq!(
            http.drain(&target(addr), Duration::from_secs(5)).await,
            Answer::Unanswered("answered 302".into())
        );
    }

    #[tokio::test]
    async fn silence_and_refusal_are_unanswered() {
        let http = Http::default();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        // Accepts, never answers.
        let _keep = tokio::spawn(async move {
            let (_s, _) = l.accept().await.unwrap();
            std::future::pending::<()>().await
        });
        assert_eq!(
            http.drain(&target(addr), Duration::from_millis(200)).await,
            Answer::Unanswered("no answer within 200ms".into())
        );
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gone = closed.local_addr().unwrap();
        drop(closed);
        let Answer::Unanswered(why) = http.drain(&target(gone), Duration::from_secs(5)).await
        else {
            panic!("a closed port answered");
        };
        // Nothing more than the kind of failure: the warning goes to whoever sent the review.
        assert_eq!(why, "could not connect");
    }
}
