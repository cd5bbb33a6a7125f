//! `Tiktoken` counts exactly as tiktoken-rs does (`encode_ordinary`), for
//! `o200k_base` and `cl100k_base`, on real, generated and adversarial text.
#![cfg(feature = "tiktoken")]

use std::sync::LazyLock;

use chatfold::testing::Histories;
use chatfold::{Message, Tiktoken, TokenCounter};
use proptest::prelude::*;
use tiktoken_rs::CoreBPE;

static O200K: LazyLock<CoreBPE> = LazyLock::new(|| tiktoken_rs::o200k_base().unwrap());
static CL100K: LazyLock<CoreBPE> = LazyLock::new(|| tiktoken_rs::cl100k_base().unwrap());

fn pairs() -> [(Tiktoken, &'static CoreBPE); 2] {
    [
        (Tiktoken::o200k_base().unwrap(), &O200K),
        (Tiktoken::cl100k_base().unwrap(), &CL100K),
    ]
}

/// Fails, naming the encoding and the text, unless every count agrees.
fn check_all<S: AsRef<str>>(texts: &[S]) {
    for (ours, reference) in pairs() {
        for text in texts {
            let text = text.as_ref();
            let expected = reference.encode_ordinary(text).len();
            let got = ours.count(text);
            if got != expected {
                let shown: String = text.chars().take(200).collect();
                panic!(
                    "{}: {got} tokens, tiktoken-rs {expected}, for a text of {} bytes: {shown:?}",
                    ours.name(),
                    text.len()
                );
            }
        }
    }
}

fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

/// Every string of the sample histories, and each file whole.
fn samples() -> Vec<String> {
    let mut texts = Vec::new();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let raw = std::fs::read_to_string(&path).unwrap();
            strings(&serde_json::from_str(&raw).unwrap(), &mut texts);
            texts.push(raw);
        }
    }
    assert!(texts.len() > 20, "the samples were read");
    texts
}

#[test]
fn sample_histories() {
    check_all(&samples());
}

/// Texts meant to catch a pre-split or a merge that is off anywhere.
fn adversarial() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        " ",
        "hello world",
        "Hello, World! HELLO world hello WORLD",
        // contractions, both cases, and look-alikes
        "it's they're we've I'm you'll he'd don't IT'S THEY'RE WE'VE I'M YOU'LL HE'D DON'T",
        "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x 'sx ''s 'Re 'rE",
        "John'S book, O'Neil's, rock'n'roll, 'tis, y'all'd've",
        "it\u{2019}s curly and \u{017f} long s and \u{212a}elvin: '\u{017f} '\u{212a}",
        "ÉCOLE École écolE ÀÉÎõü ß SS ẞ ǅungla ǈ ǋ",
        // scripts
        "Привет, мир! Съешь же ещё этих мягких французских булок",
        "مرحبا بالعالم، هذا نص عربي مع أرقام ١٢٣٤٥٦",
        "नमस्ते दुनिया, यह हिंदी पाठ है। क्षत्रिय ज्ञान",
        "你好，世界！这是中文文本。日本語のテキストとカタカナ、ひらがな。한국어 텍스트",
        "emoji 😀😃😄 👍🏽👍🏿 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️‍🔥 🇺🇸🇯🇵 1️⃣ #️⃣",
        "combining e\u{301} a\u{300}\u{316} n\u{303}\u{303}\u{303} \u{301}\u{302} Z\u{335}\u{321}a\u{336}l\u{337}g\u{338}o",
        "mixed Latinкириллица日本語العربيةहिंदी123abc",
        "\u{feff}bom \u{200b}zero\u{200b}width \u{200d}joiner \u{00a0}nbsp\u{00a0} \u{2028}ls\u{2029}ps",
        "\u{0}\u{1}\u{7f}\u{80}\u{9f} controls \u{fffd} \u{10ffff} \u{e000} private",
        // numbers
        "0 1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890",
        "3.14159 -42 1e10 0x1F 1,000,000 ٣٤٥ ⅷ ½ ² 一二三",
        // code and JSON
        "fn main() {\n    let x: Vec<u8> = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
        "def f(a, b):\n\treturn a // b  # floor\n\nclass A(object):\n    pass\r\n",
        "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}], \"n\": 12345}",
        "<div class=\"a\">&amp;&lt;&gt;</div> https://example.com/a/b?c=d&e=f#g /// //",
        "a/b/c\n/\n//\r\n/x  /\t/",
        // whitespace
        "a\r\nb\r\n\r\nc\n\n\nd\r\r\re",
        "trailing   \nspaces \t\n\ttabs\t\t\tand\t \t mixes  \n  \n",
        "   leading",
        "x  ",
        "x \n",
        "x\n  ",
        "x \t\u{a0}y",
        "a  b   c    d     e",
        "\n \n \n x",
        " \r\n \r\n",
        "\u{b}\u{c}\u{85}vt ff nel \u{3000}ideographic\u{3000}space",
        // punctuation
        "!!! ??? ... --- *** ;;; ::: ,,, !?!? .\n.\r\n!\n\n/",
        "((( ))) [[[ ]]] {{{ }}} <<< >>> ''' \"\"\" ``` ~~~",
        // special-token strings count as ordinary text
        "<|endoftext|> <|fim_prefix|><|fim_middle|><|fim_suffix|> <|endofprompt|> <|im_start|>user",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    for n in 0..=40 {
        texts.push("9".repeat(n));
        texts.push(format!("a{}", " ".repeat(n)));
        texts.push(format!("{}b", " ".repeat(n)));
        texts.push(format!("x{}y", "\n".repeat(n)));
    }
    texts
}

