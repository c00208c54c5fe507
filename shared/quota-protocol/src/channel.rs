//! The client's side of the wire: channels to quota-state, over mutual TLS or (benchmarks)
//! plaintext, each call's frames in one write.

use std::sync::Arc;

use tokio::net::TcpStream;

use crate::coalesce::Coalesced;

/// A lazily connecting channel to quota-state over mutual TLS: TCP to the endpoint's host and
/// port, then TLS with the configuration `tls` gives for each new connection (so a renewed
/// client certificate is used from the next connection on), verifying that the server's
/// certificate names `server_name`. A call's frames leave in one TLS record and one write
/// ([`Coalesced`]).
pub fn mtls_channel(
    endpoint: tonic::transport::Endpoint,
    tls: Arc<dyn Fn() -> Arc<rustls::ClientConfig> + Send + Sync>,
    server_name: &str,
) -> Result<tonic::transport::Channel, String> {
    let server_name = rustls::pki_types::ServerName::try_from(server_name.to_owned())
        .map_err(|e| format!("quota-state server name {server_name:?}: {e}"))?;
    Ok(
        endpoint.connect_with_connector_lazy(tower::service_fn(move |uri: http::Uri| {
            let (config, server_name) = (tls(), server_name.clone());
            async move {
                let tcp = connect_tcp(&uri, 443).await?;
                let tls = tokio_rustls::TlsConnector::from(config)
                    .connect(server_name, tcp)
                    .await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(Coalesced::new(tls)))
            }
        })),
    )
}

/// A lazily connecting plaintext channel to quota-state (a quota-state run with
/// `--insecure-plaintext`: benchmarks), its calls' frames coalesced as on [`mtls_channel`].
pub fn plaintext_channel(endpoint: tonic::transport::Endpoint) -> tonic::transport::Channel {
    endpoint.connect_with_connector_lazy(tower::service_fn(|uri: http::Uri| async move {
        let tcp = connect_tcp(&uri, 80).await?;
        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(Coalesced::new(tcp)))
    }))
}

/// TCP to the URI's host and port, without Nagle's delay (gRPC writes whole calls).
async fn connect_tcp(uri: &http::Uri, default_port: u16) -> std::io::Result<TcpStream> {
    let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
    let tcp = TcpStream::connect((host, uri.port_u16().unwrap_or(default_port))).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}
