//! `GET /metrics`: a [`StatsReport`] — the same numbers `stats` answers — as Prometheus
//! metrics (`docs/observability.md` lists them). Every label value is a bounded name: a
//! client's or server's name, a service, a declared method or `*`, an endpoint address,
//! a plugin, an error class.

use super::exposition::{seconds, Exposition, Kind};
use crate::StatsReport;
use axle_client::{EndpointView, PolicyView};
use axle_plugin_host::shadow::ShadowView;
use axle_plugin_host::PluginCounters;

const HEALTH_STATES: [&str; 4] = ["healthy", "subhealthy", "removed", "dead"];
const BREAKER_STATES: [&str; 3] = ["closed", "open", "half-open"];

/// The scrape of `report`.
pub fn render(report: &StatsReport) -> String {
    let mut e = Exposition::default();
    declare(&mut e);
    for c in &report.clients {
        for s in &c.services {
            for p in &s.policies {
                policy(&mut e, &c.name, &s.service, p);
            }
            for ep in &s.endpoints {
                endpoint(&mut e, &c.name, &s.service, ep);
            }
        }
        for p in &c.plugins {
            plugin(&mut e, "client", &c.name, p);
        }
        for shadow in c.services.iter().flat_map(|s| &s.shadows) {
            shadows(&mut e, "client", &c.name, shadow);
        }
    }
    for s in &report.servers {
        let v = &s.view;
        let l = [("server", s.name.as_str())];
        e.sample("axle_server_in_flight", &l, v.in_flight as f64);
        e.sample("axle_server_connections", &l, v.connections as f64);
        let refused = v.connections_refused as f64;
        e.sample("axle_server_connections_refused_total", &l, refused);
        let evicted = v.connections_evicted as f64;
        e.sample("axle_server_connections_evicted_total", &l, evicted);
        e.sample("axle_server_malformed_total", &l, v.malformed as f64);
        e.sample(
            "axle_server_refused_closing_total",
            &l,
            v.refused_closing as f64,
        );
        for m in &v.methods {
            let l = [
                ("server", s.name.as_str()),
                ("service", m.service.as_str()),
                ("method", m.method.as_str()),
            ];
            e.sample("axle_server_requests_total", &l, m.requests as f64);
            e.sample("axle_server_handled_total", &l, m.handled as f64);
            e.sample("axle_server_ok_total", &l, m.ok as f64);
            for (class, n) in &m.errors {
                let l = [l[0], l[1], l[2], ("class", class.as_str())];
                e.sample("axle_server_errors_total", &l, *n as f64);
            }
            e.sample("axle_server_method_in_flight", &l, m.in_flight as f64);
            e.histogram("axle_server_handler_seconds", &l, &m.latency_histogram);
            let admitted = m.limiter_admitted as f64;
            e.sample("axle_server_limiter_admitted_total", &l, admitted);
            let rejected = m.limiter_rejected as f64;
            e.sample("axle_server_limiter_rejected_total", &l, rejected);
        }
        for p in &s.plugins {
            plugin(&mut e, "server", &s.name, p);
        }
        for shadow in &s.shadows {
            shadows(&mut e, "server", &s.name, shadow);
        }
    }
    e.finish()
}

fn policy(e: &mut Exposition, client: &str, service: &str, p: &PolicyView) {
    let l = [
        ("client", client),
        ("service", service),
        ("method", p.method.as_str()),
    ];
    let n = &p.counts;
    e.sample("axle_client_calls_total", &l, n.calls as f64);
    e.sample("axle_client_ok_total", &l, n.ok as f64);
    for (class, count) in &n.errors {
        let l = [l[0], l[1], l[2], ("class", class.as_str())];
        e.sample("axle_client_errors_total", &l, *count as f64);
    }
    e.histogram("axle_client_call_seconds", &l, &n.latency_histogram);
    e.sample("axle_client_retries_total", &l, n.retries as f64);
    e.sample("axle_client_failovers_total", &l, n.failovers as f64);
    e.sample("axle_client_hedges_total", &l, n.hedges as f64);
    let refused = n.retry_budget_refused as f64;
    e.sample("axle_client_retry_budget_refused_total", &l, refused);
    e.sample("axle_client_fallbacks_total", &l, n.fallbacks as f64);
    e.sample("axle_client_cache_hits_total", &l, n.cache_hits as f64);
    e.sample("axle_client_cache_misses_total", &l, n.cache_misses as f64);
    for state in BREAKER_STATES {
        let l = [l[0], l[1], l[2], ("state", state)];
        let on = f64::from(u8::from(p.breaker == state));
        e.sample("axle_client_breaker_state", &l, on);
    }
    let opened = p.breaker_opened as f64;
    e.sample("axle_client_breaker_opened_total", &l, opened);
}

