//! The budget recipe (`Compactor::aim`) over the case table the Python and
//! Node bindings' tests run too (`tests/fixtures/recipe_cases.json`), so
//! that every language decides alike; and its rules as properties.

use chatfold::{Compactor, Error, FoldPolicy, Measure, Message, Recipe};
use proptest::prelude::*;
use serde_json::{Value, json};

fn measure(v: &Value) -> Measure {
    let (kind, n) = (v[0].as_str().unwrap(), &v[1]);
    match kind {
        "tokens" => Measure::Tokens(n.as_u64().unwrap() as usize),
        "messages" => Measure::Messages(n.as_u64().unwrap() as usize),
        "fraction" => Measure::Fraction(n.as_f64().unwrap()),
        other => panic!("unknown measure {other}"),
    }
}

/// What the recipe decides for one case of the table, as the table says it.
fn decide(case: &Value) -> Value {
    let mut recipe = Recipe::new(measure(&case["keep"]));
    for t in case["triggers"].as_array().unwrap() {
        recipe = recipe.trigger(measure(t));
    }
    if let Some(w) = case["window"].as_u64() {
        recipe = recipe.window(w as usize);
    }
    if let Some(m) = case["max_summary_tokens"].as_u64() {
        recipe = recipe.max_summary_tokens(m as usize);
    }
    let mut compactor = Compactor::new(1);
    if let Some(s) = case.get("summary") {
        let policy = FoldPolicy::new()
            .summary_role(s["role"].as_str().unwrap().to_owned())
            .summary_prefix(s["prefix"].as_str().unwrap().to_owned());
        compactor = compactor.policy(policy);
    }
    let messages: Vec<Message> = serde_json::from_value(case["messages"].clone()).unwrap();
    let measured = (
        case["measured"][0].as_u64().unwrap() as usize,
        case["measured"][1].as_u64().unwrap() as usize,
    );
    match compactor.aim(&recipe, &messages, measured) {
        Ok(mut aim) => {
            let first = json!({"limit": aim.limit, "budget": aim.budget, "keep_recent": aim.keep_recent});
            let next: Vec<Value> = (case["next"].as_array().unwrap().iter())
                .map(|m| json!(aim.next(m.as_u64().unwrap() as usize)))
                .collect();
            json!({"first": first, "next": next})
        }
        Err(Error::InvalidConfig(_)) => json!({"error": "InvalidConfig"}),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_shared_cases_decide_as_the_table_says() {
    let table: Value = serde_json::from_str(include_str!("fixtures/recipe_cases.json")).unwrap();
    for case in table.as_array().unwrap() {
        let got = decide(case);
        assert_eq!(got, case["expect"], "{}: got {got}", case["name"]);
    }
}

fn history(n: usize, words: usize) -> Vec<Message> {
    (0..n)
        .map(|i| match i % 2 {
            0 => Message::user(format!("{i} {}", "word ".repeat(words))),
            _ => Message::assistant(format!("{i} {}", "reply ".repeat(words))),
        })
        .collect()
}

proptest! {
    /// The first budget, scaled into the compactor's units, is under the
    /// caller's limit when the caller counts as the compactor does; each
    /// next budget is smaller, `keep_recent` never passes the budget, and
    /// at most `Recipe::TRIES` compactions run.
    #[test]
    fn budgets_shrink_and_keep_stays_within_them(
        n in 1usize..80,
        words in 1usize..30,
        limit in 1usize..5000,
        keep in 0usize..40,
        fixed in 0usize..300,
        over in prop::collection::vec(0usize..400, 0..6),
    ) {
        let compactor = Compactor::new(1);
        let h = history(n, words);
        let whole = chatfold::TokenCounter::count_messages(&compactor.counter, &h);
        let recipe = Recipe::new(Measure::Messages(keep)).trigger(Measure::Tokens(limit));
        let mut aim = compactor.aim(&recipe, &h, (whole + fixed, fixed)).unwrap();
        prop_assert!(aim.budget >= 1 && aim.keep_recent <= aim.budget);
        prop_assert!(aim.budget + fixed < limit.max(fixed + 2), "{} + {fixed} vs {limit}", aim.budget);
        let mut runs = 1;
        for extra in over {
            let before = aim.budget;
            match aim.next(limit + extra) {
                Some(b) => {
                    runs += 1;
                    prop_assert!(b < before && b >= 1 && aim.keep_recent <= b);
                }
                None => break,
            }
        }
        prop_assert!(runs <= Recipe::TRIES);
    }
}
