//! The rule table's rows and the shapes, each with its examples; and the
//! properties every identifier has, wherever it stands.

use proptest::prelude::*;

use super::rules::RULES;
use super::*;
use crate::message::Message;

fn ids(text: &str) -> Vec<String> {
    identifiers(text, &[]).into_iter().map(String::from).collect()
}

#[test]
fn every_row_compiles() {
    for rule in RULES {
        let source = format!("(?-u)^(?:{})$", rule.pattern);
        let compiled = regex::bytes::Regex::new(&source);
        assert!(compiled.is_ok(), "{}: {:?}", rule.name, compiled.err());
    }
    assert!(rules::table().is_some());
}

/// A row's trigger bytes are in every text its pattern matches: its
/// examples and near misses, and each of them in a sentence.
#[test]
fn every_row_triggers_on_what_it_matches() {
    for rule in RULES {
        let pattern = regex::bytes::Regex::new(&format!("(?-u){}", rule.pattern)).unwrap();
        for sample in rule.examples.iter().chain(rule.near_misses) {
            for text in [sample.to_string(), format!("We saw {sample} today.")] {
                if let Some(m) = pattern.find(text.as_bytes()) {
                    assert!(
                        rule.triggers.met(rules::kinds(m.as_bytes())),
                        "{}: {:?}",
                        rule.name,
                        m.as_bytes()
                    );
                }
            }
        }
    }
}

/// Every row's examples are found whole in a sentence, followed by
/// punctuation; its near misses are never entries.
#[test]
fn every_row_finds_its_examples_and_none_of_its_near_misses() {
    for rule in RULES {
        for example in rule.examples {
            for text in [format!("We saw {example} today."), format!("({example}), then")] {
                assert!(
                    ids(&text).iter().any(|e| e == example),
                    "{}: {example:?} in {text:?}: {:?}",
                    rule.name,
                    ids(&text)
                );
            }
        }
        for miss in rule.near_misses {
            let text = format!("We saw {miss} today.");
            assert!(
                !ids(&text).iter().any(|e| e == miss),
                "{}: {miss:?} is no entry: {:?}",
                rule.name,
                ids(&text)
            );
        }
    }
}

/// Shapes no row names, found whole: the kinds a list of kinds would miss.
const SHAPES: &[&str] = &[
    "#482913",
    "validatePaymentBatch()",
    "com.acme.billing.InvoiceService",
    "PAYMENT_API_TIMEOUT",
    "search_store.rs:537",
    "@acme/search-kit@8.17.17",
    "feature/OPS-167-search-fix",
    "RE-2024/33351",
    "/subscriptions/3f2504e0-4f89-11d3-9a0c-0305e82c3301/resourceGroups/rg-prod/providers/Microsoft.Compute/virtualMachines/vm-web-01",
    "978-0-306-40615-7",
    "7732-18-5",
    "arXiv:2301.04567",
    "1:23-cv-04567",
    "eyJpZCI6IjEyMyIsInRzIjoxNzAwMDAwMDAwfQ",
    "dXNlcjoxMjM0NTY3ODkw==",
    "004417820193",
    "i-0abc123def4567890",
    "ghcr.io/acme/api:1.4.2",
    "python:3.11-slim",
    "4f9c2a1",
    "std::collections::HashMap",
    "America/Los_Angeles",
    "session:user:48213",
    "C:\\deploy\\app\\config.yaml",
    "~/src/chatfold",
    ".github/workflows/ci.yml",
];

/// Prose that looks like an identifier and is not one.
const LOOK_ALIKES: &[&str] = &[
    "COVID-19",
    "GPT-4",
    "Win64",
    "x86_64",
    "UTF-8",
    "SHA-256",
    "MP3",
    "24/7",
    "1,000,000",
    "2024",
    "10:30",
    "09:00-18:00",
    "100ms",
    "64-bit",
    "e.g.",
    "and/or",
    "Mozilla/5",
    "HTTP/2",
    "follow-up",
    "state-of-the-art",
    "iPhone",
    "JavaScript",
    "3.5",
    "50%",
    "1500000",
];

