//! The HTTPS server end to end on loopback: TLS, both review versions, HTTP/1.1 and HTTP/2,
//! every kind of bad input, certificate rotation on disk, metrics, readiness and graceful
//! shutdown.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use admission_kit::review::handler::{Context, Mutator, Request, Validator, Verdict};
use admission_kit::server::http::{ServeOptions, Server};
use admission_kit::server::metrics::Metrics;
use admission_kit::server::mtls::SelfSigned;
use admission_kit::server::tls::{CertFiles, CertStore, install_crypto_provider};
use admission_kit::{App, FailurePolicy, FieldError, Path as FPath, Target};
use bytes::Bytes;
use http::{Request as HttpRequest, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Thing {
    #[serde(default)]
    spec: ThingSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct ThingSpec {
    #[serde(default)]
    n: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    defaulted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sleep_ms: Option<u64>,
}

struct NonNegative;
impl Validator for NonNegative {
    type Object = Thing;
    fn validate(&self, req: &Request<Thing>, _: &Context) -> Verdict {
        if let Some(ms) = req.object.spec.sleep_ms {
            std::thread::sleep(Duration::from_millis(ms));
        }
        let mut v = Verdict::default();
        if req.object.spec.n < 0 {
            v.errors.push(FieldError::invalid(
                "T-01",
                FPath::new("spec").child("n"),
                req.object.spec.n,
                "must be >= 0",
            ));
        }
        v.warnings.push("checked".into());
        v
    }
}

struct Defaulter;
impl Mutator for Defaulter {
    type Object = Thing;
    fn mutate(&self, _: &Request<Thing>, obj: &mut Thing, _: &Context) -> Verdict {
        obj.spec.defaulted = Some(true);
        Verdict::default()
    }
}

fn app() -> App {
    let target = Target::resource("example.com", "v1", "things", "Thing").operations(&[]);
    App::new("test-webhook", "test")
        .validate(
            "/validate",
            target.clone(),
            FailurePolicy::Fail,
            NonNegative,
        )
        .mutate("/mutate", target, FailurePolicy::Ignore, Defaulter)
}

struct Running {
    addr: SocketAddr,
    metrics: SocketAddr,
    ca: CertificateDer<'static>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

fn opts() -> ServeOptions {
    ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        body_limit: 64 * 1024,
        max_inflight_bytes: 1024 * 1024,
        max_concurrent_reviews: 64,
        max_connections: 64,
        handshake_timeout: Duration::from_secs(2),
        max_handshakes: 256,
        max_handshakes_per_peer: 16,
        header_timeout: Duration::from_millis(500),
        body_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_secs(2),
        shutdown_delay: Duration::from_millis(0),
        shutdown_grace: Duration::from_secs(10),
        max_connection_age: None,
        client_ca_file: None,
        allowed_client_names: Vec::new(),
        reuse_port: false,
        enforcement: Default::default(),
        continue_traces: true,
        log_admissions: false,
    }
}

fn ca_der(pem: &str) -> CertificateDer<'static> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
}

async fn start_with(
    certs: Arc<CertStore>,
    ca: CertificateDer<'static>,
    o: ServeOptions,
) -> Running {
    start_app(&app(), certs, ca, o).await
}

async fn start_app(
    app: &App,
    certs: Arc<CertStore>,
    ca: CertificateDer<'static>,
    o: ServeOptions,
) -> Running {
    let server = Server::bind(
        app,
        Context::default(),
        certs,
        || true,
        Metrics::new().unwrap(),
        o,
    )
    .await
    .unwrap();
    let addr = server.local_addr().unwrap();
    let metrics = server.metrics_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let done = tokio::spawn(server.run(async {
        let _ = rx.await;
    }));
    Running {
        addr,
        metrics,
        ca,
        stop: Some(tx),
        done,
    }
}

async fn start() -> Running {
    start_opts(opts()).await
}

/// A server with a fresh self-signed certificate and these options.
async fn start_opts(o: ServeOptions) -> Running {
    install_crypto_provider();
    let ss = SelfSigned::generate(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let certs = CertStore::new();
    certs.set(ss.certified_key().unwrap());
    start_with(certs, ca_der(&ss.ca_pem), o).await
}

async fn tls(addr: SocketAddr, ca: &CertificateDer<'static>, alpn: &[u8]) -> TlsStream<TcpStream> {
    tls_from(None, addr, ca, alpn).await
}

/// A TCP connection to `addr` from loopback address `from` (another Pod than the API server).
async fn tcp_from(from: &str, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse().unwrap(), 0))
        .unwrap();
    socket.connect(addr).await.unwrap()
}

async fn tls_from(
    from: Option<&str>,
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    alpn: &[u8],
) -> TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let mut cfg = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    let tcp = match from {
        Some(ip) => tcp_from(ip, addr).await,
        None => TcpStream::connect(addr).await.unwrap(),
    };
    TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// Everything the server sends until it closes the connection; `None` if it is still open after
