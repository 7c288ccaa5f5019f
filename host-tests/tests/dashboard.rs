//! The admin dashboard (`GET /`) in a real headless browser (issue 16): three `axle
//! serve` providers register in a private etcd, `axle demo --registry` finds them (beside
//! its own three) and calls them, and chromium shows the demo's admin page. The page
//! must list the providers' endpoints, show their calls growing as it polls, turn a
//! killed provider's row dead with the health event listed, and swap a plugin through
//! its form with the admin token typed in (refusing a wrong one).
//!
//! Skipped (saying so) without etcd or without chromium and chromedriver, unless `CI` is
//! set: then it fails.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use axle_host_tests::axle_bin;
use axle_host_tests::etcd::{wait_until, Etcd, Provider};
use axle_host_tests::http::AxleProcess;
use axle_host_tests::webdriver::Browser;
use serde_json::Value;

/// How long a state may take to show (plugins compile, the page polls once a second).
const WAIT: Duration = Duration::from_secs(45);

/// The demo's admin token.
const TOKEN: &str = "dashboard-test-token";

/// The page's endpoint rows: address → (state, calls).
fn rows(browser: &Browser) -> BTreeMap<String, (String, u64)> {
    let v = browser.execute(
        "return Array.from(document.querySelectorAll('tr.endpoint')).map(r => \
         [r.dataset.endpoint, r.dataset.state, Number(r.dataset.calls)]);",
    );
    let list = v.as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|r| {
            let address = r[0].as_str().unwrap_or_default().to_string();
            let state = r[1].as_str().unwrap_or_default().to_string();
            (address, (state, r[2].as_u64().unwrap_or(0)))
        })
        .collect()
}

/// Fills the swap form as a person would and submits it; what the page then shows.
fn swap(browser: &Browser, slot: &str, plugin: &str, token: &str) -> String {
    let script = format!(
        "const f = document.getElementById('swap-form'); \
         f.slot.value = {slot:?}; f.plugin.value = {plugin:?}; f.token.value = {token:?}; \
         document.getElementById('swap-result').textContent = ''; \
         f.requestSubmit(); return true;"
    );
    browser.execute(&script);
    let result = || {
        let v = browser.execute("return document.getElementById('swap-result').textContent;");
        v.as_str().unwrap_or_default().to_string()
    };
    let done = wait_until(WAIT, || {
        let r = result();
        !r.is_empty() && r != "swapping…"
    });
    assert!(done.is_some(), "the swap's answer shows: {:?}", result());
    result()
}

/// The text of the page's event list.
fn events(browser: &Browser) -> String {
    let v = browser.execute("return document.getElementById('events').innerText;");
    v.as_str().unwrap_or_default().to_string()
}

#[test]
fn the_dashboard_shows_endpoints_their_traffic_and_a_killed_provider_turning_dead() {
    const TEST: &str = "dashboard";
    let Some(browser) = Browser::start_or_skip(TEST) else {
        return;
    };
    let Some(etcd) = Etcd::start_or_skip(TEST) else {
        return;
    };
    let registry = etcd.url();
    // A long lease: the killed provider stays listed, so its row stays to turn dead.
    let mut providers: Vec<Provider> = (0..3)
        .map(|_| Provider::start(&registry, &["--lease-ttl-s", "120"]))
        .collect();
    let mut cmd = Command::new(axle_bin());
    cmd.args(["demo", "--registry", &registry, "--admin", "127.0.0.1:0"])
        .args(["--seconds", "600", "--concurrency", "4"])
        .env("AXLE_ADMIN_TOKEN", TOKEN);
    let demo = AxleProcess::spawn(cmd, "axle demo: providers registered");
    let admin = demo
        .line_starting("admin on ", WAIT)
        .expect("the demo's admin line");
    let admin = admin.split_whitespace().next().unwrap().to_string();

    browser.goto(&format!("http://{admin}/"));
    let ours: Vec<String> = providers.iter().map(|p| p.addr.clone()).collect();
    let shown = wait_until(WAIT, || {
        let r = rows(&browser);
        ours.iter().all(|a| r.contains_key(a))
    });
    assert!(
        shown.is_some(),
        "rows for {ours:?} within {WAIT:?}; the page shows {:?}",
        rows(&browser)
    );

    // The counts grow as the page polls.
    let first = rows(&browser);
    let grew = wait_until(WAIT, || {
        let now = rows(&browser);
        ours.iter().all(|a| now[a].1 > first[a].1)
    });
    assert!(
        grew.is_some(),
        "calls of {ours:?} grow: first {first:?}, now {:?}",
        rows(&browser)
    );
    for a in &ours {
        assert_ne!(first[a].0, "dead", "{a} is reachable: {first:?}");
    }

    // A provider killed outright: its row turns dead, and the event is listed.
    let victim = ours[0].clone();
    providers[0].kill9();
    let dead = wait_until(WAIT, || {
        rows(&browser)
            .get(&victim)
            .is_some_and(|(state, _)| state == "dead")
    });
    assert!(
        dead.is_some(),
        "{victim} dead within {WAIT:?}; the page shows {:?}",
        rows(&browser)
    );
    let listed = wait_until(WAIT, || {
        let text = events(&browser);
        text.contains(&victim) && text.contains("unreachable")
    });
    assert!(listed.is_some(), "the event list: {}", events(&browser));
    let others = rows(&browser);
    for a in &ours[1..] {
        assert_ne!(others[a].0, "dead", "{a} is still reachable: {others:?}");
    }
    let status: Value = browser.execute("return document.getElementById('status').textContent;");
    assert!(
        status.as_str().is_some_and(|s| s.starts_with("live")),
        "the page reads the admin endpoint: {status}"
    );

    // The swap form: shown (a token is configured), a wrong token refused, the right one
    // swaps.
    let hidden = browser.execute("return document.getElementById('swap').hidden;");
    assert_eq!(hidden, Value::Bool(false), "the swap control is shown");
    let refused = swap(&browser, "selector", "least-active", "not-the-token");
    assert!(refused.starts_with("HTTP 403"), "{refused}");
    let swapped = swap(&browser, "selector", "least-active", TOKEN);
    assert!(
        !swapped.starts_with("HTTP") && swapped.contains("least-active"),
        "{swapped}"
    );
    drop(browser);
    drop(demo);
}
