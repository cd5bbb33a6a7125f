//! The summary's settings from keyword arguments.

use chatfold::FoldPolicy;

/// The fold policy the keyword arguments describe (defaults: chatfold's).
pub fn build(
    role: Option<String>,
    prefix: Option<String>,
    min_tokens: Option<usize>,
    max_tokens: Option<usize>,
    ledger: bool,
) -> FoldPolicy {
    let mut policy = FoldPolicy::new().ledger(ledger);
    if let Some(role) = role {
        policy = policy.summary_role(role);
    }
    if let Some(prefix) = prefix {
        policy = policy.summary_prefix(prefix);
    }
    if let Some(n) = min_tokens {
        policy = policy.min_summary_tokens(n);
    }
    if let Some(n) = max_tokens {
        policy = policy.max_summary_tokens(n);
    }
    if ledger {
        prepare_once();
    }
    policy
}

/// Builds the ledger's patterns on a thread of its own, once per process
/// (see `FoldPolicy::prepare`): a compactor or memory is usually made a
/// while before its first fold, which then does not wait for them. If no
/// thread can start, the first fold builds them.
fn prepare_once() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("chatfold-prepare".into())
            .spawn(|| FoldPolicy::new().prepare());
    });
}
