//! Kthena v1.0 (`docs/spec/kthena-v1.md`): the controller manager's webhooks for
//! `workload.serving.volcano.sh` and the router's for `networking.serving.volcano.sh`, served
//! beside the pinned registry kinds.

pub mod autoscaling;
pub mod booster;
pub mod go_regexp;
pub mod networking;
pub mod route;
pub mod serving;
pub mod workload;