fn endpoint(e: &mut Exposition, client: &str, service: &str, ep: &EndpointView) {
    let l = [
        ("client", client),
        ("service", service),
        ("endpoint", ep.address.as_str()),
    ];
    e.sample("axle_client_endpoint_calls_total", &l, ep.calls as f64);
    e.sample("axle_client_endpoint_faults_total", &l, ep.faults as f64);
    e.sample(
        "axle_client_endpoint_in_flight",
        &l,
        f64::from(ep.in_flight),
    );
    for state in HEALTH_STATES {
        let l = [l[0], l[1], l[2], ("state", state)];
        let on = f64::from(u8::from(ep.state == state));
        e.sample("axle_client_endpoint_health", &l, on);
    }
    let rotation = f64::from(u8::from(ep.in_rotation));
    e.sample("axle_client_endpoint_in_rotation", &l, rotation);
    let weight = f64::from(ep.effective_weight);
    e.sample("axle_client_endpoint_effective_weight", &l, weight);
    let ewma = seconds(ep.ewma_latency_ns);
    e.sample("axle_client_endpoint_latency_ewma_seconds", &l, ewma);
    e.sample("axle_client_endpoint_error_rate", &l, ep.error_rate);
}

fn plugin(e: &mut Exposition, side: &str, owner: &str, p: &PluginCounters) {
    let s = &p.stats;
    let l = [
        ("side", side),
        ("owner", owner),
        ("plugin", p.name.as_str()),
    ];
    e.sample("axle_plugin_calls_total", &l, s.calls as f64);
    let causes = [
        ("timeout", s.timeouts),
        ("memory", s.memory),
        ("blocked", s.blocked),
        ("busy", s.busy),
        ("trap", s.traps),
        ("invalid", s.invalid),
        ("unavailable", s.unavailable),
        ("replacing", s.replacing),
    ];
    for (cause, n) in causes {
        let l = [l[0], l[1], l[2], ("cause", cause)];
        e.sample("axle_plugin_faults_total", &l, n as f64);
    }
    e.sample("axle_plugin_slow_total", &l, s.slow as f64);
    e.sample("axle_plugin_skipped_total", &l, s.skipped as f64);
    e.sample(
        "axle_plugin_quarantined",
        &l,
        f64::from(u8::from(s.quarantined)),
    );
    e.sample("axle_plugin_quarantine_trips_total", &l, s.trips as f64);
    e.sample("axle_plugin_replaced_total", &l, s.replaced as f64);
    e.sample("axle_plugin_timed_calls_total", &l, s.timed_calls as f64);
    e.sample("axle_plugin_call_seconds_total", &l, seconds(s.time_ns));
    if let Some(i) = &s.intercept {
        e.sample("axle_interceptor_calls_total", &l, i.calls as f64);
        let verdicts = [
            ("pass", i.passes),
            ("set-tags", i.tag_changes),
            ("refuse", i.refusals),
        ];
        for (verdict, n) in verdicts {
            let l = [l[0], l[1], l[2], ("verdict", verdict)];
            e.sample("axle_interceptor_verdicts_total", &l, n as f64);
        }
        e.sample("axle_interceptor_memo_hits_total", &l, i.memo_hits as f64);
        e.sample("axle_interceptor_faults_total", &l, i.faults as f64);
    }
}

/// A shadow's counters: one series per shadow slot (side, owner, service, kind, plugin).
fn shadows(e: &mut Exposition, side: &str, owner: &str, v: &ShadowView) {
    let l = [
        ("side", side),
        ("owner", owner),
        ("service", v.service.as_str()),
        ("kind", v.kind.as_str()),
        ("plugin", v.candidate.as_str()),
    ];
    e.sample("axle_shadow_sampled_total", &l, v.sampled as f64);
    e.sample("axle_shadow_agreed_total", &l, v.agreed as f64);
    e.sample("axle_shadow_diverged_total", &l, v.diverged as f64);
    e.sample("axle_shadow_faults_total", &l, v.faults as f64);
    e.sample("axle_shadow_sample_ratio", &l, v.sample);
}

