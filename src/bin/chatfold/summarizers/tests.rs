//! The key rules, as pure functions: nothing here touches the network.

use super::*;

fn host(url: &str) -> Option<String> {
    url_host(url).map(|(_, host)| host)
}

#[test]
fn url_host_reads_the_host_after_any_userinfo() {
    let cases = [
        ("https://api.openai.com/v1", Some("api.openai.com")),
        ("http://localhost:11434/v1", Some("localhost")),
        ("https://API.OpenAI.COM/v1", Some("api.openai.com")),
        ("https://api.openai.com./v1", Some("api.openai.com")),
        ("https://api.openai.com:443/v1", Some("api.openai.com")),
        ("https://api.openai.com:/v1", Some("api.openai.com")),
        ("https://api.openai.com?x=1", Some("api.openai.com")),
        ("https://api.openai.com#frag", Some("api.openai.com")),
        ("https://api.openai.com@evil.invalid/v1", Some("evil.invalid")),
        ("https://user:pw@api.openai.com/v1", Some("api.openai.com")),
        ("https://evil.invalid/?@api.openai.com", Some("evil.invalid")),
        ("https://evil.invalid/@api.openai.com", Some("evil.invalid")),
        (
            "https://openai.com.evil.invalid/v1",
            Some("openai.com.evil.invalid"),
        ),
        ("http://[::1]:8080/v1", Some("::1")),
        ("http://[FD00::1]/v1", Some("fd00::1")),
        ("http://127.0.0.1:1/v1", Some("127.0.0.1")),
        ("http://my_llm:8000/v1", Some("my_llm")),
    ];
    for (url, expected) in cases {
        assert_eq!(host(url).as_deref(), expected, "{url}");
    }
    assert_eq!(url_host("http://x.invalid").map(|(s, _)| s), Some("http"));
}

#[test]
fn url_host_refuses_what_a_parser_might_read_another_way() {
    for url in [
        "api.openai.com/v1",
        "//api.openai.com/v1",
        "ftp://api.openai.com/v1",
        "HTTPS://api.openai.com/v1",
        "https:api.openai.com",
        "https://",
        "https:///v1",
        "https://:443/v1",
        "https://user@/v1",
        // Parsers differ on which @ ends the userinfo.
        "https://a@b@evil.invalid/v1",
        "https://api.openai.com@evil.invalid@api.openai.com/v1",
        "https://evil.invalid\\@api.openai.com/v1",
        "https://api.openai.com\\.evil.invalid/v1",
        "https://api.open\tai.com/v1",
        "https://api.openai.com .evil.invalid/v1",
        "https://api%2eopenai.com/v1",
        "https://api.openai.com:evil/v1",
        "https://api.openai.com:443:1/v1",
        "https://[::1/v1",
        "https://[not-an-ip]/v1",
        "https://[::1]evil/v1",
        "https://[::1]:x/v1",
        "https://.openai.com/v1",
    ] {
        assert_eq!(url_host(url), None, "{url}");
    }
}

#[test]
fn own_hosts_are_the_domain_and_its_subdomains() {
    for host in ["openai.com", "api.openai.com", "eu.api.openai.com"] {
        assert!(is_own_host(host, "openai.com"), "{host}");
    }
    for host in [
        "openai.com.evil.invalid",
        "evilopenai.com",
        "openai.co",
        "openai.com-evil.invalid",
        "penai.com",
        "com",
        "",
        ".openai.com",
        "anthropic.com",
    ] {
        assert!(!is_own_host(host, "openai.com"), "{host}");
    }
    assert_eq!(default_provider("api.anthropic.com"), Provider::Anthropic);
    assert_eq!(default_provider("anthropic.com"), Provider::Anthropic);
    assert_eq!(default_provider("anthropic.com.evil.invalid"), Provider::Openai);
    assert_eq!(default_provider("api.openai.com"), Provider::Openai);
}

