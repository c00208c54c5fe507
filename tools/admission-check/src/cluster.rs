//! `--kubeconfig`: the cluster objects the rules read, listed once from a live cluster into the
//! same static state `--state` files fill.

use std::path::Path;

use admission_kit::App;
use admission_kit::cluster::state::StaticState;
use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::ApiResource;

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A list or get failed.
    #[error("reading {what} from the cluster: {source}")]
    Read {
        /// What was read.
        what: String,
        /// The cause.
        source: kube::Error,
    },
}

/// Lists Namespaces and every kind the apps' rules read (for a kind watched as one object, that
/// object) into `state`; returns how many objects were added.
pub async fn load(
    kubeconfig: &Path,
    apps: &[App],
    state: &mut StaticState,
) -> Result<usize, ClusterError> {
    let config_err = |message: String| ClusterError::Config {
        path: kubeconfig.display().to_string(),
        message,
    };
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| config_err(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| config_err(e.to_string()))?;
    let client = kube::Client::try_from(config).map_err(|e| config_err(e.to_string()))?;
    let mut wanted: Vec<(ApiResource, Option<(String, String)>)> = vec![(
        ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
        None,
    )];
    for app in apps {
        for w in &app.watches {
            let only = w.only.clone();
            let seen = wanted.iter().any(|(r, o)| {
                r.api_version == w.resource.api_version
                    && r.kind == w.resource.kind
                    && (o.is_none() || *o == only)
            });
            if !seen {
                wanted.push((w.resource.clone(), only));
            }
        }
    }
    let mut added = 0;
    for (ar, only) in wanted {
        let what = ar.kind.clone();
        let read_err = |source| ClusterError::Read {
            what: what.clone(),
            source,
        };
        let listed = match &only {
            Some((ns, name)) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar)
                .get_opt(name)
                .await
                .map(|o| o.into_iter().collect()),
            None => Api::<DynamicObject>::all_with(client.clone(), &ar)
                .list(&ListParams::default())
                .await
                .map(|l| l.items),
        };
        let objects: Vec<DynamicObject> = match listed {
            Ok(o) => o,
            // A kind the cluster does not serve (its CRD is not installed) has no objects.
            Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
            Err(e) => return Err(read_err(e)),
        };
        for mut o in objects {
            // List items come without apiVersion and kind.
            o.types = Some(kube::api::TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            });
            let v = serde_json::to_value(&o).map_err(|e| config_err(e.to_string()))?;
            state.add_value(v).map_err(config_err)?;
            added += 1;
        }
    }
    Ok(added)
}
