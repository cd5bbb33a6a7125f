//! The extractive summarizer: no model, no network.
//!
//! A digest in sections, each line a sentence taken from the folded turns
//! (or carried from the previous summary):
//!
//! - `Started with:` the first user turn of the fold, or the previous
//!   summary's own `Started with:` lines (its first line, for a summary
//!   written otherwise), so that a summary rolled forward many times still
//!   says how the conversation began;
//! - `Decided:` sentences that decide or conclude ("we will", "decided",
//!   "let's", "going with", "use X" ...) and people's imperative requests
//!   (those that differ only in the names in backticks they hold, one line
//!   that lists the names: `` `socket` / `open` / `openat` ``);
//! - `Discussed:` what else people said, once (a line with two thirds of
//!   its words in a better one's, and no path, number or other name of its
//!   own, is left out);
//! - `Tools:` each call's name and arguments with the first sentence of its
//!   result, or the first line that names an error (a marker's word inside
//!   an identifier, `statement_timeout_ms`, names none), after `failed:`
//!   when the result is flagged as an error or opens with that line, after
//!   `→` when the tool ran and its output reports an error further on (a
//!   search's matches, a log);
//! - `Open questions:` people's questions that no later answer in the fold
//!   takes up: its reply (the first answer after it that makes no tool
//!   call, unless that one only asks back) uses one of its words (in any
//!   form: `takes` for `take`) or names, or later answers use three in
//!   five of them;
//! - `Recently:` the last two turns of the fold.
//!
//! Every candidate line gets a score (role, first or last of the span,
//! markers, tool errors). When a section has more lines than its share of
//! the allowance, the span is cut into as many equal stretches as lines fit
//! and the best line of each stretch is kept, so old, middle and new turns
//! are all represented; the room left is then filled by score. Sections are
//! served in order of importance (`Started with`, open questions,
//! decisions, tools, recent turns, the rest), and lines are written in
//! their original order within each section.

use crate::count::{Heuristic, TokenCounter};
use crate::summarize::{Summarizer, SummaryRequest};

/// A deterministic summarizer that needs no model: a digest, in sections,
/// of sentences taken from the whole folded span.
///
/// It keeps how the conversation started (rolled forward from the previous
/// summary), the decisions, the tool outcomes (errors first), the questions
/// still open and the last turns; when they do not all fit the allowance,
/// it samples each section evenly across the span rather than keeping only
/// the newest lines. The output always fits the allowance as measured
/// (whole lines, and never a cut word), unless not even one word does.
///
/// It is what the CLI uses by default, so chatfold works offline. It
/// measures with the caller's counter when the request carries one
/// ([`SummaryRequest::count`]), else with its own ([`Heuristic`] unless
/// given one).
///
/// Its cost grows with the folded text (each turn's first few thousand
/// characters are read), and the counting with the summary's size. Telling
/// repeated `Discussed:` lines apart has a budget, a few hundred index reads
/// a line, which prose stays far below; on text made of a few dozen words
/// over and over it runs out, and the lines not yet compared are all kept
/// as candidates, so that the cost stays linear.
///
/// # Examples
///
/// ```
/// use chatfold::{Extractive, Message, Summarizer, SummaryRequest, ToolCall};
///
/// let folded = [
///     Message::user("Deploy v2 to staging on the blue cluster, and keep green idle. Then report back."),
///     Message::assistant_tool_calls(vec![ToolCall::new("c1", "deploy", r#"{"v":"2"}"#)]),
///     Message::tool("ok: deployed in 41s", "c1"),
///     Message::assistant("Deployed. We will keep green idle until Friday."),
///     Message::user("Should we tell the on-call team about the Friday freeze?"),
/// ];
/// let summary = Extractive::new().summarize(&SummaryRequest::new(None, &folded, 200))?;
/// assert_eq!(
///     summary,
///     "Started with:\n\
///      user: Deploy v2 to staging on the blue cluster, and keep green idle.\n\
///      Tools:\n\
///      deploy({\"v\":\"2\"}) → ok: deployed in 41s\n\
///      Open questions:\n\
///      user: Should we tell the on-call team about the Friday freeze?\n\
///      Recently:\n\
///      assistant: We will keep green idle until Friday."
/// );
/// // The allowance is a ceiling: with less room, fewer whole lines.
/// let short = Extractive::new().summarize(&SummaryRequest::new(None, &folded, 40))?;
/// assert!(chatfold::Heuristic.count(&short) <= 40 && short.starts_with("Started with:"));
/// # use chatfold::TokenCounter;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Extractive<C = Heuristic> {
    counter: C,
}

