//! What a review must be before its body is read and decoded: a POST of JSON, no larger than
//! the limit, received in time, within the in-flight budget.

use super::*;

/// Transport checks: POST only (405), a JSON content type (415), a bounded body (413) read
/// within a time limit (408), and the in-flight [`Budget`] (429 with `Retry-After`, before the
/// body is read).
#[derive(Clone, Debug)]
pub struct LimitsLayer {
    /// Largest body in bytes.
    pub body_limit: usize,
    /// Time allowed for reading the body.
    pub body_timeout: Duration,
    /// Shared by every endpoint of the server.
    pub budget: Arc<Budget>,
}

impl<S> Layer<S> for LimitsLayer {
    type Service = Limits<S>;
    fn layer(&self, inner: S) -> Limits<S> {
        Limits {
            inner,
            cfg: self.clone(),
        }
    }
}

/// See [`LimitsLayer`].
#[derive(Clone)]
pub struct Limits<S> {
    inner: S,
    cfg: LimitsLayer,
}

pub(super) fn is_json(headers: &HeaderMap) -> Result<(), String> {
    let Some(v) = headers.get(header::CONTENT_TYPE) else {
        return Err("missing Content-Type, expected application/json".into());
    };
    let s = v.to_str().unwrap_or_default();
    let media = s.split(';').next().unwrap_or_default().trim();
    if media.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(format!(
            "invalid Content-Type {s:?}, expected application/json"
        ))
    }
}