#[test]
fn shapes_are_found_whole_and_look_alikes_are_not_entries() {
    for shape in SHAPES {
        let text = format!("Please check {shape}, it failed.");
        assert!(
            ids(&text).iter().any(|e| e == shape),
            "{shape:?}: {:?}",
            ids(&text)
        );
    }
    for look_alike in LOOK_ALIKES {
        let text = format!("Since {look_alike} we moved on.");
        assert!(ids(&text).is_empty(), "{look_alike:?}: {:?}", ids(&text));
    }
}

#[test]
fn a_token_ends_where_the_script_changes() {
    // Glued to Thai, Arabic, Hebrew, Devanagari, Cyrillic or CJK text on
    // either side, an identifier is read whole and alone.
    for (before, after) in [
        ("รหัสคำสั่งซื้อ", "ครับ"),
        ("رقم الطلب", "من فضلك"),
        ("הזמנה", "בבקשה"),
        ("ऑर्डर", "है"),
        ("заказ", "готов"),
        ("订单", "已发货"),
    ] {
        for text in [
            format!("{before}ORD-88213-QX{after}"),
            format!("{before} ORD-88213-QX {after}"),
        ] {
            assert_eq!(ids(&text), ["ORD-88213-QX"], "{text}");
        }
        let path = format!("{before}/srv/app/config.toml{after}");
        assert_eq!(ids(&path), ["/srv/app/config.toml"], "{path}");
    }
    // Latin letters with accents stay inside a token.
    assert_eq!(ids("see /données/été-2024.csv now"), ["/données/été-2024.csv"]);
}

#[test]
fn a_fragment_in_the_previous_prose_of_a_listed_entry_is_no_entry() {
    // A summarizer that cut a sentence at a version's first dot.
    let prose = "The user pinned urllib3==3. Then nothing else.";
    let listed = [Carried::new("urllib3==3.6.4", Tier::User)];
    let turn = Message::user("Check /srv/app/config.toml next.");
    for remember in [false, true] {
        let found = candidates(std::iter::once(&turn), prose, &listed, &[], 64, 1 << 16, remember);
        let texts: Vec<&str> = found.texts.iter().map(|t| &**t).collect();
        assert_eq!(
            texts,
            ["/srv/app/config.toml", "urllib3==3.6.4"],
            "remember: {remember}"
        );
        assert_eq!(found.tiers(), [Tier::User, Tier::User]);
    }
}

#[test]
fn context_raises_a_weak_shape() {
    assert!(ids("We booked QXPLMA for them.").is_empty());
    for text in [
        "Use `QXPLMA` for the booking.",
        "Booking ref: QXPLMA, confirmed.",
        "ticket # QXPLMA confirmed",
        "| ref | QXPLMA |",
        "The code is „QXPLMA“ on the form.",
    ] {
        assert!(
            ids(text).iter().any(|e| e == "QXPLMA"),
            "{text:?}: {:?}",
            ids(text)
        );
    }
}