/// Longest line the extractive summarizer writes, in characters.
const LINE_CHARS: usize = 200;
/// Longest arguments shown for a tool call, in characters.
const ARGS_CHARS: usize = 80;
/// How much of a message is read, in bytes: its opening, where people say
/// what they want.
const WINDOW: usize = 4000;
/// Sentences read from a message at most.
const SENTENCES: usize = 16;
/// Lines kept in `Started with:` at most.
const STARTED_LINES: usize = 2;
/// Turns shown under `Recently:`.
const RECENT_TURNS: usize = 2;
/// Keywords kept for a question, to see whether an answer takes it up.
const QUESTION_WORDS: usize = 16;

impl Extractive {
    /// An extractive summarizer measuring with [`Heuristic`].
    pub const fn new() -> Self {
        Extractive { counter: Heuristic }
    }
}

impl<C: TokenCounter> Extractive<C> {
    /// An extractive summarizer measuring with `counter` (when the request
    /// carries no counter of the caller's).
    pub const fn with_counter(counter: C) -> Self {
        Extractive { counter }
    }
}

impl<C: TokenCounter> Summarizer for Extractive<C> {
    type Error = std::convert::Infallible;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, Self::Error> {
        let measure = |text: &str| request.count(text).unwrap_or_else(|| self.counter.count(text));
        Ok(digest(request, &measure))
    }
}

mod gather;
mod pick;
mod text;

use gather::{Gathered, Place, SPAN, carry, merge_names, walk};
use pick::{choose, fallback, fit};

/// The summary of `request`, measured with `measure`.
fn digest(request: &SummaryRequest<'_>, measure: &dyn Fn(&str) -> usize) -> String {
    let mut g = Gathered::default();
    let previous = request.previous_summary().filter(|p| !p.trim().is_empty());
    let carried_start = previous.is_some_and(|p| carry(p, &mut g));
    let n = request.messages().len();
    let place = |i: usize| match previous {
        None => (i as u128 * SPAN as u128 / n.max(1) as u128) as Place,
        Some(_) => SPAN / 3 + (i as u128 * (2 * SPAN / 3) as u128 / n.max(1) as u128) as Place,
    };
    walk(request, &mut g, carried_start, &place);
    merge_names(&mut g.candidates);
    let allowance = request.allowance();
    let chosen = choose(&g.candidates, allowance, measure);
    let text = fit(&g.candidates, chosen, allowance, measure);
    if !text.is_empty() {
        return text;
    }
    fallback(&g.candidates, n, allowance, measure)
}

#[cfg(test)]
mod tests {
    use super::text::{
        IMPERATIVES, SHORT_FORMS, STOPWORDS, clip, decision, is_error, keywords, opening, sentences,
        short_form, stem, telling,
    };
    use super::*;
    use crate::ToolCall;
    use crate::message::{Message, Role};

    fn summarize(folded: &[Message], allowance: usize) -> String {
        Extractive::new()
            .summarize(&SummaryRequest::new(None, folded, allowance))
            .unwrap()
    }

    /// A line that says again what a better one says is written once; lines
    /// that name different things, or say too little to compare, each get
    /// theirs.
    #[test]
    fn lines_that_say_the_same_are_written_once() {
        let mut folded = vec![Message::user("Please watch the payments rollout this week.")];
        let names = [
            "cache", "queue", "alpha", "delta", "north", "search", "batch", "orders",
        ];
        for (i, name) in names.iter().enumerate() {
            folded.push(Message::user(format!(
                "Status of {name} please, and the next one after it."
            )));
            folded.push(Message::assistant(format!(
                "The {name} dashboard looks steady, latency within its usual band across the {} fleet.",
                names[(i + 1) % names.len()]
            )));
        }
        folded.push(Message::assistant(
            "The cache dashboard reads /srv/cache/a.log, latency steady within its usual band.",
        ));
        folded.push(Message::assistant(
            "The cache dashboard reads /srv/cache/b.log, latency steady within its usual band.",
        ));
        folded.push(Message::assistant("Ok."));
        folded.push(Message::assistant("Ok."));
        folded.push(Message::user("Thanks, that is all for today, see you tomorrow."));
        let summary = summarize(&folded, 2_000);
        let steady = summary
            .lines()
            .filter(|l| l.contains("dashboard looks steady"))
            .count();
        assert_eq!(steady, 1, "{summary}");
        // Each path is its own line; the short lines are not compared.
        assert!(
            summary.contains("/srv/cache/a.log") && summary.contains("/srv/cache/b.log"),
            "{summary}"
        );
        // With room for all, every other line is there.
        let statuses = summary
            .lines()
            .filter(|l| l.starts_with("user: Status of"))
            .count();
        assert_eq!(statuses, 1, "{summary}");
    }

