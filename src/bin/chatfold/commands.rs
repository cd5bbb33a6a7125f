//! The subcommands, each from its flags to its output: `compact`, `count`
//! and `explain`.

use chatfold::{Message, NamedCounter, Plan, TokenCounter};

use crate::flags::{BudgetArgs, CompactArgs, InputArgs};
use crate::io::{self, Input};
use crate::summarizers::Chosen;
use crate::{Failure, body, exit, messages, report, setup};

/// Prints a warning for each trailing tool result whose call is missing.
fn warn_unanswered(input: &Input) {
    for (index, id) in report::unanswered_tail(&input.history.messages) {
        eprintln!("warning: {}", messages::unanswered_call(index, &id));
    }
}

/// `chatfold compact`: plans, refuses what it must before any summarizer
/// runs, then compacts and writes the result (and the report).
pub(crate) fn compact(all: &CompactArgs) -> Result<(), Failure> {
    let CompactArgs {
        budget: args,
        summarize,
        cache,
        strict,
        report,
        pretty,
    } = all;
    let (strict, report, pretty) = (*strict, report.as_deref(), *pretty);
    if summarize.summarize_cmd.is_some() {
        crate::summarizers::pass_on_signals();
    }
    // The ledger's patterns (on a thread of their own, not waited for: a
    // history under budget needs none) and the tokenizer's tables are built
    // while the input is read.
    let policy = setup::policy(&args.fold);
    let _ = std::thread::Builder::new().spawn(move || policy.prepare());
    let (input, compactor) = std::thread::scope(|scope| {
        let building = scope.spawn(|| setup::compactor(args));
        let input = io::read_input(&args.input);
        let compactor = building
            .join()
            .unwrap_or_else(|_| Err(Failure::new(exit::USAGE, messages::CANNOT_BUILD_TOKENIZER)));
        (input, compactor)
    });
    let mut compactor = setup::cached(compactor?, cache, summarize)?
        .strict(strict)
        .count_all(report.is_some());
    let input = input?;
    let history = &input.history;
    let counter = compactor.counter;
    // Refused before anything is summarized: a summarizer may be a paid call.
    let plan = body::plan(&mut compactor, history)?;
    warn_unanswered(&input);
    let summarizer = Chosen::new(summarize, counter)?;
    let result = plan.compact(&summarizer)?;
    let output = if matches!(result.messages, std::borrow::Cow::Owned(_)) {
        body::written(history, &result, args.fold.cache_breakpoints, pretty)?
    } else {
        // Unchanged: the input goes back byte for byte.
        io::unchanged(&input, pretty)?
    };
    if let Some(path) = report {
        io::write_report(path, &report::report_text(args.budget, &result))?;
    }
    if result.over_budget {
        // The same figure as the report's `tokens_after`.
        eprintln!(
            "warning: {}",
            messages::over_budget(result.tokens_after, args.budget, result.messages.is_empty())
        );
    }
    io::write_stdout(&output)?;
    // The process ends here: the OS takes the history back faster than
    // freeing its hundred thousand strings one by one.
    std::mem::forget(result);
    std::mem::forget(input);
    Ok(())
}

/// `chatfold count`: the history's tokens.
pub(crate) fn count(args: &InputArgs) -> Result<(), Failure> {
    let counter = args.tokenizer.parse::<NamedCounter>()?;
    let input = io::read_input(args)?;
    io::write_stdout(format!("{}\n", count_on_threads(&counter, &input.history.messages)).as_bytes())
}

/// [`TokenCounter::count_messages`] of `messages`, counted on the
/// machine's threads, each a run of the messages (a long history; a
/// short one on this thread).
fn count_on_threads(counter: &NamedCounter, messages: &[Message]) -> usize {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.min(messages.len() / 4096).max(1);
    if threads == 1 {
        return counter.count_messages(messages);
    }
    let part = |run: &[Message]| {
        run.iter()
            .fold(0usize, |sum, m| sum.saturating_add(counter.count_message(m)))
    };
    std::thread::scope(|scope| {
        let runs: Vec<_> = (messages.chunks(messages.len().div_ceil(threads)))
            .map(|run| scope.spawn(move || part(run)))
            .collect();
        runs.into_iter().fold(counter.reply_priming(), |sum, run| {
            let tokens = run.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            sum.saturating_add(tokens)
        })
    })
}

/// `chatfold explain`: the plan, message by message, without summarizing.
pub(crate) fn explain(args: &BudgetArgs) -> Result<(), Failure> {
    let mut compactor = setup::compactor(args)?.count_all(true);
    let input = io::read_input(&args.input)?;
    compactor.policy.placement = input.history.placement();
    warn_unanswered(&input);
    let messages = &input.history.messages;
    let plan: Plan<'_, '_, NamedCounter> = compactor.plan(messages)?;
    let report = plan.report();
    let total =
        (0..report.len()).filter_map(|i| report.tokens(i)).sum::<usize>() + compactor.counter.reply_priming();
    let told = plan.folded().map(|request| request.allowance());
    let result = plan.apply("(summary)")?;
    let text = report::explain_text(
        messages,
        &report::Explained {
            budget: args.budget,
            total,
            keep_recent: compactor.effective_keep_recent(),
            told,
            report: &result.report,
        },
    );
    io::write_stdout(text.as_bytes())
}
