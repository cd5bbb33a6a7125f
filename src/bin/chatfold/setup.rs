//! The library's objects the flags ask for: the counter, the fold policy,
//! the compactor and its cache. The library validates them (exit 2).

use std::sync::Arc;

use chatfold::cache::{FileCache, RedisCache, SummaryCache};
use chatfold::{ClearToolResults, Compactor, FoldPolicy, NamedCounter};

use crate::Failure;
use crate::flags::{BudgetArgs, CacheArgs, FoldArgs, SummarizeArgs};

/// The fold policy the flags name.
pub(crate) fn policy(args: &FoldArgs) -> FoldPolicy {
    let policy = FoldPolicy::new()
        .ledger(!args.no_ledger)
        .ledger_percent(args.ledger_percent);
    match &args.summary_role {
        Some(role) => policy.summary_role(role.as_str()),
        None => policy,
    }
}

/// The compactor the flags name, without a cache.
pub(crate) fn compactor(args: &BudgetArgs) -> Result<Compactor<NamedCounter>, Failure> {
    let counter = args.input.tokenizer.parse::<NamedCounter>()?;
    let mut c = folding(args.budget, counter, &args.fold);
    c.keep_recent = args.keep_recent;
    Ok(c)
}

/// A compactor for `budget` tokens counting with `counter`, folding as the
/// flags say (`compact`, `explain`, and each of `serve`'s requests).
pub(crate) fn folding(budget: usize, counter: NamedCounter, args: &FoldArgs) -> Compactor<NamedCounter> {
    let mut c = Compactor::new(budget).counter(counter).policy(policy(args));
    if let Some(keep) = args.clear_tool_results {
        let clearing = args.clear_exclude.iter().fold(
            ClearToolResults::new()
                .keep_recent(keep)
                .min_tokens(args.clear_min_tokens),
            |c, name| c.exclude(name.clone()),
        );
        c = c.clear_tool_results(clearing);
    }
    c.max_fold_input_tokens = args.max_fold_input_tokens;
    c.fold_to = args.fold_to.map(|f| f.tokens(budget));
    c.pins = args.pin.iter().flatten().cloned().collect();
    c
}

/// The cache's namespace: the summarizer the flags name, so that another
/// summarizer's summaries are not reused.
pub(crate) fn namespace(summarize: &SummarizeArgs) -> String {
    match (
        &summarize.summarize_cmd,
        &summarize.summarize_url,
        &summarize.summarize_model,
    ) {
        (Some(cmd), _, _) => format!("cmd {cmd}"),
        (None, Some(url), Some(model)) => format!("http {url} {model}"),
        _ => "extractive".to_owned(),
    }
}

/// `compactor` with the cache the flags name, its keys in the summarizer's
/// namespace.
pub(crate) fn cached(
    compactor: Compactor<NamedCounter>,
    args: &CacheArgs,
    summarize: &SummarizeArgs,
) -> Result<Compactor<NamedCounter>, Failure> {
    let store: Arc<dyn SummaryCache> = match (&args.cache_dir, &args.cache_redis) {
        (Some(dir), _) => Arc::new(FileCache::new(dir)),
        (None, Some(url)) => Arc::new(RedisCache::new(url)?),
        (None, None) => return Ok(compactor),
    };
    Ok(compactor.cache(store, namespace(summarize)))
}