/// 20 s.
async fn until_closed(t: &mut TlsStream<TcpStream>) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        tokio::io::AsyncReadExt::read_to_end(t, &mut buf),
    )
    .await
    .ok()
    .map(|_| buf)
}

/// The first bytes of the server's answer (within 20 s, else panics with `what`), as text.
async fn first_answer(t: &mut TlsStream<TcpStream>, what: &str) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::io::AsyncReadExt::read(t, &mut buf),
    )
    .await
    .expect(what)
    .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn h1(r: &Running) -> (Sender, tokio::task::JoinHandle<()>) {
    let io = TokioIo::new(tls(r.addr, &r.ca, b"http/1.1").await);
    let (send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    let j = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, j)
}

/// An HTTP/2 connection to `r`, and its task (which ends with the connection's result).
async fn h2(
    r: &Running,
) -> (
    hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    tokio::task::JoinHandle<Result<(), hyper::Error>>,
) {
    let io = TokioIo::new(tls(r.addr, &r.ca, b"h2").await);
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .unwrap();
    (send, tokio::spawn(conn))
}

fn post(path: &str, ct: &str, body: Vec<u8>) -> HttpRequest<Full<Bytes>> {
    HttpRequest::post(path)
        .header("host", "localhost")
        .header("content-type", ct)
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

async fn send(s: &mut Sender, req: HttpRequest<Full<Bytes>>) -> (StatusCode, Value) {
    let resp = s.send_request(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

fn review(version: &str, n: i64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": version, "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "example.com", "version": "v1", "kind": "Thing"},
                    "resource": {"group": "example.com", "version": "v1", "resource": "things"},
                    "name": "t", "namespace": "ns", "operation": "CREATE", "userInfo": {"username": "me"},
                    "object": {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
                               "spec": {"n": n, "unknown": {"kept": true}}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn answers_v1_and_v1beta1_over_http1() {
    let r = start().await;
    let (mut s, _) = h1(&r).await;
    for v in ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"] {
        let (code, out) = send(&mut s, post("/validate", "application/json", review(v, 1))).await;
        assert_eq!(code, StatusCode::OK);
        assert_eq!(out["apiVersion"], v);
        assert_eq!(out["kind"], "AdmissionReview");
        assert_eq!(out["response"]["uid"], "u-1");
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(out["response"]["warnings"], json!(["checked"]));
        let (_, out) = send(
            &mut s,
            post(
                "/validate",
                "application/json; charset=utf-8",
                review(v, -2),
            ),
        )
        .await;
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 422);
        let msg = out["response"]["status"]["message"].as_str().unwrap();
        assert!(
            msg.contains("spec.n: Invalid value: -2: must be >= 0"),
            "{msg}"
        );
    }
}

#[tokio::test]
async fn mutation_patch_is_base64_and_keeps_unknown_fields() {
    use base64::Engine as _;
    let r = start().await;
    let (mut s, _) = h1(&r).await;
    let (code, out) = send(
        &mut s,
        post(
            "/mutate",
            "application/json",
            review("admission.k8s.io/v1", 1),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(out["response"]["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(out["response"]["patch"].as_str().unwrap())
        .unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/defaulted", "value": true}])
    );
}

/// `--enforcement audit` on the validator and `warn` on the mutator's path… each path answers
/// in its mode and counts what enforcing would have done; an undecodable review on trial is
/// admitted and counted under `review-error`.
#[tokio::test]
async fn endpoints_on_trial_admit_and_count() {
    use admission_kit::review::mode::Modes;
    let mut o = opts();
    o.enforcement = Modes::parse(["audit", "/mutate=warn"], &["/validate", "/mutate"]).unwrap();
    let r = start_opts(o).await;
    let (mut s, _) = h1(&r).await;
    let v1 = "admission.k8s.io/v1";

    let (_, out) = send(
        &mut s,
        post("/validate", "application/json", review(v1, -2)),
    )
    .await;
    assert_eq!(out["response"]["allowed"], true, "{out}");
    assert!(out["response"].get("status").is_none(), "{out}");
    assert!(
        out["response"].get("warnings").is_none(),
        "audit says nothing: {out}"
    );
    let (_, out) = send(&mut s, post("/validate", "application/json", review(v1, 1))).await;
    assert_eq!(out["response"]["allowed"], true);

    // warn on a mutator: the patch is sent as when enforcing.
    let (_, out) = send(&mut s, post("/mutate", "application/json", review(v1, 1))).await;
    assert_eq!(out["response"]["patchType"], "JSONPatch", "{out}");

    // Not a Thing: enforcing answers 400; on trial it is admitted.
    let mut bad: Value = serde_json::from_slice(&review(v1, 1)).unwrap();
    bad["request"]["object"]["spec"]["n"] = json!("many");
    let (code, out) = send(
        &mut s,
        post(
            "/validate",
            "application/json",
            serde_json::to_vec(&bad).unwrap(),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(out["response"]["allowed"], true, "{out}");
    assert_eq!(out["response"]["uid"], "u-1");

    let (_, m) = http_get(r.metrics, "/metrics").await;
    for want in [
        r#"admission_webhook_audit_total{outcome="would_deny",rule="T-01",webhook="/validate"} 1"#,
        r#"admission_webhook_audit_total{outcome="agree",rule="",webhook="/validate"} 1"#,
        r#"admission_webhook_audit_total{outcome="would_deny",rule="review-error",webhook="/validate"} 1"#,
        r#"admission_webhook_audit_total{outcome="would_patch",rule="",webhook="/mutate"} 1"#,
    ] {
        assert!(m.contains(want), "{want} not in:\n{m}");
    }
    assert!(
        !m.contains("admission_webhook_denials_total{"),
        "nothing was denied:\n{m}"
    );
}

#[tokio::test]
async fn answers_over_http2() {
    let r = start().await;
    let (mut send2, _conn) = h2(&r).await;
    let resp = send2
        .send_request(post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 3),
        ))
        .await
        .unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let body: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["response"]["allowed"], true);
}

/// An HTTP/2 header list is bounded as an HTTP/1.1 head is (64 KiB), not hyper's 16 MiB: the
/// request is refused and the connection keeps serving.
#[tokio::test]
async fn an_oversized_http2_header_list_is_refused() {
    let r = start().await;
    let (mut send2, _conn) = h2(&r).await;
    let mut big = post(
        "/validate",
        "application/json",
        review("admission.k8s.io/v1", 1),
    );
    big.headers_mut().insert(
        "x-padding",
        http::HeaderValue::from_str(&"a".repeat(100 * 1024)).unwrap(),
    );
    match send2.send_request(big).await {
        Ok(resp) => assert_eq!(resp.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let resp = send2
        .send_request(post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 2),
        ))
        .await
        .expect("the connection still serves");
    assert_eq!(resp.status(), StatusCode::OK);
}

/// controller-runtime's answer to a review it cannot decode: HTTP 200, refused, code 400.
fn assert_errored(code: StatusCode, out: &Value) {
    assert_eq!(code, StatusCode::OK, "{out}");
    assert_eq!(out["response"]["allowed"], false, "{out}");
    assert_eq!(out["response"]["status"]["code"], 400, "{out}");
}

/// Kthena's answer to a review it cannot decode: plain-text HTTP 400 with its texts.
#[tokio::test]
async fn plain_text_decode_errors_get_http_400() {
    install_crypto_provider();
    let ss = SelfSigned::generate(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let certs = CertStore::new();
    certs.set(ss.certified_key().unwrap());
    let app = app().decode_errors(admission_kit::DecodeErrors::PlainText);
    let r = start_app(&app, certs, ca_der(&ss.ca_pem), opts()).await;
    let (mut s, _) = h1(&r).await;
    for (body, text) in [
        (b"nope".to_vec(), "failed to decode body: "),
        (b"{}".to_vec(), "admission review request is nil"),
        (
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u", "operation": "CREATE", "object": {"spec": {"n": "x"}}}})).unwrap(),
            "failed to decode object: ",
        ),
    ] {
        let resp = s
            .send_request(post("/validate", "application/json", body))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            resp.headers()[http::header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        let got = resp.into_body().collect().await.unwrap().to_bytes();
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with(text), "{got}");
    }
}

#[tokio::test]
async fn bad_inputs_get_clear_errors() {
    let r = start().await;
    let (mut s, _) = h1(&r).await;
    // 405: wrong method.
    let get = HttpRequest::get("/validate")
        .header("host", "x")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (code, out) = send(&mut s, get).await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("use POST")
    );
    // 415: wrong or missing content type.
    let (code, out) = send(
        &mut s,
        post("/validate", "text/plain", review("admission.k8s.io/v1", 1)),
    )
    .await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("expected application/json")
    );
    // 413: body over the limit (64 KiB here).
    let (code, out) = send(
        &mut s,
        post("/validate", "application/json", vec![b' '; 65 * 1024]),
    )
    .await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than 65536 bytes")
    );
    // The unread body makes the server close that connection; go on with a new one.
    let (mut s, _) = h1(&r).await;
    // Not JSON: refused with code 400 (controller-runtime's answer, the kit's default), in the
    // version it claims.
    let (code, out) = send(
        &mut s,
        post(
            "/validate",
            "application/json",
            b"{\"apiVersion\":\"admission.k8s.io/v1beta1\", nope".to_vec(),
        ),
    )
    .await;
    assert_errored(code, &out);
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1beta1");
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot decode the AdmissionReview")
    );
    // Wrongly shaped (no request; object of the wrong type; missing object): the same.
    let (code, out) = send(
        &mut s,
        post(
            "/validate",
            "application/json",
            b"{\"apiVersion\":\"admission.k8s.io/v1\"}".to_vec(),
        ),
    )
    .await;
    assert_errored(code, &out);
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("no request")
    );
    let bad_obj = json!({"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u-9", "operation": "CREATE", "object": {"spec": {"n": "x"}}}});
    let (code, out) = send(
        &mut s,
        post(
            "/validate",
            "application/json",
            serde_json::to_vec(&bad_obj).unwrap(),
        ),
    )
    .await;
    assert_errored(code, &out);
    assert_eq!(out["response"]["uid"], "u-9");
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid type: string \"x\"")
    );
    let no_obj = json!({"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u", "operation": "UPDATE"}});
    let (code, out) = send(
        &mut s,
        post(
            "/validate",
            "application/json",
            serde_json::to_vec(&no_obj).unwrap(),
        ),
    )
    .await;
    assert_errored(code, &out);
    assert!(
        out["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("there is no content to decode")
    );
    // 404: unknown path.
    let (code, out) = send(
        &mut s,
        post(
            "/nope",
            "application/json",
            review("admission.k8s.io/v1", 1),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(out, Value::String("404 page not found".into()));
    // The connection survived all of it.
    let (code, _) = send(
        &mut s,
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 1),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
}

#[tokio::test]
async fn slow_or_silent_clients_are_cut_off() {
    let r = start().await;
    // Headers never finished: the server closes the connection after the header timeout.
    let mut t = tls(r.addr, &r.ca, b"http/1.1").await;
    t.write_all(b"POST /validate HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    assert!(
        until_closed(&mut t).await.is_some(),
        "connection with unfinished headers was not closed"
    );
    // Body announced but never sent: 408 after the body timeout.
    let mut t = tls(r.addr, &r.ca, b"http/1.1").await;
    t.write_all(b"POST /validate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{").await.unwrap();
    let head = first_answer(&mut t, "no answer to a stalled body").await;
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    // A client that completes the handshake and sends nothing is closed (first-byte timeout),
    // and so is one that rests after an answer (idle timeout).
    let mut silent = tls(r.addr, &r.ca, b"http/1.1").await;
    assert!(
        until_closed(&mut silent).await.is_some(),
        "a silent connection was not closed"
    );
    let mut resting = tls(r.addr, &r.ca, b"http/1.1").await;
    resting
        .write_all(b"GET /nope HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let read = until_closed(&mut resting).await;
    assert!(
        read.is_some(),
        "a resting keep-alive connection was not closed"
    );
    let buf = read.unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 "),
        "answered before it was closed"
    );
    // A client that never completes the TLS handshake does not keep a task forever, and other
    // clients are served meanwhile.
    let _idle = TcpStream::connect(r.addr).await.unwrap();
    let (mut s, _) = h1(&r).await;
    let (code, _) = send(
        &mut s,
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 1),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
}

async fn http_get(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
    let (mut s, conn) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(io)
        .await
        .unwrap();
    tokio::spawn(conn);
    let resp = s
        .send_request(
            HttpRequest::get(path)
                .header("host", "x")
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    let code = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn metrics_count_decisions_and_rules() {
    let r = start().await;
    let (mut s, _) = h1(&r).await;
    send(
        &mut s,
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 1),
        ),
    )
    .await;
    send(
        &mut s,
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", -1),
        ),
    )
    .await;
    send(
        &mut s,
        post("/validate", "text/plain", review("admission.k8s.io/v1", -1)),
    )
    .await;
    let (code, text) = http_get(r.metrics, "/metrics").await;
    assert_eq!(code, StatusCode::OK);
    for line in [
        "controller_runtime_webhook_requests_total{code=\"200\",webhook=\"/validate\"} 2",
        "controller_runtime_webhook_requests_total{code=\"415\",webhook=\"/validate\"} 1",
        "admission_webhook_decisions_total{decision=\"allowed\",operation=\"CREATE\",webhook=\"/validate\"} 1",
        "admission_webhook_decisions_total{decision=\"denied\",operation=\"CREATE\",webhook=\"/validate\"} 1",
        "admission_webhook_denials_total{rule=\"T-01\",webhook=\"/validate\"} 1",
        "controller_runtime_webhook_requests_in_flight{webhook=\"/validate\"} 0",
        "controller_runtime_webhook_latency_seconds_count{webhook=\"/validate\"} 3",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    assert_eq!(
        http_get(r.metrics, "/healthz").await,
        (StatusCode::OK, "ok".into())
    );
    assert_eq!(
        http_get(r.metrics, "/readyz").await,
        (StatusCode::OK, "ok".into())
    );
}

#[tokio::test]
async fn not_ready_without_a_certificate() {
    install_crypto_provider();
    let ss = SelfSigned::generate(&["localhost".into()]).unwrap();
    let r = start_with(CertStore::new(), ca_der(&ss.ca_pem), opts()).await;
    let (code, why) = http_get(r.metrics, "/readyz").await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert!(why.contains("certificate"));
}

fn write_pair(dir: &Path, gen_name: &str, ss: &SelfSigned) {
    // The layout of a Kubernetes secret volume: files behind a `..data` symlink that is swapped.
    let gen_dir = dir.join(gen_name);
    std::fs::create_dir_all(&gen_dir).unwrap();
    std::fs::write(gen_dir.join("tls.crt"), &ss.cert_pem).unwrap();
    std::fs::write(gen_dir.join("tls.key"), &ss.key_pem).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(gen_name, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        let link = dir.join(f);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{f}"), &link).unwrap();
        }
    }
}

async fn served_leaf(r: &Running, ca: &CertificateDer<'static>) -> Option<CertificateDer<'static>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).ok()?;
    let cfg = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(r.addr).await.ok()?;
    let t = TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .ok()?;
    t.get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first().cloned())
}