/// Every family, with its type and help (`docs/observability.md` says the same).
fn declare(e: &mut Exposition) {
    use Kind::{Counter, Gauge, Histogram};
    let families: [(&'static str, Kind, &str); 39] = [
        ("axle_client_calls_total", Counter, "Calls made by a client, per service and method policy (a declared method, or * for the rest)."),
        ("axle_client_ok_total", Counter, "Calls that succeeded."),
        ("axle_client_errors_total", Counter, "Calls that failed, by error class (before any fallback)."),
        ("axle_client_call_seconds", Histogram, "Call latency, every attempt included."),
        ("axle_client_retries_total", Counter, "Attempts sent again after a failure that may have run the handler."),
        ("axle_client_failovers_total", Counter, "Attempts sent to another endpoint after a refusal or an unsent request."),
        ("axle_client_hedges_total", Counter, "Backup requests sent (hedging)."),
        ("axle_client_retry_budget_refused_total", Counter, "Retries, failovers and hedges not sent: the retry budget was spent."),
        ("axle_client_fallbacks_total", Counter, "Failed calls the method's fallback answered."),
        ("axle_client_cache_hits_total", Counter, "Calls the method's result cache answered (nothing sent)."),
        ("axle_client_cache_misses_total", Counter, "Calls of a caching method its cache could not answer."),
        ("axle_client_breaker_state", Gauge, "The method breaker's state: 1 for the current one."),
        ("axle_client_breaker_opened_total", Counter, "Times the method breaker opened."),
        ("axle_client_endpoint_calls_total", Counter, "Attempts sent to an endpoint."),
        ("axle_client_endpoint_faults_total", Counter, "Attempts to an endpoint that failed (timeouts, resets, internal errors)."),
        ("axle_client_endpoint_in_flight", Gauge, "Attempts to an endpoint waiting for their answer."),
        ("axle_client_endpoint_health", Gauge, "The endpoint's health state: 1 for the current one."),
        ("axle_client_endpoint_in_rotation", Gauge, "1 if selection may pick the endpoint now."),
        ("axle_client_endpoint_effective_weight", Gauge, "The weight selectors see (configured x warm-up x health)."),
        ("axle_client_endpoint_latency_ewma_seconds", Gauge, "Moving average of the endpoint's latency."),
        ("axle_client_endpoint_error_rate", Gauge, "Endpoint faults over counted calls in the health window."),
        ("axle_server_requests_total", Counter, "Requests that named a method, refused ones included."),
        ("axle_server_handled_total", Counter, "Requests whose handler ran."),
        ("axle_server_ok_total", Counter, "Requests answered with success."),
        ("axle_server_errors_total", Counter, "Requests answered with an error, by class."),
        ("axle_server_method_in_flight", Gauge, "Handlers of the method running now."),
        ("axle_server_handler_seconds", Histogram, "Handler latency."),
        ("axle_server_limiter_admitted_total", Counter, "Requests the limiter plugin admitted."),
        ("axle_server_limiter_rejected_total", Counter, "Requests the limiter plugin rejected (rate_limited)."),
        ("axle_server_in_flight", Gauge, "Requests being handled now, every method."),
        ("axle_server_connections", Gauge, "Connections open now."),
        ("axle_server_connections_refused_total", Counter, "Connections refused at the cap (every one busy)."),
        ("axle_server_connections_evicted_total", Counter, "Idle connections closed to make room."),
        ("axle_server_malformed_total", Counter, "Malformed requests."),
        ("axle_server_refused_closing_total", Counter, "Requests refused while stopping before a method was known."),
        ("axle_plugin_calls_total", Counter, "Calls into a plugin."),
        ("axle_plugin_faults_total", Counter, "Plugin calls answered by the safe default, by cause."),
        ("axle_plugin_quarantined", Gauge, "1 while calls skip the plugin (quarantine)."),
        ("axle_plugin_call_seconds_total", Counter, "Time spent in the timed calls into the plugin (those with a slow-call-us budget)."),
    ];
    for (name, kind, help) in families {
        e.family(name, kind, help);
    }
    e.family(
        "axle_plugin_slow_total",
        Counter,
        "Plugin calls answered, but slower than the plugin's slow-call-us.",
    );
    e.family(
        "axle_plugin_skipped_total",
        Counter,
        "Plugin calls that did not enter it (quarantine).",
    );
    e.family(
        "axle_plugin_quarantine_trips_total",
        Counter,
        "Times the plugin was put in quarantine.",
    );
    e.family(
        "axle_plugin_timed_calls_total",
        Counter,
        "Plugin calls timed: only a plugin with a slow-call-us budget is.",
    );
    e.family(
        "axle_plugin_replaced_total",
        Counter,
        "Plugin instances discarded and made anew after a fault.",
    );
    let interceptor: [(&'static str, &str); 4] = [
        ("axle_interceptor_calls_total", "Calls an interceptor looked at, at the points it declared (memo hits included)."),
        ("axle_interceptor_verdicts_total", "An interceptor's answers, by verdict (pass, set-tags, refuse), the safe default's included."),
        ("axle_interceptor_memo_hits_total", "Interceptor answers taken from its memo, without entering the plugin."),
        ("axle_interceptor_faults_total", "Interceptor calls the safe default answered (the plugin failed or answered out of contract)."),
    ];
    for (name, help) in interceptor {
        e.family(name, Counter, help);
    }
    let shadow: [(&'static str, Kind, &str); 5] = [
        (
            "axle_shadow_sampled_total",
            Counter,
            "Calls a shadow plugin decided on beside the live one (docs/shadow.md).",
        ),
        (
            "axle_shadow_agreed_total",
            Counter,
            "Sampled calls the shadow decided as the live plugin did.",
        ),
        (
            "axle_shadow_diverged_total",
            Counter,
            "Sampled calls the shadow decided otherwise (its answer unused).",
        ),
        (
            "axle_shadow_faults_total",
            Counter,
            "Sampled calls the shadow gave no answer of its own on (the live path untouched).",
        ),
        (
            "axle_shadow_sample_ratio",
            Gauge,
            "The share of calls the shadow decides on.",
        ),
    ];
    for (name, kind, help) in shadow {
        e.family(name, kind, help);
    }
}