#[test]
fn code_groups_after_a_label_are_one_entry() {
    for (text, entry) in [
        ("Postcode: 1012 AB, for the delivery.", "1012 AB"),
        ("My car plate: 123가 4567 is registered.", "123가 4567"),
        ("차량번호: 34나 5678 입니다.", "34나 5678"),
        ("Flight #: BA 2490 leaves at noon.", "BA 2490"),
        ("Ship to postcode: 1012 AB", "1012 AB"),
        // A prose label.
        ("My postcode is 3511 LX in Utrecht.", "3511 LX"),
        ("The flight was BA 2490, delayed.", "BA 2490"),
        ("our plate is 12가 3456 now", "12가 3456"),
        // Quotes, backticks and brackets hold one thing.
        ("Please check `3511 AB` first.", "3511 AB"),
        ("The reference is „1012 CD“ on the form.", "1012 CD"),
        ("Der Vorgang «4567 EF» ist offen.", "4567 EF"),
        ("確認番号は「34나 5678」です。", "34나 5678"),
        ("It failed again (123가 4567).", "123가 4567"),
        // An identifier by its shape takes the groups beside it.
        ("The parcel 4471823 AB arrived late.", "4471823 AB"),
        ("请检查GXRU 694131 6的状态。", "GXRU 694131 6"),
    ] {
        let found = ids(text);
        assert!(found.iter().any(|e| e == entry), "{text:?}: {found:?}");
        // (Not its groups as well.)
        assert!(
            !found.iter().any(|e| e != entry && entry.contains(e.as_str())),
            "{text:?}: {found:?}"
        );
    }
    // An amount is the money row's, read whole.
    assert_eq!(ids("Total: 500 EUR, paid."), ["500 EUR"]);
    // A label is no group of the code after it.
    assert_eq!(ids("Order ID 99812345 shipped."), ["99812345"]);
    // Not a time, a date, a quantity, a single group, groups without a
    // label, or a quote that holds more than the groups.
    for text in [
        "Start: 10 AM sharp.",
        "Date: 12 May 2024.",
        "Moved in 12월 2024 to Seoul.",
        "It happened in 1066 AD, they say.",
        "It is 1066 AD, they say.",
        "Disk: 300 GB free.",
        "The meeting is at 1030 UTC sharp.",
        "We saw 3511 LX in the alert.",
        "Rooms: 4 B and 5 C.",
    ] {
        let found = ids(text);
        assert!(!found.iter().any(|e| e.contains(' ')), "{text:?}: {found:?}");
    }
}

#[test]
fn a_user_agent_and_a_secret_give_no_entry() {
    let ua = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.129 Safari/537.36";
    assert!(ids(&format!("The UA was {ua} again.")).is_empty());
    assert!(ids("key sk-proj-abcdefghijklmnop1234 and ghp_abcdefghijklmnopqrstu1234").is_empty());
    assert!(ids("call_abcdefghij1234567890 and toolu_01ABCDEFGHIJKLMNOP").is_empty());
}

#[test]
fn json_keys_name_their_values_in_both_formats() {
    let openai = Message::assistant_tool_calls(vec![crate::ToolCall::new(
        "call_1",
        "book",
        r#"{"booking_ref": "QXPLMA", "note": "plain words"}"#,
    )]);
    let block = serde_json::json!({"type": "tool_use", "id": "toolu_1", "name": "book", "input": {"booking_ref": "QXPLMA"}});
    let anthropic = Message::assistant("").with_parts(vec![crate::Part::from_json(block)]);
    for message in [openai, anthropic] {
        let found = candidates(std::iter::once(&message), "", &[], &[], 64, 1 << 16, false);
        assert!(
            found.texts.iter().any(|e| e == "booking_ref: QXPLMA"),
            "{:?}",
            found.texts
        );
        assert!(
            !found
                .texts
                .iter()
                .any(|e| e.contains("call_1") || e.contains("toolu_1"))
        );
    }
}

#[test]
fn sections_render_and_split_back() {
    let body = render(
        "Prose.",
        &["a-1234", "b: c_9", "d-77"],
        &[Tier::User, Tier::User, Tier::Tool],
    );
    assert_eq!(
        body,
        "Prose.\n\nExact identifiers (kept verbatim):\nGiven by the user:\n- a-1234\n- b: c_9\nFrom tool results:\n- d-77"
    );
    assert_eq!(
        split(&body),
        (
            "Prose.",
            vec![
                ("a-1234", Tier::User),
                ("b: c_9", Tier::User),
                ("d-77", Tier::Tool)
            ]
        )
    );
    // A section with no tiers' headings (an earlier version's): named again.
    let old = "Prose.\n\nExact identifiers (kept verbatim):\n- a-1234";
    assert_eq!(split(old), ("Prose.", vec![("a-1234", Tier::Repeated)]));
    assert_eq!(split("Only prose."), ("Only prose.", vec![]));
}