    #[test]
    fn word_lists_are_sorted_for_binary_search() {
        assert!(IMPERATIVES.windows(2).all(|w| w[0] < w[1]));
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(SHORT_FORMS.windows(2).all(|w| w[0].0 < w[1].0));
        // Each as `stem` leaves it (else no word would find it), and its
        // short form long enough to be told.
        for &(long, short) in SHORT_FORMS {
            assert_eq!(stem(long), long);
            assert_eq!(stem(short), short);
            assert!(short.len() >= 4, "{short}");
            assert!(
                long.len() < 32 && long.as_bytes()[0].is_ascii_lowercase(),
                "{long}"
            );
            assert_eq!(short_form(long), short);
        }
    }

    #[test]
    fn sentences_split_where_people_end_them() {
        fn split(t: &str) -> Vec<&str> {
            sentences(t).collect()
        }
        assert_eq!(split("One. Two."), ["One.", "Two."]);
        assert_eq!(split("v1.2 is out! Yes"), ["v1.2 is out!", "Yes"]);
        assert_eq!(split("line one\n\nline two"), ["line one", "line two"]);
        assert_eq!(split("你好。再见"), ["你好。", "再见"]);
        assert!(split("  \n ").is_empty());
    }

    #[test]
    fn openings_take_sentences_until_long_enough() {
        assert_eq!(
            opening("Hi. I need help with a failing deploy of the ledger service, again. Thanks!"),
            "Hi. I need help with a failing deploy of the ledger service, again."
        );
        assert_eq!(opening("Short one."), "Short one.");
        assert_eq!(opening(""), "");
    }

    #[test]
    fn decisions_and_requests_are_recognised() {
        assert!(decision("We decided to keep Postgres.", &Role::Assistant).is_some());
        assert!(decision("OK, let's ship it on Monday.", &Role::User).is_some());
        assert!(decision("Use the blue cluster.", &Role::Assistant).is_some());
        assert!(decision("Add a retry to the uploader.", &Role::User).is_some());
        assert!(decision("Add a retry to the uploader.", &Role::Assistant).is_none());
        assert!(decision("The logs are clean.", &Role::User).is_none());
        assert!(decision("It was undecided.", &Role::User).is_none());
    }

    #[test]
    fn clips_end_at_words() {
        let long = "word ".repeat(100);
        let clipped = clip(&long, 42);
        assert_eq!(clipped, format!("{}…", "word ".repeat(8).trim_end()));
        assert_eq!(clip(&"x".repeat(300), 200).chars().count(), 201);
        assert_eq!(clip("short", 200), "short");
    }

    #[test]
    fn sections_come_in_order_and_questions_answered_are_not_open() {
        let folded = [
            Message::user("Migrate the billing service to the new queue."),
            Message::assistant("Which queue, Kafka or SQS?"),
            Message::user("Which region hosts the queue?"),
            Message::assistant("The queue lives in the Frankfurt region."),
            Message::user("We decided on SQS. Is the Zanzibar export still nightly?"),
            Message::assistant_tool_calls(vec![ToolCall::new("c1", "logs", "{}")]),
            Message::tool("ERROR config: unknown field `ttl`", "c1"),
            Message::assistant("The config has an unknown field."),
        ];
        let summary = summarize(&folded, 1000);
        assert_eq!(
            summary,
            "Started with:\n\
             user: Migrate the billing service to the new queue.\n\
             Discussed:\n\
             assistant: Which queue, Kafka or SQS?\n\
             user: Which region hosts the queue?\n\
             assistant: The queue lives in the Frankfurt region.\n\
             Tools:\n\
             logs({}) failed: ERROR config: unknown field `ttl`\n\
             Open questions:\n\
             user: Is the Zanzibar export still nightly?\n\
             Recently:\n\
             assistant: The config has an unknown field."
        );
    }

