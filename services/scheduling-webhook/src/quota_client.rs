//! PV-4 through quota-state (gRPC): the webhook resolves the pod's quota and request, quota-state
//! checks and reserves atomically. Used when `--quota-state-url` is set; `review` (no runtime,
//! no service) keeps the in-process evaluation of [`crate::quota`].

use std::sync::Mutex;
use std::time::Duration;

use admission_kit::resources::pod_request;
use admission_kit::{Context, Request};
use k8s_openapi::api::core::v1::Pod;
use quota_state::format_code;
use quota_state::proto::quota_state_client::QuotaStateClient;
use quota_state::proto::{AdmitPodRequest, Amount};
use tonic::transport::{Channel, Endpoint};

use crate::quota::Topology;

/// The answer of a remote check.
pub enum Remote {
    /// Admitted (and reserved unless dry run).
    Allowed,
    /// Refused with upstream's text.
    Denied(String),
    /// quota-state did not answer in time or failed.
    Unavailable(String),
}

static CHANNEL: Mutex<Option<(String, Channel)>> = Mutex::new(None);

fn channel(url: &str, deadline: Duration) -> Result<Channel, String> {
    let mut g = CHANNEL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((u, c)) = g.as_ref()
        && u == url
    {
        return Ok(c.clone());
    }
    let c = Endpoint::from_shared(url.to_owned())
        .map_err(|e| format!("bad --quota-state-url {url}: {e}"))?
        .connect_timeout(deadline)
        .timeout(deadline)
        .connect_lazy();
    *g = Some((url.to_owned(), c.clone()));
    Ok(c)
}

/// PV-4 for one pod through quota-state. `None` when nothing needs checking.
pub fn admit(req: &Request<Pod>, ns: &str, ctx: &Context) -> Option<Remote> {
    let t = match Topology::from_state(ctx) {
        Ok(t) => t,
        Err(e) => return Some(Remote::Unavailable(e.to_string())),
    };
    let quota = crate::quota::admission_quota(req, ns, ctx, &t)?;
    let finished = matches!(
        req.object.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    );
    let requests = if finished {
        Default::default()
    } else {
        req.object
            .spec
            .as_ref()
            .map(pod_request)
            .unwrap_or_default()
    };
    let msg = AdmitPodRequest {
        namespace: ns.to_owned(),
        name: req
            .object
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| req.name.clone()),
        quota,
        requests: requests
            .iter()
            .map(|(k, a)| {
                (
                    k.clone(),
                    Amount {
                        milli: i64::try_from(a.milli).unwrap_or(i64::MAX),
                        format: format_code(a.format),
                    },
                )
            })
            .collect(),
        dry_run: req.dry_run,
    };
    let deadline =
        Duration::from_millis(ctx.option("quota-state-timeout-ms").parse().unwrap_or(2000));
    let url = ctx.option("quota-state-url").to_owned();
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return Some(Remote::Unavailable(
            "no async runtime to call quota-state from".into(),
        ));
    };
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return Some(Remote::Unavailable(
            "quota-state calls need the multi-threaded runtime".into(),
        ));
    }
    let result = tokio::task::block_in_place(|| {
        handle.block_on(async move {
            let mut client = QuotaStateClient::new(channel(&url, deadline)?);
            let mut request = tonic::Request::new(msg);
            request.set_timeout(deadline);
            client
                .admit_pod(request)
                .await
                .map(|r| r.into_inner())
                .map_err(|s| format!("{}: {}", s.code(), s.message()))
        })
    });
    Some(match result {
        Ok(r) if r.allowed => Remote::Allowed,
        Ok(r) => Remote::Denied(r.message),
        Err(e) => Remote::Unavailable(e),
    })
}