/// The places an identifier is written in.
fn placed(id: &str, how: usize) -> Message {
    let json = serde_json::to_string(&serde_json::json!({"value": id, "state": "open"})).unwrap_or_default();
    match how {
        0 => Message::user(format!("We saw {id} in the alert.")),
        1 => Message::user(format!("Please check `{id}` now.")),
        2 => Message::assistant(format!("Logs:\n```\nfailed on {id}\n```")),
        3 => Message::user(format!("| field | value |\n|---|---|\n| ref | {id} |")),
        4 => Message::user(format!("请检查{id}的状态。")),
        5 => Message::user(format!("Der Vorgang „{id}“ ist offen.")),
        6 => Message::user(format!("It failed ({id}).")),
        7 => Message::tool(json, "call_x1"),
        _ => Message::assistant_tool_calls(vec![crate::ToolCall::new("call_x2", "look", json)]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any generated identifier, in any place, is found whole; no entry is
    /// a tool call's id, nor a part of another entry.
    #[test]
    fn identifiers_are_found_whole_wherever_they_stand(
        id in crate::testing::identifier(),
        other in crate::testing::identifier(),
        how in 0usize..9,
    ) {
        let messages = [placed(&id, how), placed(&other, (how + 4) % 9)];
        let found = candidates(messages.iter(), "", &[], &[], 256, 1 << 16, false);
        let values: Vec<&str> = found.texts.iter().map(|e| value_of(e)).collect();
        prop_assert!(values.contains(&id.as_str()), "{id:?} placed {how}: {values:?}");
        for (i, v) in values.iter().enumerate() {
            prop_assert!(!v.starts_with("call_x"), "a call id: {v:?}");
            for (j, w) in values.iter().enumerate() {
                prop_assert!(i == j || !w.contains(v), "{v:?} is part of {w:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any text, of any script and mark, is read without a panic, and
    /// every entry found stands in it as it is listed.
    #[test]
    fn any_text_is_read_and_its_entries_stand_in_it(
        parts in proptest::collection::vec(
            prop_oneof![
                "\\PC{0,12}",
                "[a-zA-Z0-9_./:#@$|`(),;-]{1,16}",
                "[ \n\t]{1,3}",
                "[„“«»「」。，请检查订单]{1,3}",
                // Runs of code groups, opened, closed or stated.
                "(is |: |[`(\\[„“«「])?[A-Z0-9가나]{1,5}( [A-Z0-9]{1,4}){0,3}[`)\\]“”»」]?",
                crate::testing::identifier(),
            ],
            0..12,
        )
    ) {
        let text: String = parts.concat();
        // (A text that is one JSON value is read as its strings say, not
        // as written.)
        let json = serde_json::from_str::<serde_json::Value>(&text).is_ok();
        for entry in identifiers(&text, &[]) {
            prop_assert!(json || text.contains(entry.as_str()), "{entry:?} is not in {text:?}");
        }
    }
}

proptest! {
    /// `holds` answers as a search of the whole text does.
    #[test]
    fn holds_is_a_substring_search(haystack in "[ab./]{0,40}", needle in "[ab./]{0,6}") {
        prop_assert_eq!(holds(haystack.as_bytes(), needle.as_bytes()), haystack.contains(&needle));
    }
}

#[test]
fn variants_addresses_and_coordinates_are_read_whole() {
    for (text, id) in [
        (
            "The variant is NM_000546.6:c.215C>G in TP53.",
            "NM_000546.6:c.215C>G",
        ),
        ("Meet at ///filled.count.soap tomorrow.", "///filled.count.soap"),
        (
            "The site is at 48.858370, 2.294481 near the river.",
            "48.858370, 2.294481",
        ),
    ] {
        assert_eq!(ids(text), [id], "{text}");
    }
    // A comparison in code is no variant; a pair out of range no place.
    assert!(ids("if count>0 then go; x.y>z").is_empty());
    assert!(!ids("at 98.1234, 10.5678 now").iter().any(|e| e.contains(',')));
}