    /// A question is answered when its reply (the first answer after it
    /// that makes no tool call) takes up one of its words, in another form,
    /// or one of its names; not when the reply only asks back or speaks of
    /// something else.
    #[test]
    fn a_reply_that_takes_a_question_up_answers_it() {
        let open = |folded: &[Message]| -> Vec<String> {
            let summary = summarize(folded, 1000);
            (summary.lines())
                .skip_while(|l| *l != "Open questions:")
                .skip(1)
                .take_while(|l| l.starts_with("user: "))
                .map(str::to_owned)
                .collect()
        };
        // The question, a turn that makes a call (saying `before` too), its
        // result, the reply.
        let asked_with = |question: &str, before: &str, reply: &str| {
            let mut call = Message::assistant(before);
            call.tool_calls = vec![ToolCall::new("c1", "run", "{}")];
            vec![
                Message::user("Please fix the staging deploy of ledgerd."),
                Message::assistant("On it."),
                Message::user(question),
                call,
                Message::tool("done", "c1"),
                Message::assistant(reply),
                Message::user("Thanks, next topic: the weekly report."),
                Message::assistant("The weekly report is ready."),
            ]
        };
        let asked = |question: &str, reply: &str| asked_with(question, "", reply);
        let still_open = |q: &str| vec![format!("user: {q}")];
        // A name: `stg-app-07` (its words are too short to count).
        let q = "Is the database reachable from stg-app-07?";
        let reply = "db-02.internal:5432 accepts connections from stg-app-07.";
        assert!(open(&asked(q, reply)).is_empty());
        // A word in another form: `take` and `takes`.
        let q = "What format does the new field take?";
        assert!(open(&asked(q, "It takes a duration string such as 5s.")).is_empty());
        // A word and its short form: `prod` and `production`, `config` and
        // `configuration`; not a word and a longer one (`data`, `database`).
        let q = "So what happens in prod after the upgrade?";
        assert!(open(&asked(q, "In production the new release waits for the canary.")).is_empty());
        let q = "Did you read the configuration?";
        assert!(open(&asked(q, "Yes, the config looks right.")).is_empty());
        let q = "Is the data stale?";
        assert_eq!(open(&asked(q, "The database is fine.")), still_open(q));
        // (`stats` is `stat`, as `state` is: no short form of `statistics`.)
        let q = "What do the statistics show?";
        assert_eq!(open(&asked(q, "The state is unchanged.")), still_open(q));
        // A reply that only asks back, or speaks of something else, leaves
        // it open; one that offers more after its answer does not.
        let q = "Is the Zanzibar export still nightly?";
        assert_eq!(
            open(&asked(q, "Which Zanzibar export do you mean?")),
            still_open(q)
        );
        assert_eq!(open(&asked(q, "The config has an unknown field.")), still_open(q));
        assert!(open(&asked(q, "Yes, it runs nightly. Want me to move it?")).is_empty());
        // What a turn that makes a call says is no reply: the reply comes
        // after the call.
        let before = "Let me check the Zanzibar export.";
        assert_eq!(
            open(&asked_with(q, before, "The config has an unknown field.")),
            still_open(q)
        );
        assert!(open(&asked_with(q, "Let me look.", "Yes, it runs nightly.")).is_empty());
        // Words joined by a slash are no name.
        let q = "Should the Zanzibar job read and/or write?";
        assert_eq!(open(&asked(q, "That is and/or logic.")), still_open(q));
        // A later answer that is not its reply needs three in five words.
        let q = "Is the Zanzibar export still nightly?";
        let mut late = asked(q, "The config has an unknown field.");
        late.push(Message::assistant("The export is fine."));
        assert_eq!(open(&late), still_open(q));
        late.push(Message::assistant("Zanzibar still runs nightly."));
        assert!(open(&late).is_empty());
    }

    #[test]
    fn words_lose_one_ending_and_names_stay_whole() {
        let stems = [
            ("takes", "take"),
            ("take", "take"),
            ("looking", "look"),
            ("looks", "look"),
            ("loaded", "load"),
            ("indexes", "index"),
            ("cache", "cach"),
            ("cached", "cach"),
            ("caches", "cach"),
            ("process", "process"),
            ("processes", "process"),
            ("status", "status"),
            ("statuses", "status"),
            ("uses", "uses"),
            ("being", "being"),
        ];
        for (word, stem_of) in stems {
            assert_eq!(stem(word), stem_of, "{word}");
        }
        let mut words = Vec::new();
        telling(
            "Is db-02.internal:5432 up (from stg-app-07), e.g. at /srv/app? Yes.",
            true,
            |w| {
                words.push(w.to_owned());
                std::ops::ControlFlow::Continue(())
            },
        );
        // A question's stop words are told before the stem (`users` is
        // no `user`).
        assert_eq!(keywords("How many users signed up?"), ["many", "user", "sign"]);
        // Names first; `from` is a stop word, `e.g` too short a name.
        assert_eq!(
            words,
            ["db-02.internal:5432", "stg-app-07", "srv/app", "internal", "5432"]
        );
    }

