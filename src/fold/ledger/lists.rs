//! The ledger's word lists, as data: each is read by one rule, named where
//! it is used.

/// Words whose value follows as `word: value`, `word #value` or
/// `word No. value` in prose (see `shape::labelled`): a weaker shape after
/// one is enough.
pub(super) const LABELS: &[&str] = &[
    "id",
    "ids",
    "ref",
    "reference",
    "number",
    "no",
    "nr",
    "num",
    "code",
    "key",
    "order",
    "ticket",
    "case",
    "invoice",
    "account",
    "booking",
    "confirmation",
    "tracking",
    "serial",
    "sku",
    "issue",
    "incident",
    "request",
    "transaction",
    "txn",
    "receipt",
    "policy",
    "claim",
    "contract",
    "docket",
    "file",
    "record",
    "customer",
    "user",
    "handle",
    "pnr",
    "locator",
    "voucher",
    "coupon",
    "batch",
    "lot",
    "build",
    "commit",
    "branch",
    "tag",
    "version",
    "release",
    "job",
    "run",
    "trace",
    "span",
    "session",
    "project",
    "tenant",
    "cluster",
    "instance",
    "host",
    "bucket",
    "table",
    "topic",
    "queue",
    "channel",
    "doi",
    "isbn",
    "pmid",
    "arxiv",
    "cas",
    "patent",
    "vin",
    "iban",
    "swift",
    "bic",
    "routing",
    "passport",
    "license",
    "licence",
    "token",
    "nonce",
    "hash",
    "checksum",
    "digest",
    "sha",
    "uuid",
    "guid",
];

/// Function words: a kebab-case run holding one is prose
/// (`state-of-the-art`, `end-to-end`), not a name.
pub(super) const PREFIX_WORDS: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "and", "or", "up", "out", "off", "so", "as",
    "is", "be", "it", "no", "not", "non", "all", "one", "two", "self", "re", "co", "pre", "post", "anti",
    "well", "ill", "day", "time", "way",
];

/// Common words with digits that are not codes (of at most 9 bytes; those
/// whose numbers are bit widths are types, see `shape::is_typed`).
pub(super) const NOT_CODES: &[&str] = &[
    "sha224",
    "sha384",
    "x86_64",
    "x86-64",
    "python2",
    "python3",
    "utf8mb4",
    "oauth2",
    "blake2b",
    "blake3",
    "argon2",
    "argon2id",
    "ed25519",
    "x25519",
    "chacha20",
    "poly1305",
    "secp256k1",
];

/// Standards whose names read as codes with their numbers (`RFC9110`,
/// `ISO-8601`, `SHA3-256`, `AES-256`, `UTF-8`).
pub(super) const STANDARDS: &[&str] = &[
    "UTF", "SHA", "ISO", "MD", "TLS", "SSL", "HTTP", "RFC", "AES", "RSA", "DES", "HMAC", "IEEE", "ECMA",
    "CRC", "ECDSA", "IPV",
];

/// How the keys and tokens of common services begin (OpenAI's and
/// Anthropic's, Stripe's secret and restricted keys, GitHub's, GitLab's,
/// Slack's, Hugging Face's, npm's, PyPI's, Google's API keys, AWS access
/// keys): a token that begins so is never copied into a summary.
pub(super) const SECRETS: &[&str] = &[
    "sk-",
    "sk_",
    "rk_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "hf_",
    "npm_",
    "pypi-",
    "AIza",
    "AKIA",
    "ASIA",
    "whsec_",
];

/// How the APIs' structural ids begin: tool calls (`call_`, `toolu_`,
/// `fc_`), messages, responses and reasoning items. Meaningless to a model
/// once their call is folded, they are never entries.
pub(super) const STRUCTURAL: &[&str] = &[
    "call_",
    "toolu_",
    "toolu-",
    "fc_",
    "msg_",
    "resp_",
    "rs_",
    "chatcmpl-",
];

/// What the names of secrets hold (a JSON key, a URL's query parameter).
pub(super) const SECRET_NAMES: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "credential",
    "signature",
];

/// JSON keys whose string values are identifiers, whole (any other key's
/// value is one when its shape says so, see `json::entries`).
pub(super) const ID_KEYS: &[&str] = &[
    "id",
    "uuid",
    "guid",
    "key",
    "url",
    "uri",
    "path",
    "name",
    "dataset",
    "host",
    "hostname",
    "endpoint",
    "bucket",
    "sha",
    "commit",
    "branch",
    "arn",
    "ref",
    "file",
    "filename",
    "table",
    "database",
    "email",
    "reference",
];

/// Endings of JSON keys whose string values are identifiers
/// (`booking_ref`, `order_number`; `customerId` in camel case).
pub(super) const ID_KEY_ENDINGS: &[&str] = &[
    "_id",
    "_key",
    "_url",
    "_uri",
    "_path",
    "_name",
    "_arn",
    "_hash",
    "_sha",
    "_host",
    "_ref",
    "_number",
    "_no",
    "_code",
    "_reference",
];

/// Camel-case endings of such keys (`customerId`, `bucketARN`).
pub(super) const ID_KEY_CAMEL: &[&str] = &[
    "Id", "Key", "Url", "Uri", "Path", "Name", "Arn", "Hash", "Host", "ID", "URL", "Ref", "Number",
];