#[tokio::test]
async fn certificate_swapped_on_disk_is_served_without_restart() {
    install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let a = SelfSigned::generate(&["localhost".into()]).unwrap();
    let b = SelfSigned::generate(&["localhost".into()]).unwrap();
    write_pair(dir.path(), "..gen_a", &a);
    let files = CertFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let certs = CertStore::new();
    files.load_into(&certs).unwrap();
    files
        .clone()
        .spawn_reloader(certs.clone(), Duration::from_millis(50));
    let r = start_with(certs.clone(), ca_der(&a.ca_pem), opts()).await;
    let leaf_a = rustls_pemfile::certs(&mut a.cert_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    let leaf_b = rustls_pemfile::certs(&mut b.cert_pem.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(served_leaf(&r, &ca_der(&a.ca_pem)).await, Some(leaf_a));
    // An old connection stays usable across the swap.
    let (mut old, _) = h1(&r).await;
    write_pair(dir.path(), "..gen_b", &b);
    let mut swapped = false;
    for _ in 0..200 {
        if served_leaf(&r, &ca_der(&b.ca_pem)).await.as_ref() == Some(&leaf_b) {
            swapped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(swapped, "new certificate never served");
    let (code, _) = send(
        &mut old,
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 1),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    // A broken write keeps the current certificate.
    std::fs::write(dir.path().join("..gen_b/tls.crt"), "garbage").unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(served_leaf(&r, &ca_der(&b.ca_pem)).await, Some(leaf_b));
}

#[tokio::test]
async fn shutdown_finishes_in_flight_reviews_and_closes_idle_connections() {
    let mut o = opts();
    o.shutdown_delay = Duration::from_millis(300);
    let mut r = start_opts(o).await;
    // An idle keep-alive connection and one with a review in flight.
    let (mut idle, idle_conn) = h1(&r).await;
    send(
        &mut idle,
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 1),
        ),
    )
    .await;
    let (mut busy, _) = h1(&r).await;
    let mut slow = serde_json::from_slice::<Value>(&review("admission.k8s.io/v1", 1)).unwrap();
    slow["request"]["object"]["spec"]["sleep_ms"] = json!(800);
    let in_flight = tokio::spawn(async move {
        send(
            &mut busy,
            post(
                "/validate",
                "application/json",
                serde_json::to_vec(&slow).unwrap(),
            ),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = r.stop.take().unwrap().send(());
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (code, why) = http_get(r.metrics, "/readyz").await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(why, "shutting down");
    let (code, out) = in_flight.await.unwrap();
    assert_eq!(code, StatusCode::OK, "in-flight review lost");
    assert_eq!(out["response"]["allowed"], true);
    tokio::time::timeout(Duration::from_secs(20), &mut r.done)
        .await
        .expect("server did not stop")
        .unwrap();
    // The idle connection was closed by the server rather than left for reuse.
    tokio::time::timeout(Duration::from_secs(5), idle_conn)
        .await
        .expect("idle keep-alive connection still open")
        .unwrap();
    assert!(
        TcpStream::connect(r.addr).await.is_err(),
        "listener still open"
    );
}

#[tokio::test]
async fn chunked_body_over_the_limit_is_refused() {
    let r = start().await;
    let mut t = tls(r.addr, &r.ca, b"http/1.1").await;
    t.write_all(b"POST /validate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    let chunk = vec![b' '; 8192];
    for _ in 0..10 {
        // The server may answer and close before all of it is sent.
        if t.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await
            .is_err()
            || t.write_all(&chunk).await.is_err()
            || t.write_all(b"\r\n").await.is_err()
        {
            break;
        }
    }
    let _ = t.write_all(b"0\r\n\r\n").await;
    let head = first_answer(&mut t, "no answer").await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
}

#[tokio::test]
async fn old_connections_are_closed_gracefully_after_an_answer() {
    install_crypto_provider();
    let ss = SelfSigned::generate(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    let certs = CertStore::new();
    certs.set(ss.certified_key().unwrap());
    let o = ServeOptions {
        max_connection_age: Some(Duration::from_millis(300)),
        ..opts()
    };
    let r = start_with(certs, ca_der(&ss.ca_pem), o).await;
    let (mut send2, conn) = h2(&r).await;
    let resp = send2
        .send_request(post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 3),
        ))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // GOAWAY after the age: the client's connection ends cleanly, without an error.
    let ended = tokio::time::timeout(Duration::from_secs(5), conn)
        .await
        .expect("connection closed by the server after its maximum age")
        .unwrap();
    assert!(ended.is_ok(), "{ended:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_the_drain_http1_answers_tell_clients_to_leave() {
    let mut o = opts();
    o.shutdown_delay = Duration::from_secs(2);
    o.header_timeout = Duration::from_secs(10);
    let mut r = start_opts(o).await;
    let (mut conn, closed) = h1(&r).await;
    let ask = |n: i64| {
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", n),
        )
    };
    let resp = conn.send_request(ask(1)).await.unwrap();
    assert!(
        resp.headers().get("connection").is_none(),
        "keep-alive before the stop"
    );
    let _ = resp.into_body().collect().await;
    let _ = r.stop.take().unwrap().send(());
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Still answered during the drain, with `Connection: close`: the client leaves after this
    // answer instead of the server closing the connection under its next request.
    conn.ready()
        .await
        .expect("the keep-alive connection is still open");
    let resp = conn.send_request(ask(2)).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..])
    );
    let _ = resp.into_body().collect().await;
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("the connection was not closed after the answer")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), &mut r.done)
        .await
        .expect("server did not stop")
        .unwrap();
}