    /// An identifier that holds a marker's word reports no failure: a
    /// configuration with `statement_timeout_ms` read back, `error_rate`,
    /// `errors_total`; an error code of capitals does.
    #[test]
    fn words_inside_identifiers_are_no_markers() {
        assert!(!is_error("statement_timeout_ms = 5000\nconnect_timeout = \"3s\""));
        assert!(!is_error(
            r#"{"error_rate": 0.01, "timeout_ms": 500, "errors_total": 0}"#
        ));
        assert!(is_error("request timeout after 30s"));
        assert!(is_error("Error: permission denied"));
        assert!(is_error("3 errors found"));
        assert!(is_error("rpc failed: PERMISSION_DENIED"));
        assert!(is_error("net::ERR_CONNECTION_REFUSED"));
        assert!(!is_error("PERMISSION_GRANTED"));
        assert!(decision("We must_not change it.", &Role::Assistant).is_none());
        assert!(decision("OK, lets go with it.", &Role::Assistant).is_some());
    }

    /// A call failed when its result is flagged or opens with an error; a
    /// result that reports one further on (a search's matches, a log) is
    /// shown by that line, but the call ran.
    #[test]
    fn only_a_failed_call_is_said_to_have_failed() {
        let tools = |result: Message| -> String {
            let folded = [
                Message::user("Look into it."),
                Message::assistant_tool_calls(vec![ToolCall::new("c1", "search_logs", "{}")]),
                result,
                Message::assistant("Done."),
            ];
            let summary = summarize(&folded, 1000);
            let line = summary.lines().skip_while(|l| *l != "Tools:").nth(1);
            line.unwrap_or_default().to_owned()
        };
        let matches = "10:00:01 rollout started\n10:00:09 health check /healthz failed, attempt 1/5\n10:00:40 rollout done";
        assert_eq!(
            tools(Message::tool(matches, "c1")),
            "search_logs({}) → 10:00:09 health check /healthz failed, attempt 1/5"
        );
        assert_eq!(
            tools(Message::tool(
                "\n  \nError: index logs-2026 not found\nretry later",
                "c1"
            )),
            "search_logs({}) failed: Error: index logs-2026 not found"
        );
        let mut flagged = Message::tool("the query took too long", "c1");
        flagged
            .extra_mut()
            .insert("is_error".into(), serde_json::Value::Bool(true));
        assert_eq!(tools(flagged), "search_logs({}) failed: the query took too long");
        assert_eq!(
            tools(Message::tool("3 matches, all healthy.", "c1")),
            "search_logs({}) → 3 matches, all healthy."
        );
        // A result that reports an error outranks one that does not (one
        // line fits).
        let folded: Vec<Message> = (0..12)
            .flat_map(|i| {
                let id = format!("c{i}");
                let result = match i {
                    5 => format!("run {i} ok\nrun {i}: connection refused by db-02"),
                    _ => format!("run {i} ok, nothing to report in this part of the log"),
                };
                [
                    Message::assistant_tool_calls(vec![ToolCall::new(&id, "search_logs", "{}")]),
                    Message::tool(result, id),
                ]
            })
            .collect();
        let summary = summarize(&folded, 22);
        assert!(summary.contains("run 5: connection refused"), "{summary}");
    }

    #[test]
    fn the_callers_counter_is_used_when_the_request_carries_one() {
        let folded: Vec<Message> = (0..40)
            .map(|i| Message::user(format!("Message number {i} says something long enough to count.")))
            .collect();
        let words = |t: &str| t.split_whitespace().count();
        let request = SummaryRequest::new(None, &folded, 30).with_counter(Some(&words));
        let summary = Extractive::new().summarize(&request).unwrap();
        assert!(words(&summary) <= 30, "{summary}");
        // Heuristic would allow fewer lines: the caller's counter decided.
        assert!(Heuristic.count(&summary) > 30, "{summary}");
        let own = Extractive::new()
            .summarize(&SummaryRequest::new(None, &folded, 30))
            .unwrap();
        assert!(Heuristic.count(&own) <= 30, "{own}");
        assert_ne!(own, summary);
    }