#[test]
fn local_hosts_are_this_machine_and_private_networks() {
    for host in [
        "localhost",
        "llm.localhost",
        "gpu-box.local",
        "127.0.0.1",
        "127.8.9.10",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.20",
        "0.0.0.0",
        "::1",
        "::",
        "fd12:3456::1",
        "fc00::1",
    ] {
        assert!(is_local(host), "{host}");
    }
    for host in [
        "api.openai.com",
        "localhost.evil.invalid",
        "local",
        "evil.invalid",
        "8.8.8.8",
        "172.32.0.1",
        "11.0.0.1",
        "192.169.0.1",
        "2001:db8::1",
        "fe80::1",
        "0x7f.1",
        "localhostx",
    ] {
        assert!(!is_local(host), "{host}");
    }
    // Hosts come lowercased from `url_host`.
    let (_, host) = url_host("http://LOCALHOST:8080/v1").unwrap();
    assert!(is_local(&host));
}

/// `api_key` for `url`, with the environment `vars`.
fn key(
    url: &str,
    provider: Option<Provider>,
    named: Option<&str>,
    vars: &[(&str, &str)],
) -> Result<Option<String>, String> {
    let (scheme, host) = url_host(url).unwrap();
    let provider = provider.unwrap_or_else(|| default_provider(&host));
    let env = |var: &str| vars.iter().find(|(k, _)| *k == var).map(|(_, v)| (*v).to_owned());
    api_key(scheme, &host, provider, named, env).map_err(|f| {
        assert_eq!(f.code, exit::USAGE);
        f.message
    })
}

#[test]
fn the_default_key_goes_only_to_its_own_domain_and_local_servers() {
    let openai = [("OPENAI_API_KEY", "sk-1")];
    let anthropic = [("ANTHROPIC_API_KEY", "ak-1")];
    let sent = |k: &str| Ok(Some(k.to_owned()));
    assert_eq!(
        key("https://api.openai.com/v1", None, None, &openai),
        sent("sk-1")
    );
    assert_eq!(
        key("https://API.OPENAI.COM/v1", None, None, &openai),
        sent("sk-1")
    );
    assert_eq!(
        key("https://api.anthropic.com/v1", None, None, &anthropic),
        sent("ak-1")
    );
    assert_eq!(
        key("http://localhost:11434/v1", None, None, &openai),
        sent("sk-1")
    );
    assert_eq!(key("http://localhost:11434/v1", None, None, &[]), Ok(None));
    assert_eq!(key("http://192.168.1.5/v1", None, None, &[]), Ok(None));
    // Each provider's key stays with its own provider.
    assert!(key("https://api.anthropic.com/v1", None, None, &openai).is_err());
    let err = key(
        "https://api.openai.com/v1",
        Some(Provider::Anthropic),
        None,
        &anthropic,
    )
    .unwrap_err();
    assert!(
        err.contains("ANTHROPIC_API_KEY is only sent to anthropic.com"),
        "{err}"
    );
    // Look-alikes, userinfo and third parties get nothing.
    for url in [
        "https://openai.com.evil.invalid/v1",
        "https://api.openai.com@evil.invalid/v1",
        "https://evilopenai.com/v1",
        "https://openrouter.invalid/api/v1",
        "https://[2001:db8::1]/v1",
    ] {
        let err = key(url, None, None, &openai).unwrap_err();
        assert!(
            err.contains("name the variable that holds its API key with --api-key-env"),
            "{url}: {err}"
        );
        assert!(!err.contains("sk-1"), "{err}");
    }
}

#[test]
fn the_own_domain_needs_its_key() {
    for vars in [&[][..], &[("OPENAI_API_KEY", "  ")][..]] {
        assert_eq!(
            key("https://api.openai.com/v1", None, None, vars),
            Err("https://api.openai.com needs an API key: set OPENAI_API_KEY, or name the variable that holds it with --api-key-env".to_owned())
        );
    }
    let err = key("https://api.anthropic.com/v1", None, None, &[]).unwrap_err();
    assert!(
        err.starts_with("https://api.anthropic.com needs an API key: set ANTHROPIC_API_KEY"),
        "{err}"
    );
}

#[test]
fn a_named_variable_goes_anywhere() {
    let vars = [("MY_KEY", " k-2 "), ("EMPTY", ""), ("OPENAI_API_KEY", "sk-1")];
    assert_eq!(
        key("https://llm.invalid/v1", None, Some("MY_KEY"), &vars),
        Ok(Some("k-2".to_owned()))
    );
    assert_eq!(
        key("https://api.openai.com/v1", None, Some("EMPTY"), &vars),
        Ok(None)
    );
    assert_eq!(
        key("http://localhost:1/v1", None, Some("UNSET"), &vars),
        Err("--api-key-env: UNSET is not set".to_owned())
    );
}
