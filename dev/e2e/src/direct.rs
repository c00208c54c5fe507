//! A client that talks to a webhook port directly, as any Pod in the cluster could, with no API
//! server in between: what forged reviews can and cannot do.

use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// One HTTP/2 connection to a webhook port.
pub struct Direct {
    sender: SendRequest<Full<Bytes>>,
}

impl Direct {
    /// Connects to `addr` (`127.0.0.1:port`) with `tls` (which certificate it presents, if
    /// any, and which CA it trusts), naming the server `localhost`. `Err` when the handshake or
    /// the HTTP/2 preface fails (a server that refuses the client certificate closes then).
    pub async fn connect(addr: &str, tls: Arc<rustls::ClientConfig>) -> Result<Self, String> {
        Self::connect_from(addr, tls, None).await
    }

    /// As [`Direct::connect`], from source address `from` (another loopback address, say
    /// `127.0.0.2`: a Pod other than the API server) when given.
    pub async fn connect_from(
        addr: &str,
        tls: Arc<rustls::ClientConfig>,
        from: Option<std::net::IpAddr>,
    ) -> Result<Self, String> {
        let tcp = match from {
            None => tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect {addr}: {e}"))?,
            Some(ip) => {
                let to: std::net::SocketAddr =
                    addr.parse().map_err(|e| format!("address {addr}: {e}"))?;
                let socket = if ip.is_ipv4() {
                    tokio::net::TcpSocket::new_v4()
                } else {
                    tokio::net::TcpSocket::new_v6()
                }
                .map_err(|e| e.to_string())?;
                socket
                    .bind(std::net::SocketAddr::new(ip, 0))
                    .map_err(|e| format!("bind {ip}: {e}"))?;
                socket
                    .connect(to)
                    .await
                    .map_err(|e| format!("connect {addr} from {ip}: {e}"))?
            }
        };
        // Small requests one after another: Nagle's algorithm would hold each for the server's
        // delayed acknowledgement.
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::try_from("localhost")
            .map_err(|e| e.to_string())?
            .to_owned();
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        let (sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
        tokio::spawn(conn);
        Ok(Self { sender })
    }

    /// POSTs `body` (JSON) to `path`; the status and the body as JSON.
    pub async fn post(
        &mut self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(u16, serde_json::Value), String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let req = hyper::Request::post(format!("https://localhost{path}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        let v = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        Ok((status, v))
    }
}

/// An AdmissionReview for the CREATE of pod `namespace/name` with quota label `quota`,
/// requesting `cpu`, as review `uid`: what the API server would send for it.
pub fn pod_review(
    uid: &str,
    namespace: &str,
    name: &str,
    quota: &str,
    cpu: &str,
) -> serde_json::Value {
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                 "resources": {"requests": {"cpu": cpu}}}]}
    });
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": name, "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:tenant:forger"},
            "object": pod, "oldObject": null, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

/// Whether a review answer allowed, and its message.
pub fn answer(v: &serde_json::Value) -> (bool, String) {
    let r = &v["response"];
    (
        r["allowed"].as_bool().unwrap_or(false),
        r["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}
