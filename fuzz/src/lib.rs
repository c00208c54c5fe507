//! What the targets share: each service with the state its examples run with.

use std::sync::Arc;

use admission_kit::App;
use admission_kit::cluster::state::StaticState;
use admission_kit::review::handler::Context;

/// A service prepared as `review` prepares it (default gates and options), reading `state`
/// (YAML or JSON objects, as `--state` takes them).
pub fn service(app: App, state: &str) -> (App, Context) {
    let mut s = StaticState::default();
    if let Err(e) = s.add_text(state) {
        panic!("the fuzz target's state does not load: {e}");
    }
    let prepared = match app.prepare(None) {
        Ok(p) => p,
        Err(e) => panic!("default gates: {e}"),
    };
    let ctx = Context::new(Arc::new(s)).with_gates(prepared.gates.clone());
    (prepared.app, ctx)
}
