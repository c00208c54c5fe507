//! A real load balancer in front of replicas, standing in for a Kubernetes Service: HAProxy
//! (Debian's package, [`crate::tools::ensure_haproxy`]) in TCP mode, so TLS and HTTP/2 pass
//! through untouched as through kube-proxy, and each replica is in rotation only while its
//! readiness probe (`GET /readyz` on its plain-HTTP probe port) answers 200, as an
//! EndpointSlice lists only ready Pods. Checks run every 200 ms (kubelet probes and endpoint
//! updates take seconds in a cluster: a replica that drains for longer is safe in both).
//!
//! Connections already open stay with their replica when it leaves the rotation (as with
//! kube-proxy): moving clients off a draining replica is the replica's job (`Connection: close`,
//! GOAWAY), which is what the fault tests check. New connections go to the first replica in
//! configuration order that is up (`balance first`), not round robin: the API server keeps one
//! HTTP/2 connection per webhook address, and with round robin a rollout could move it onto a
//! replica that is never drained, leaving the second drain of a two-replica rollout untested.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::system::{Running, SystemError};

/// One replica: where it serves and where its readiness probe answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// Name in HAProxy's configuration and log.
    pub name: String,
    /// Serving port on 127.0.0.1.
    pub port: u16,
    /// Plain-HTTP probe port on 127.0.0.1 (`/readyz`).
    pub probe_port: u16,
}

/// A running HAProxy listening on `127.0.0.1:port`; stopped when dropped.
#[derive(Debug)]
pub struct LoadBalancer {
    /// The port clients connect to.
    pub port: u16,
    /// HAProxy's configuration file.
    pub config: PathBuf,
    _process: Running,
}

/// HAProxy's configuration for `backends` behind `127.0.0.1:port`. Backends not listening yet
/// are simply down until they are ready: slots for replicas a rollout starts later.
pub fn config(port: u16, backends: &[Backend]) -> String {
    let mut c = format!(
        "global\n  maxconn 4096\n\
         defaults\n  mode tcp\n  timeout connect 1s\n  timeout client 10m\n  timeout server 10m\n\
         frontend webhook\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
         backend replicas\n  balance first\n  option httpchk GET /readyz\n\
         \x20 default-server inter 200ms fastinter 200ms downinter 200ms fall 1 rise 1\n"
    );
    for b in backends {
        c.push_str(&format!(
            "  server {} 127.0.0.1:{} check port {}\n",
            b.name, b.port, b.probe_port
        ));
    }
    c
}

impl LoadBalancer {
    /// Writes the configuration into `dir` and starts HAProxy in the foreground, its output in
    /// `dir/haproxy.log`. Returns once the configuration was accepted (HAProxy checks it first).
    pub fn start(dir: &Path, port: u16, backends: &[Backend]) -> Result<Self, SystemError> {
        let haproxy = crate::tools::haproxy().map_err(|e| SystemError::Invalid(e.to_string()))?;
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config(port, backends))
            .map_err(|e| SystemError::Io(path.display().to_string(), e))?;
        let check = Command::new(&haproxy)
            .arg("-c")
            .arg("-f")
            .arg(&path)
            .output()
            .map_err(|e| SystemError::Io(haproxy.display().to_string(), e))?;
        if !check.status.success() {
            return Err(SystemError::Invalid(format!(
                "haproxy refused {}: {}",
                path.display(),
                String::from_utf8_lossy(&check.stdout)
            )));
        }
        let mut cmd = Command::new(&haproxy);
        cmd.arg("-db").arg("-f").arg(&path);
        let process = Running::spawn("haproxy", cmd, dir.join("haproxy.log"))?;
        Ok(Self {
            port,
            config: path,
            _process: process,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_is_health_checked_on_its_probe_port() {
        let c = config(
            9000,
            &[Backend {
                name: "a".into(),
                port: 9001,
                probe_port: 9002,
            }],
        );
        assert!(c.contains("bind 127.0.0.1:9000"), "{c}");
        assert!(c.contains("option httpchk GET /readyz"), "{c}");
        assert!(c.contains("server a 127.0.0.1:9001 check port 9002"), "{c}");
    }
}
