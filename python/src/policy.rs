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
    policy
}