/// The API server dials a draining replica while the load balancer still lists it and sends
/// its first request with the HTTP/2 preface: that request is answered, then GOAWAY moves the
/// client on (shutting the connection down in its handshake lost such requests in the rolling
/// restart of `dev/e2e/tests/faults.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_the_drain_a_new_http2_connection_gets_its_first_answer_then_goaway() {
    let mut o = opts();
    o.shutdown_delay = Duration::from_secs(3);
    let mut r = start_opts(o).await;
    let _ = r.stop.take().unwrap().send(());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (mut send2, conn) = h2(&r).await;
    let resp = send2
        .send_request(post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 1),
        ))
        .await
        .expect("the first request on a connection opened during the drain is answered");
    assert_eq!(resp.status(), StatusCode::OK);
    let _ = resp.into_body().collect().await;
    // GOAWAY: the connection ends cleanly well before the drain is over.
    tokio::time::timeout(Duration::from_secs(2), conn)
        .await
        .expect("no GOAWAY after the answer")
        .unwrap()
        .expect("the connection ended with an error");
    tokio::time::timeout(Duration::from_secs(20), &mut r.done)
        .await
        .expect("server did not stop")
        .unwrap();
}

/// A TLS client trusting `server_ca`, presenting the pair of `files` when given.
async fn tls_as(
    addr: SocketAddr,
    server_ca: &CertificateDer<'static>,
    files: Option<&admission_kit::server::mtls::MtlsFiles>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server_ca.clone()).unwrap();
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let mut cfg = match files {
        Some(f) => {
            let chain = rustls_pemfile::certs(&mut std::fs::read(&f.cert).unwrap().as_slice())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = rustls_pemfile::private_key(&mut std::fs::read(&f.key).unwrap().as_slice())
                .unwrap()
                .unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// One review over a fresh connection; `Err` when the connection or handshake is refused.
async fn review_over(stream: std::io::Result<TlsStream<TcpStream>>) -> Result<StatusCode, String> {
    let io = TokioIo::new(stream.map_err(|e| e.to_string())?);
    let (mut send, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    send.send_request(post(
        "/validate",
        "application/json",
        review("admission.k8s.io/v1", 1),
    ))
    .await
    .map(|r| r.status())
    .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_only_its_clients_are_served() {
    install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let apiserver_ca = admission_kit::server::mtls::Pki::new("API server client CA").unwrap();
    let apiserver = apiserver_ca
        .write(
            dir.path(),
            "apiserver",
            &["kube-apiserver".into()],
            false,
            true,
        )
        .unwrap();
    let other_ca = admission_kit::server::mtls::Pki::new("another CA").unwrap();
    let other_dir = dir.path().join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let stranger = other_ca
        .write(
            &other_dir,
            "stranger",
            &["kube-apiserver".into()],
            false,
            true,
        )
        .unwrap();
    let ss = SelfSigned::generate(&["localhost".into()]).unwrap();
    let certs = CertStore::new();
    certs.set(ss.certified_key().unwrap());
    let mut o = opts();
    o.client_ca_file = Some(apiserver.ca.clone());
    let r = start_with(certs, ca_der(&ss.ca_pem), o).await;

    let ok = review_over(tls_as(r.addr, &r.ca, Some(&apiserver)).await).await;
    assert_eq!(ok, Ok(StatusCode::OK));
    for (who, files) in [("no certificate", None), ("another CA", Some(&stranger))] {
        let refused = review_over(tls_as(r.addr, &r.ca, files).await).await;
        assert!(refused.is_err(), "{who}: {refused:?}");
    }
    // The server counts a refused handshake when its side of the handshake ends, which may be
    // just after the client has seen the refusal: read the counter until it shows both.
    let want = "admission_webhook_tls_handshakes_refused_total{reason=\"failed\"} 2";
    let mut metrics = String::new();
    for _ in 0..100 {
        metrics = http_get(r.metrics, "/metrics").await.1;
        if metrics.contains(want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(metrics.contains(want), "{metrics}");
}

/// The API server keeps a resting HTTP/1.1 connection for 90 s and sends its next review on
/// it: a rest longer than the header timeout must not close it, while a request head that
/// stalls on a reused connection is still cut off after the header timeout.
#[tokio::test]
async fn a_resting_http1_connection_is_reused_beyond_the_header_timeout() {
    // An idle timeout beyond until_closed's 20 s: a close seen there is the header timeout's.
    let mut o = opts();
    o.idle_timeout = Duration::from_secs(60);
    let r = start_opts(o).await;
    let mut t = tls(r.addr, &r.ca, b"http/1.1").await;
    let body = review("admission.k8s.io/v1", 1);
    let request = format!(
        "POST /validate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    for round in 0..2 {
        t.write_all(request.as_bytes()).await.unwrap();
        t.write_all(&body).await.unwrap();
        let head = first_answer(&mut t, "no answer on the resting connection").await;
        assert!(head.starts_with("HTTP/1.1 200"), "round {round}: {head}");
        // Rest 1.2 s: beyond the 500 ms header timeout.
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
    t.write_all(b"POST /validate HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    assert!(
        until_closed(&mut t).await.is_some(),
        "a stalled head on a reused connection was not cut off"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn beyond_the_in_flight_budget_reviews_get_429_before_their_body_is_read() {
    let mut o = opts();
    o.max_concurrent_reviews = 1;
    let r = start_opts(o).await;
    // A review whose body is slow to come holds the only slot (reserved before the body is
    // read) without holding a thread.
    let mut holder = tls(r.addr, &r.ca, b"http/1.1").await;
    holder
        .write_all(b"POST /validate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
        .await
        .unwrap();
    let (mut second, _) = h1(&r).await;
    let refused = eventually_refused(&mut second).await;
    assert_eq!(
        refused.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    let _ = refused.into_body().collect().await;
    // The holder's body never comes: 408 after the body timeout frees the slot.
    assert!(
        first_answer(&mut holder, "no answer to the stalled body")
            .await
            .starts_with("HTTP/1.1 408")
    );
    // The slot is free again, on the same keep-alive connection (it rested past the 500 ms
    // header timeout, which bounds request heads, not rests).
    let (code, _) = send(
        &mut second,
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 3),
        ),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
}

/// Sends reviews until one gets 429 (the holder may not hold its slot yet), up to 50 tries.
async fn eventually_refused(s: &mut Sender) -> hyper::Response<hyper::body::Incoming> {
    for _ in 0..50 {
        s.ready().await.unwrap();
        let resp = s
            .send_request(post(
                "/validate",
                "application/json",
                review("admission.k8s.io/v1", 2),
            ))
            .await
            .unwrap();
        if resp.status() == StatusCode::TOO_MANY_REQUESTS {
            return resp;
        }
        let _ = resp.into_body().collect().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never refused while the only slot was held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_the_oldest_idle_connection_makes_room() {
    let mut o = opts();
    o.max_connections = 2;
    o.header_timeout = Duration::from_secs(10);
    o.idle_timeout = Duration::from_secs(60);
    let r = start_opts(o).await;
    let ask = || {
        post(
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", 1),
        )
    };
    let (mut oldest, oldest_closed) = h1(&r).await;
    assert_eq!(send(&mut oldest, ask()).await.0, StatusCode::OK);
    let (mut newer, newer_closed) = h1(&r).await;
    assert_eq!(send(&mut newer, ask()).await.0, StatusCode::OK);
    // A third client is served: the oldest idle connection was closed to make room.
    let (mut third, _) = h1(&r).await;
    assert_eq!(send(&mut third, ask()).await.0, StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(5), oldest_closed)
        .await
        .expect("the oldest idle connection is still open")
        .unwrap();
    assert!(!newer_closed.is_finished(), "only the oldest makes room");
}

/// A validator whose rule waits for another review: the first (`n` = 1) waits until a second
/// (`n` = 2) arrives. Its synchronous form answers at once with another warning.
struct Rendezvous(Arc<tokio::sync::Notify>);
impl Validator for Rendezvous {
    type Object = Thing;
    fn validate(&self, _: &Request<Thing>, _: &Context) -> Verdict {
        Verdict {
            warnings: vec!["blocking".into()],
            ..Verdict::default()
        }
    }
    fn waits(&self, _: &Context) -> bool {
        true
    }
    async fn validate_async(&self, req: &Request<Thing>, _: &Context) -> Verdict {
        if req.object.spec.n == 1 {
            self.0.notified().await;
        } else {
            self.0.notify_one();
        }
        Verdict {
            warnings: vec!["awaited".into()],
            ..Verdict::default()
        }
    }
}

/// A handler that waits is awaited on its review's task: on a single-threaded runtime the first
/// review's wait lets the second one in (a blocked thread never would), and the answers are the
/// awaited rules'.
#[tokio::test]
async fn waiting_rules_are_awaited_without_holding_the_thread() {
    install_crypto_provider();
    let ss = SelfSigned::generate(&["localhost".into()]).unwrap();
    let certs = CertStore::new();
    certs.set(ss.certified_key().unwrap());
    let target = Target::resource("example.com", "v1", "things", "Thing").operations(&[]);
    let app = App::new("test-webhook", "test").validate(
        "/wait",
        target,
        FailurePolicy::Fail,
        Rendezvous(Arc::default()),
    );
    let r = start_app(&app, certs, ca_der(&ss.ca_pem), opts()).await;
    let (mut first, _) = h1(&r).await;
    let (mut second, _) = h1(&r).await;
    let waiting = tokio::spawn(async move {
        send(
            &mut first,
            post(
                "/wait",
                "application/json",
                review("admission.k8s.io/v1", 1),
            ),
        )
        .await
    });
    let opened = send(
        &mut second,
        post(
            "/wait",
            "application/json",
            review("admission.k8s.io/v1", 2),
        ),
    )
    .await;
    // A guard against a hang, not a speed check.
    let waited = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiting review was never answered")
        .unwrap();
    for (code, out) in [opened, waited] {
        assert_eq!(code, StatusCode::OK);
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(out["response"]["warnings"], json!(["awaited"]));
    }
}

/// Where the API server presents no certificate, one address (any Pod) can take neither the
/// handshakes nor the in-flight budget: connections that never start TLS beyond its share are
/// closed at once, and reviews whose bodies never come hold at most a quarter of the budget,
/// while another address's reviews are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_takes_neither_the_handshakes_nor_the_budget() {
    let mut o = opts();
    o.max_handshakes_per_peer = 4;
    o.max_concurrent_reviews = 8;
    o.body_timeout = Duration::from_secs(10);
    o.header_timeout = Duration::from_secs(10);
    let r = start_opts(o).await;
    // 20 connections from 127.0.0.2 that never start TLS: 4 wait for their handshake, the
    // rest are closed at once.
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(tcp_from("127.0.0.2", r.addr).await);
    }
    let mut closed = 0;
    for t in &mut silent {
        let mut b = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(
            Duration::from_millis(300),
            tokio::io::AsyncReadExt::read(t, &mut b),
        )
        .await
        {
            closed += 1;
        }
    }
    assert_eq!(closed, 16, "beyond 4 handshakes from one address");
    // From 127.0.0.3, reviews declaring bodies that never come: 2 are held (a quarter of 8),
    // the others refused at once with 429.
    let mut stalled = Vec::new();
    let mut refused = 0;
    for _ in 0..6 {
        let mut t = tls_from(Some("127.0.0.3"), r.addr, &r.ca, b"http/1.1").await;
        t.write_all(b"POST /validate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
            .await
            .unwrap();
        let mut b = vec![0u8; 64];
        match tokio::time::timeout(
            Duration::from_millis(300),
            tokio::io::AsyncReadExt::read(&mut t, &mut b),
        )
        .await
        {
            Ok(Ok(n)) if String::from_utf8_lossy(&b[..n]).starts_with("HTTP/1.1 429") => {
                refused += 1
            }
            _ => stalled.push(t),
        }
    }
    assert_eq!((stalled.len(), refused), (2, 4));
    // The API server's address (here 127.0.0.1) is answered all the while.
    let (mut s, _) = h1(&r).await;
    for n in 0..5 {
        s.ready().await.unwrap();
        let (code, _) = send(
            &mut s,
            post(
                "/validate",
                "application/json",
                review("admission.k8s.io/v1", n),
            ),
        )
        .await;
        assert_eq!(code, StatusCode::OK);
    }
    let (_, metrics) = http_get(r.metrics, "/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l == "admission_webhook_tls_handshakes_refused_total{reason=\"busy\"} 16"),
        "{metrics}"
    );
}
