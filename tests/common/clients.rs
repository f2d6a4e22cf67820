//! The client packages (clients/python in a venv, clients/node's dependencies), installed
//! once per test binary by scripts/ensure-clients.sh (quick when up to date).

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Once;

/// The repository's root.
pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs scripts/ensure-clients.sh once per run of the calling test binary.
pub(crate) fn ensure_clients() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let o = Command::new("bash")
            .arg(root().join("scripts/ensure-clients.sh"))
            .output()
            .expect("bash runs");
        assert!(
            o.status.success(),
            "scripts/ensure-clients.sh failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    });
}

/// The standard output of a command that must have succeeded (else its standard error).
pub(crate) fn ok(what: &str, o: Output) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}
