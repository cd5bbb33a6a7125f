//! Histories and request bodies through the compactor: the one path that
//! `compact` and `serve` share, from a history read in its format to the
//! bytes written back.

use chatfold::{Breakpoints, Compaction, Compactor, History, NamedCounter, Plan};

use crate::{Failure, exit, io, messages};

/// The plan for `history`, its summary placed where the history's format
/// wants it. Refused (exit 2) when it must fold a body that does not say
/// its format, as the summary's place differs: a system message in
/// `messages` (OpenAI) or a block of the top-level `system` (Anthropic).
pub(crate) fn plan<'a, 'c>(
    compactor: &'c mut Compactor<NamedCounter>,
    history: &'a History,
) -> Result<Plan<'a, 'c, NamedCounter>, Failure> {
    compactor.policy.placement = history.placement();
    let compactor: &'c Compactor<NamedCounter> = compactor;
    let plan = compactor.plan(&history.messages)?;
    if plan.folds() && history.is_body() && !history.format_known() {
        return Err(Failure::new(exit::USAGE, messages::FORMAT_UNKNOWN));
    }
    Ok(plan)
}

/// A compaction's messages written back into the body (or array) they
/// came in, as JSON, the summary given a cache breakpoint as `breakpoints`
/// says.
pub(crate) fn written(
    history: &History,
    result: &Compaction<'_>,
    breakpoints: Breakpoints,
    pretty: bool,
) -> Result<Vec<u8>, Failure> {
    io::to_json(&history.to_json_compacted(result, breakpoints), pretty)
}
