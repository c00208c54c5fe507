//! Writes sent raw, so that what kube-rs does not surface (the `Warning` headers a webhook's
//! warnings become) can be read.

use serde_json::Value;

/// What the API server answered a write: its status, the `Warning` headers' texts, the body.
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Each `Warning` header's text.
    pub warnings: Vec<String>,
    /// The body (`null` when not JSON).
    pub body: Value,
}

impl Answer {
    /// The body's `message`, empty when none.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
}

/// A raw write, so that the warnings (which kube-rs does not surface) can be read.
pub async fn send(
    client: &kube::Client,
    method: &str,
    uri: &str,
    ctype: &str,
    body: &Value,
) -> Answer {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ctype)
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    // `299 - "text"`: the text between the quotes, unescaped; UTF-8, as kubectl reads it.
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .map(|v| {
            let text = v.splitn(3, ' ').nth(2).unwrap_or(&v).trim();
            text.trim_matches('"').replace("\\\"", "\"")
        })
        .collect();
    let bytes = resp.into_body().collect_bytes().await.unwrap();
    Answer {
        status,
        warnings,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}
