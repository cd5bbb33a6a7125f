use super::*;
use crate::message::ToolCall;
use crate::{ClearToolResults, Compactor, FoldPolicy};

fn start(namespace: &str) -> Chain {
    Compactor::new(100).chain_start(namespace)
}

#[test]
fn keys_stay_the_same_however_the_encoding_is_fed() {
    // Keys written by earlier builds (and shared through Redis) must be
    // found again: these are the keys of this history before the
    // encoding was gathered into runs. One text spans several runs,
    // others fill a run in part, and a link falls inside a run. (A new
    // FORMAT or default policy changes them too, as it should: update
    // them then, knowing that earlier caches are left behind.)
    let long: String = (0..6000).map(|i| format!("w{i} ")).collect();
    let parts = Message::user("").with_parts(vec![
        crate::message::Part::text("a part"),
        crate::message::Part::text("é".repeat(9000)),
    ]);
    let messages = vec![
        Message::system("You are terse."),
        Message::user(long.clone()),
        Message::assistant_tool_calls(vec![ToolCall::new("call_1", "lookup", &long[..20_000])]),
        Message::tool("found: 42", "call_1"),
        parts,
        Message::user("done?"),
    ];
    let keys: Vec<(usize, String)> = start("golden")
        .links(&messages, &[0, 1, 2, 3, 5, 6], &[])
        .into_iter()
        .map(|(at, link)| (at, link.key()))
        .collect();
    let expected: Vec<(usize, String)> = GOLDEN_KEYS.iter().map(|&(at, k)| (at, k.to_owned())).collect();
    assert_eq!(keys, expected);
}

const GOLDEN_KEYS: &[(usize, &str)] = &[
    (0, "chatfold:v3:ee48b967fbb5fcd088e84aba8a50a222"),
    (1, "chatfold:v3:41ce820f7e13e994d355635d27409e27"),
    (2, "chatfold:v3:06c9b3fda2d95cf35a55a1cb481081e5"),
    (3, "chatfold:v3:033f031a23fd7180418627fed92b5b92"),
    (5, "chatfold:v3:8530c3cd1753337aa0eaabae8b267d5f"),
    (6, "chatfold:v3:f2491956cb24c6d6cf48a5576a0b9419"),
];

#[test]
fn a_boundary_shift_between_messages_is_another_chain() {
    let s = start("ns");
    let ab_c = s.clone().then(&Message::user("ab")).then(&Message::user("c"));
    let a_bc = s.then(&Message::user("a")).then(&Message::user("bc"));
    assert_ne!(ab_c.key(), a_bc.key());
    assert_ne!(ab_c.check(), a_bc.check());
}

#[test]
fn the_settings_that_change_a_summary_change_the_start() {
    let base = Compactor::new(100);
    let key = |c: &Compactor| c.chain_start("ns").then(&Message::user("x")).key();
    assert_eq!(key(&base), key(&Compactor::new(5_000)), "the budget is not in it");
    assert_eq!(key(&base), key(&base.clone().keep_recent(10)));
    let policy = FoldPolicy::new();
    for other in [
        base.clone().policy(policy.clone().summary_prefix("[Summary]")),
        base.clone().policy(policy.clone().max_summary_tokens(50)),
        base.clone().policy(policy.clone().ledger(false)),
        base.clone()
            .policy(policy.clone().ledger_pattern("ORD#[0-9]+").unwrap()),
        base.clone().clear_tool_results(ClearToolResults::new()),
        base.clone().max_fold_input_tokens(1_000),
    ] {
        assert_ne!(key(&base), key(&other), "{other:?}");
    }
    // The namespace keys the hash: the same messages, another key.
    let other = base.chain_start("ns2").then(&Message::user("x"));
    assert_ne!(key(&base), other.key());
    let secret = blake3::derive_key(KEY_CONTEXT, b"ns2");
    assert!(
        !format!("{other:?}").contains(&hex(&secret)),
        "Debug never shows the key"
    );
}

#[test]
fn chains_tell_messages_and_seeds_apart() {
    let first = start("policy");
    let a = first.then(&Message::user("hello"));
    assert_eq!(a, start("policy").then(&Message::user("hello")));
    assert_ne!(a, first.then(&Message::assistant("hello")));
    assert_ne!(a, first.then(&Message::user("hello ")));
    assert_ne!(a, start("other").then(&Message::user("hello")));
    // Boundaries between fields count: "ab" + "" is not "a" + "b".
    let call = |args: &str| Message::assistant_tool_calls(vec![ToolCall::new("c", "f", args)]);
    assert_ne!(
        first.then(&call("ab")),
        first.then(&call("a")).then(&Message::user("b"))
    );
    // Ids and unknown fields are not part of the canonical form.
    assert_eq!(a, first.then(&Message::user("hello").with_id("m1")));
    // Null content is not the text that looks like it; one part is not its JSON as text.
    let mut null = Message::assistant("");
    null.content = None;
    assert_ne!(first.then(&null), first.then(&Message::assistant("")));
    let part = crate::message::Part::text("x");
    let parts = Message::user("").with_parts(vec![part.clone()]);
    assert_ne!(
        first.then(&parts),
        first.then(&Message::user(part.as_json().to_string()))
    );
}

#[test]
fn links_are_the_prefixes_hashes_in_one_pass() {
    let messages: Vec<Message> = (0..6).map(|i| Message::user(format!("turn {i}"))).collect();
    let wanted = [0, 2, 3, 6, 9];
    let links = start("ns").links(&messages, &wanted, &[]);
    let positions: Vec<usize> = links.iter().map(|&(at, _)| at).collect();
    assert_eq!(positions, [0, 2, 3, 6], "past the end: none");
    for (at, link) in links {
        let mut by_hand = start("ns");
        messages[..at].iter().for_each(|m| by_hand.push(m));
        assert_eq!(link, by_hand.link(), "prefix of {at}");
    }
    assert_ne!(start("ns").link(), start("ns").then(&messages[0]).link());
}

#[test]
fn values_are_checked_on_reading() {
    let chain = start("p").then(&Message::user("x"));
    let value = chain.value(1, "the summary");
    assert_eq!(chain.read(1, &value).as_deref(), Some("the summary"));
    assert_eq!(chain.read(2, &value), None, "another length");
    let other = start("p").then(&Message::user("y"));
    assert_eq!(other.read(1, &value), None, "another second hash");
    assert_eq!(chain.read(1, "not json"), None);
    assert_eq!(
        chain.read(1, &value.replace(&format!("\"v\":{FORMAT}"), "\"v\":9")),
        None
    );
    assert_eq!(chain.read(1, &chain.value(1, "   ")), None, "blank");
}

#[test]
fn the_memory_cache_keeps_to_its_bounds() {
    let cache = MemoryCache::new(100, 40);
    cache.put("k1", "0123456789".into());
    cache.put("k2", "0123456789".into());
    cache.put("k3", "0123456789".into()); // 36 bytes
    cache.put("k4", "0123456789".into()); // k1 goes
    assert_eq!(cache.get("k1"), None);
    assert_eq!(cache.stats().entries, 3);
    assert!(cache.stats().bytes <= 40);
    cache.put("big", "x".repeat(100));
    assert_eq!(cache.get("big"), None, "larger than the whole cache");
    cache.put("k2", "short".into());
    assert_eq!(cache.get("k2").as_deref(), Some("short"));
    assert_eq!(cache.stats().bytes, 12 + 12 + 7);
}