impl<S, B> Service<Request<B>> for Limits<S>
where
    S: Service<Request<Bytes>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let cfg = self.cfg.clone();
        Box::pin(async move {
            let v1 = envelope::V1;
            if req.method() != Method::POST {
                let mut r = review_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    v1,
                    String::new(),
                    format!("method {} not allowed, use POST", req.method()),
                );
                r.headers_mut()
                    .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
                return Ok(r);
            }
            if let Err(m) = is_json(req.headers()) {
                return Ok(review_error(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    v1,
                    String::new(),
                    m,
                ));
            }
            let too_large = || {
                review_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    v1,
                    String::new(),
                    format!("request body larger than {} bytes", cfg.body_limit),
                )
            };
            let declared = req
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > cfg.body_limit as u64) {
                return Ok(too_large());
            }
            let want = declared.map_or(cfg.body_limit, |n| n as usize);
            let peer = req.extensions().get::<Peer>().copied();
            let Some(_permits) = cfg.budget.reserve(peer, want) else {
                // Read and discard the body the client is sending (a frame at a time: no
                // memory held) while the 429 goes out. Closed unread, the connection would be
                // reset under the client's upload, and the reset can destroy the answer before
                // it is read (17 of 100 concurrent 7 MiB uploads got no answer).
                let (_, body) = req.into_parts();
                tokio::spawn(tokio::time::timeout(cfg.body_timeout, async move {
                    let mut body = std::pin::pin!(body);
                    while let Some(Ok(_)) = body.frame().await {}
                }));
                let mut r = review_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    v1,
                    String::new(),
                    "too many reviews in flight; retry shortly".to_owned(),
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
                return Ok(r);
            };
            let (parts, body) = req.into_parts();
            let read = tokio::time::timeout(
                cfg.body_timeout,
                Limited::new(body, cfg.body_limit).collect(),
            );
            let bytes = match read.await {
                Err(_) => {
                    return Ok(review_error(
                        StatusCode::REQUEST_TIMEOUT,
                        v1,
                        String::new(),
                        format!("request body not received within {:?}", cfg.body_timeout),
                    ));
                }
                Ok(Err(e)) => {
                    if e.downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        return Ok(too_large());
                    }
                    return Ok(review_error(
                        StatusCode::BAD_REQUEST,
                        v1,
                        String::new(),
                        format!("cannot read request body: {e}"),
                    ));
                }
                Ok(Ok(c)) => c.to_bytes(),
            };
            inner.oneshot(Request::from_parts(parts, bytes)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The service behind the limits: answers 200 with the body's length, so a test sees what
    /// reached it.
    #[derive(Clone)]
    struct Echo;

    impl Service<Request<Bytes>> for Echo {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

        fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: Request<Bytes>) -> Self::Future {
            let n = req.body().len().to_string();
            std::future::ready(Ok(text(StatusCode::OK, n)))
        }
    }

    fn limits(budget: Arc<Budget>) -> Limits<Echo> {
        LimitsLayer {
            body_limit: 16,
            body_timeout: Duration::from_secs(1),
            budget,
        }
        .layer(Echo)
    }

    fn post(body: &'static str) -> Request<Full<Bytes>> {
        Request::post("/validate")
            .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap()
    }

    async fn answer<B>(svc: Limits<Echo>, req: Request<B>) -> (StatusCode, HeaderMap, String)
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let r = svc.oneshot(req).await.unwrap();
        let (parts, body) = r.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }

    fn budget() -> Arc<Budget> {
        Arc::new(Budget::new(1 << 20, 16, 8))
    }

    #[tokio::test]
    async fn a_json_post_within_the_limit_reaches_the_handler_whole() {
        let (code, _, body) = answer(limits(budget()), post("{\"a\": 1}")).await;
        assert_eq!((code, body.as_str()), (StatusCode::OK, "8"));
    }

    #[tokio::test]
    async fn other_methods_are_refused_naming_post() {
        let req = Request::get("/validate")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let (code, headers, body) = answer(limits(budget()), req).await;
        assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(headers[header::ALLOW], "POST");
        assert!(body.contains("method GET not allowed, use POST"), "{body}");
    }

    #[tokio::test]
    async fn a_body_that_is_not_json_is_refused_before_it_is_read() {
        for (content_type, says) in [
            (None, "missing Content-Type"),
            (
                Some("text/plain"),
                "invalid Content-Type \\\"text/plain\\\"",
            ),
        ] {
            let mut req = post("{}");
            req.headers_mut().remove(header::CONTENT_TYPE);
            if let Some(t) = content_type {
                req.headers_mut()
                    .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(t));
            }
            let (code, _, body) = answer(limits(budget()), req).await;
            assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
            assert!(body.contains(says), "{body}");
        }
        assert!(
            is_json(&HeaderMap::from_iter([(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("Application/JSON ; charset=utf-8"),
            )]))
            .is_ok()
        );
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_declared_or_streamed() {
        let (code, _, body) = answer(limits(budget()), post("{\"a\": \"0123456789\"}")).await;
        assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(body.contains("request body larger than 16 bytes"), "{body}");
        // No Content-Length: the limit holds as the body arrives.
        let chunks = futures::stream::iter(["{\"a\":", " \"0123", "456789\"}"].map(|c| {
            Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from_static(c.as_bytes())))
        }));
        let req = Request::post("/validate")
            .header(header::CONTENT_TYPE, "application/json")
            .body(http_body_util::StreamBody::new(chunks))
            .unwrap();
        let (code, _, _) = answer(limits(budget()), req).await;
        assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn with_the_budget_spent_a_review_is_told_to_retry() {
        let budget = Arc::new(Budget::new(16, 16, 1));
        let held = budget.reserve(None, 16);
        assert!(held.is_some());
        let (code, headers, body) = answer(limits(budget.clone()), post("{}")).await;
        assert_eq!(code, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(headers[header::RETRY_AFTER], "1");
        assert!(body.contains("retry shortly"), "{body}");
        drop(held);
        let (code, _, _) = answer(limits(budget), post("{}")).await;
        assert_eq!(code, StatusCode::OK);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_not_received_in_time_is_refused() {
        let never = futures::stream::pending::<Result<hyper::body::Frame<Bytes>, Infallible>>();
        let req = Request::post("/validate")
            .header(header::CONTENT_TYPE, "application/json")
            .body(http_body_util::StreamBody::new(never))
            .unwrap();
        let (code, _, body) = answer(limits(budget()), req).await;
        assert_eq!(code, StatusCode::REQUEST_TIMEOUT);
        assert!(body.contains("not received within 1s"), "{body}");
    }
}