#[test]
fn adversarial_texts() {
    check_all(&adversarial());
}

#[test]
fn long_runs_of_one_character() {
    let lengths = [
        1, 2, 3, 4, 5, 7, 8, 15, 16, 99, 100, 101, 127, 128, 129, 1000, 4097,
    ];
    let mut texts = Vec::new();
    for c in [
        ' ', '\n', '\t', 'a', 'A', '7', '!', '😀', '日', 'é', '\u{301}', '/',
    ] {
        for n in lengths {
            texts.push(c.to_string().repeat(n));
        }
    }
    for c in [' ', '\n', 'a', '7', '!', '😀', '日'] {
        texts.push(c.to_string().repeat(100_000));
    }
    // runs inside text, and runs of a pair
    for n in [2, 100, 10_000] {
        texts.push(format!("word{}word", " ".repeat(n)));
        texts.push(format!("x{}\ny", " ".repeat(n)));
        texts.push("ab".repeat(n));
        texts.push("aB".repeat(n));
        texts.push(" a".repeat(n));
        texts.push("\r\n".repeat(n));
        texts.push("12 ".repeat(n));
    }
    check_all(&texts);
}

#[test]
fn texts_of_several_megabytes() {
    // Built once: every other text here, over and over, to 2 MB.
    let mut parts = samples();
    parts.extend(adversarial());
    let mut big = String::new();
    let mut i = 0;
    while big.len() < 2 << 20 {
        big.push_str(&parts[i % parts.len()]);
        big.push(if i % 3 == 0 { '\n' } else { ' ' });
        i += 1;
    }
    let no_spaces: String = big.split_whitespace().take(50_000).collect();
    check_all(&[big, no_spaces]);
}

#[test]
fn message_counts_follow_the_text_counts() {
    let m = Message::user("it's 2024 <|endoftext|>").with_name("bob");
    for (ours, reference) in pairs() {
        let text = |t: &str| reference.encode_ordinary(t).len();
        assert_eq!(
            ours.count_message(&m),
            3 + text("user") + text("it's 2024 <|endoftext|>") + text("bob") + 1
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn generated_histories(history in Histories::new().long(2000).strategy()) {
        let texts: Vec<&str> = history.iter().flat_map(Message::text_pieces).collect();
        check_all(&texts);
    }

    #[test]
    fn any_text(text in any::<String>()) {
        check_all(&[text]);
    }

    #[test]
    fn text_of_tricky_characters(text in "[ \t\r\n\u{a0}\u{3000}aZé'sSdDlLvVrRmMtT0-9!./\u{301}日😀\u{200d}]{0,60}") {
        check_all(&[text]);
    }
}