    #[test]
    fn a_tight_allowance_samples_the_whole_span() {
        let folded: Vec<Message> = (0..300)
            .map(|i| Message::user(format!("We decided item {i} goes in.")))
            .collect();
        let one = |_: &str| 1;
        let request = SummaryRequest::new(None, &folded, 12);
        let summary = Extractive::with_counter(one).summarize(&request).unwrap();
        // One token per line: headings and nine lines.
        let items: Vec<usize> = summary
            .lines()
            .filter_map(|l| l.strip_prefix("user: We decided item "))
            .filter_map(|l| l.split(' ').next()?.parse().ok())
            .collect();
        assert!(items.iter().any(|&i| i < 100), "{summary}");
        assert!(items.iter().any(|&i| (100..200).contains(&i)), "{summary}");
        assert!(items.iter().any(|&i| i >= 200), "{summary}");
        assert!(summary.lines().count() <= 12);
    }

    /// Decisions that differ only in the names in backticks are one line
    /// listing the names, and stay one as the summary rolls forward; a
    /// decision that differs in another word, or in two names, keeps its
    /// own line.
    #[test]
    fn decisions_that_differ_only_in_names_are_one_line() {
        let decide =
            |name: &str| Message::user(format!("Let's use `{name}` for the lowest free descriptor."));
        let mut folded = vec![Message::user("We need descriptors handled safely.")];
        folded.extend(["socket", "open", "openat", "open"].map(decide));
        folded.extend([
            Message::user("Let's use `dup` for the highest free descriptor."),
            Message::user("Let's use `a` and `b` for the lowest free descriptor."),
            Message::user("Let's use `c` and `d` for the lowest free descriptor."),
            Message::assistant("Noted, thanks."),
            Message::user("Bye."),
        ]);
        let summary = summarize(&folded, 2_000);
        let lowest: Vec<&str> = summary.lines().filter(|l| l.contains("lowest")).collect();
        assert!(
            lowest.contains(&"user: Let's use `socket` / `open` / `openat` for the lowest free descriptor."),
            "{summary}"
        );
        assert_eq!(lowest.len(), 3, "{summary}");
        assert!(summary.contains("`dup` for the highest"), "{summary}");
        // Rolled forward, a name more joins the line.
        let more = [
            decide("fcntl"),
            Message::user("That is all of them."),
            Message::assistant("Good."),
            Message::user("Bye again."),
        ];
        let request = SummaryRequest::new(Some(&summary), &more, 2_000);
        let again = Extractive::new().summarize(&request).unwrap();
        assert!(
            again.contains(
                "user: Let's use `socket` / `open` / `openat` / `fcntl` for the lowest free descriptor."
            ),
            "{again}"
        );
        assert_eq!(again.matches("for the lowest").count(), 3, "{again}");
    }

    #[test]
    fn previous_summaries_roll_forward() {
        let folded = [Message::user("new fact, told plainly")];
        // A summary written otherwise: its first line is the start.
        let request = SummaryRequest::new(Some("old fact A\nold fact B"), &folded, 1000);
        let summary = Extractive::new().summarize(&request).unwrap();
        assert_eq!(
            summary,
            "Started with:\nold fact A\nuser: new fact, told plainly\nDiscussed:\nold fact B"
        );
        // One of ours: its start stays the start.
        let request = SummaryRequest::new(Some(&summary), &folded, 1000);
        let again = Extractive::new().summarize(&request).unwrap();
        assert!(again.starts_with("Started with:\nold fact A\n"), "{again}");
        assert_eq!(again.matches("new fact").count(), 1, "{again}");
    }

    #[test]
    fn long_lines_are_clipped_and_empty_turns_skipped() {
        let folded = [Message::user("x".repeat(1000)), Message::assistant("   ")];
        let summary = summarize(&folded, 10_000);
        assert_eq!(
            summary.chars().count(),
            "Started with:\nuser: ".len() + LINE_CHARS + 1
        );
        assert!(summary.ends_with('…'));
    }

    #[test]
    fn turns_without_text_still_give_a_summary() {
        let folded = [Message::assistant(""), Message::user("  ")];
        assert_eq!(summarize(&folded, 100), "2 earlier messages without text.");
        assert_eq!(summarize(&folded, 3), "2 earlier");
    }

    #[test]
    fn tiny_allowances_keep_whole_words() {
        let folded = [Message::user("a long enough sentence here")];
        assert_eq!(summarize(&folded, 0), "a");
        assert_eq!(summarize(&folded, 3), "a long");
        assert_eq!(summarize(&folded, 7), "a long enough sentence here");
    }
}
