//! The request path against scripted endpoints (loopback, in process): what a call holds
//! is given back however it ends, failovers stay bounded, connects are cut to the budget,
//! endpoints that go away come back. Assertions wait for states, never for timings.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::net::TcpListener;

use crate::{CallError, CallOptions, Client, ClientConfig};

mod cache_monitor;
mod route_memo;
use axle_manifest::{EndpointSpec, Manifest};
use axle_plugin_host::PluginHost;
use axle_wire::{ErrorClass, Frame, FrameCodec, Kind, Limits};

/// How a [`Fake`] endpoint treats requests (and connections).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Mode {
    /// Answers with the request's payload.
    Echo = 0,
    /// Never answers.
    Silent = 1,
    /// Answers `internal`.
    Failing = 2,
    /// Answers `overloaded`.
    Overloaded = 3,
    /// A stopping provider: every connection opens with a goaway, requests are answered
    /// `shutting_down`.
    Stopping = 4,
    /// Answers `business` with the code `conflict`.
    Conflict = 5,
    /// Closes the connection on the first request it gets (the answer is lost), then
    /// echoes.
    DropOnce = 6,
}

/// A scripted endpoint on a loopback port, counting what it received.
struct Fake {
    addr: String,
    mode: Arc<AtomicU8>,
    requests: Arc<AtomicU64>,
    cancels: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    /// The request id of every request received, in order.
    ids: Arc<std::sync::Mutex<Vec<[u8; 16]>>>,
    /// Bumped to tell every connection open then to say goaway (once). A watch, not a
    /// notify: a connection busy answering a heartbeat when it is bumped still sees it.
    shed: Arc<tokio::sync::watch::Sender<u64>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Fake {
    async fn start(mode: Mode) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let script = Script {
            mode: Arc::new(AtomicU8::new(mode as u8)),
            requests: Arc::default(),
            cancels: Arc::default(),
            ids: Arc::default(),
        };
        let shed = Arc::new(tokio::sync::watch::Sender::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let (accepted, serving, s) = (connections.clone(), script.clone(), shed.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                accepted.fetch_add(1, Relaxed);
                tokio::spawn(serve(stream, serving.clone(), s.subscribe()));
            }
        });
        Fake {
            addr,
            mode: script.mode,
            requests: script.requests,
            cancels: script.cancels,
            ids: script.ids,
            connections,
            shed,
            _task: task,
        }
    }

    fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Relaxed);
    }

    /// Every connection open now says goaway.
    fn shed(&self) {
        self.shed.send_modify(|n| *n += 1);
    }

    fn spec(&self) -> EndpointSpec {
        EndpointSpec::new(&self.addr)
    }
}

/// What a [`Fake`]'s connections share: its mode and what it counts.
#[derive(Clone)]
struct Script {
    mode: Arc<AtomicU8>,
    requests: Arc<AtomicU64>,
    cancels: Arc<AtomicU64>,
    ids: Arc<std::sync::Mutex<Vec<[u8; 16]>>>,
}

async fn serve(
    stream: tokio::net::TcpStream,
    script: Script,
    mut shed: tokio::sync::watch::Receiver<u64>,
) {
    let Script {
        mode,
        requests,
        cancels,
        ids,
    } = script;
    let mut frames = tokio_util::codec::Framed::new(stream, FrameCodec::new(Limits::default()));
    let mode_now = || mode.load(Relaxed);
    if mode_now() == Mode::Stopping as u8 && frames.send(Frame::goaway("stopping")).await.is_err() {
        return;
    }
    let mut shed_sent = false;
    loop {
        let frame = tokio::select! {
            f = frames.next() => match f {
                Some(Ok(f)) => f,
                _ => return,
            },
            _ = shed.changed(), if !shed_sent => {
                shed_sent = true;
                let _ = frames.send(Frame::goaway("shedding this connection")).await;
                continue;
            }
        };
        let answer = match frame.kind {
            Kind::Ping => Frame::bare(Kind::Pong, frame.id),
            Kind::Cancel => {
                cancels.fetch_add(1, Relaxed);
                continue;
            }
            Kind::Request => {
                requests.fetch_add(1, Relaxed);
                if let Some(id) = frame.meta.request_id {
                    ids.lock().unwrap().push(id);
                }
                match mode_now() {
                    m if m == Mode::Echo as u8 => {
                        Frame::response(frame.id, frame.meta.content_type, frame.payload)
                    }
                    m if m == Mode::Failing as u8 => {
                        Frame::error(frame.id, ErrorClass::Internal, "failing")
                    }
                    m if m == Mode::Overloaded as u8 => {
                        Frame::error(frame.id, ErrorClass::Overloaded, "busy")
                    }
                    m if m == Mode::Stopping as u8 => {
                        Frame::error(frame.id, ErrorClass::ShuttingDown, "stopping")
                    }
                    m if m == Mode::Conflict as u8 => {
                        let mut f = Frame::error(frame.id, ErrorClass::Business, "conflict");
                        f.meta.error_code = Some("conflict".into());
                        f
                    }
                    m if m == Mode::DropOnce as u8 => {
                        mode.store(Mode::Echo as u8, Relaxed);
                        return;
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        if frames.send(answer).await.is_err() {
            return;
        }
    }
}

/// A client of service `svc` at `endpoints`, with `governance` (TOML) at the global and
/// service tiers, and the fast health settings tests use.
fn client(host: &PluginHost, endpoints: Vec<EndpointSpec>, governance: &str) -> Client {
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    let text = format!(
        "heartbeat-interval-ms = 100\nheartbeat-timeout-ms = 500\nhealth-interval-ms = 100\n{governance}"
    );
    let layer: axle_governance::TierSettings = toml::from_str(&text).unwrap();
    layer.validate().unwrap();
    m.governance = layer.clone();
    m.service_governance.insert("svc".into(), layer);
    m.services.entry("svc".into()).or_default();
    for p in m.plugins.values_mut() {
        p.timeout_ms = 1000;
    }
    Client::new(host, ClientConfig::new(m).endpoints("svc", endpoints)).unwrap()
}

fn host() -> (PluginHost, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (
        PluginHost::new(Some(dir.path().to_path_buf())).unwrap(),
        dir,
    )
}

async fn call(client: &Client, options: &CallOptions) -> Result<crate::Reply, CallError> {
    client
        .call_raw("svc", "m", Bytes::from_static(b"hi"), options)
        .await
}

/// Waits (up to 20 s, then fails) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < give_up, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn in_flight(client: &Client) -> u32 {
    client.endpoints().iter().map(|e| e.in_flight).sum()
}

fn breaker(client: &Client) -> String {
    client.services()[0].policies[0].breaker.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_attempts_give_back_probes_and_in_flight_counts() {
    let (host, _cache) = host();
    let a = Fake::start(Mode::Failing).await;
    let client = client(
        &host,
        vec![a.spec()],
        "retries = 0\nbreaker-consecutive-failures = 2\nbreak-ms = 50\nhalf-open-probes = 2\n\
         timeout-ms = 5000",
    );
    for _ in 0..2 {
        assert_eq!(
            call(&client, &CallOptions::default())
                .await
                .unwrap_err()
                .class(),
            "internal"
        );
    }
    assert_eq!(breaker(&client), "open");
    a.set(Mode::Silent);
    // Half-open: each probe's call is dropped by its caller while in flight, many times
    // the number of probe slots.
    until("half-open", || breaker(&client) == "half-open").await;
    let sent = a.requests.load(Relaxed);
    for i in 1..=10 {
        let caller = client.clone();
        let task = tokio::spawn(async move { call(&caller, &CallOptions::default()).await });
        // Dropped by its caller once it is in flight: a probe slot of each breaker is
        // taken until then.
        until("the probe in flight", || {
            a.requests.load(Relaxed) == sent + i
        })
        .await;
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
    }
    // Ten probes went through two slots: each dropped one gave its slot back.
    until("cancel frames for the dropped calls", || {
        a.cancels.load(Relaxed) == 10
    })
    .await;
    assert_eq!(in_flight(&client), 0);
    // Answers again: the probes close the breakers.
    a.set(Mode::Echo);
    for _ in 0..2 {
        call(&client, &CallOptions::default()).await.unwrap();
    }
    assert_eq!(breaker(&client), "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedges_loser_is_cancelled_and_counted_out() {
    let (host, _cache) = host();
    let silent = Fake::start(Mode::Silent).await;
    let echo = Fake::start(Mode::Echo).await;
    let client = client(
        &host,
        vec![silent.spec(), echo.spec()],
        "idempotent = true\nhedge-delay-ms = 5\nretry-budget-ratio = 1.0\ntimeout-ms = 5000\n\
         retry-budget-min-per-s = 1000",
    );
    let n = 20;
    for _ in 0..n {
        // Round-robin: every other call starts at the silent endpoint and is answered
        // by its backup; the first attempt loses.
        let reply = call(&client, &CallOptions::default()).await.unwrap();
        assert_eq!(reply.payload, Bytes::from_static(b"hi"));
    }
    let lost = silent.requests.load(Relaxed);
    assert!(lost >= n / 2 - 1, "{lost}");
    until("a cancel frame per loser", || {
        silent.cancels.load(Relaxed) == lost
    })
    .await;
    assert_eq!(in_flight(&client), 0, "{:?}", client.endpoints());
    let views = client.endpoints();
    let silent_view = views.iter().find(|v| v.address == silent.addr).unwrap();
    assert_eq!(silent_view.window_timeouts, 0, "a loser is no timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failovers_are_capped_per_call_and_drawn_from_the_budget() {
    let (host, _cache) = host();
    let mut fakes = Vec::new();
    for _ in 0..5 {
        fakes.push(Fake::start(Mode::Overloaded).await);
    }
    let specs: Vec<EndpointSpec> = fakes.iter().map(Fake::spec).collect();
    let sent = |fakes: &[Fake]| fakes.iter().map(|f| f.requests.load(Relaxed)).sum::<u64>();
    // A budget that never runs out: the cap alone bounds a call.
    let capped = client(
        &host,
        specs.clone(),
        "breaker = false\nmax-failovers = 2\nretry-budget-min-per-s = 100000",
    );
    for _ in 0..10 {
        let err = call(&capped, &CallOptions::default()).await.unwrap_err();
        assert_eq!(err.class(), "overloaded");
    }
    assert_eq!(sent(&fakes), 30, "one attempt and two failovers per call");
    // The default cap and budget: failovers a share of the requests.
    let budgeted = client(
        &host,
        specs,
        "breaker = false\nretry-budget-ratio = 0.2\nretry-budget-min-per-s = 0",
    );
    let before = sent(&fakes);
    let n = 200;
    for _ in 0..n {
        assert!(call(&budgeted, &CallOptions::default()).await.is_err());
    }
    let attempts = sent(&fakes) - before;
    assert!(
        (n..=n + n / 5).contains(&attempts),
        "{attempts} attempts for {n} calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_that_would_overrun_the_budget_is_cut_to_it() {
    let (host, _cache) = host();
    // A listener whose accept queue is full: a connect to it hangs.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut queued = Vec::new();
    loop {
        match tokio::time::timeout(
            Duration::from_millis(300),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            Ok(Ok(s)) if queued.len() < 16 => queued.push(s),
            _ => break,
        }
    }
    let client = client(&host, vec![EndpointSpec::new(addr.to_string())], "");
    let err = call(&client, &CallOptions::timeout(Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert_eq!(
        err.class(),
        "deadline_exceeded",
        "the call's budget, not the connect timeout: {err}"
    );
    assert_eq!(in_flight(&client), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_spent_before_an_attempt_sends_nothing() {
    let (host, _cache) = host();
    let a = Fake::start(Mode::Echo).await;
    let client = client(&host, vec![a.spec()], "idempotent = true\nretries = 3");
    // Typed: the serializer runs first, on the call's budget (1 µs: gone by the pick).
    let options = CallOptions::timeout(Duration::from_micros(1));
    let err = client
        .call::<_, serde_json::Value>("svc", "m", &serde_json::json!({"q": 1}), &options)
        .await
        .unwrap_err();
    assert_eq!(err.class(), "deadline_exceeded", "{err}");
    assert_eq!(a.requests.load(Relaxed), 0, "nothing was sent");
    assert_eq!(in_flight(&client), 0);
    // With a budget, the same call goes through.
    let options = CallOptions::timeout(Duration::from_secs(5));
    let answer: serde_json::Value = client
        .call("svc", "m", &serde_json::json!({"q": 1}), &options)
        .await
        .unwrap();
    assert_eq!(answer, serde_json::json!({"q": 1}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_endpoint_leaves_rotation_and_is_back_once_it_answers() {
    let (host, _cache) = host();
    let a = Fake::start(Mode::Echo).await;
    let b = Fake::start(Mode::Echo).await;
    let client = client(&host, vec![a.spec(), b.spec()], "retries = 0");
    let mut events = client.health_events();
    for _ in 0..4 {
        call(&client, &CallOptions::default()).await.unwrap();
    }
    // A shed connection (goaway, the endpoint fine): a new one answers, nothing changes.
    assert_eq!(a.connections.load(Relaxed), 1);
    a.shed();
    let redialling = || {
        client
            .state
            .all_endpoints()
            .iter()
            .any(|ep| ep.health.redialling.load(Relaxed))
    };
    until("a fresh connection", || {
        a.connections.load(Relaxed) == 2 && !redialling()
    })
    .await;
    assert_eq!(client.admissible("svc"), 2);
    // Stopping: goaway on every connection, `shutting_down` to requests. No call fails
    // (they fail over), and the endpoint leaves the rotation.
    a.set(Mode::Stopping);
    a.shed();
    for _ in 0..20 {
        call(&client, &CallOptions::default()).await.unwrap();
    }
    until("out of rotation", || client.admissible("svc") == 1).await;
    for _ in 0..20 {
        call(&client, &CallOptions::default()).await.unwrap();
    }
    // Listening again: back in rotation without any registry, and taking calls.
    a.set(Mode::Echo);
    until("back in rotation", || client.admissible("svc") == 2).await;
    let before = a.requests.load(Relaxed);
    for _ in 0..20 {
        call(&client, &CallOptions::default()).await.unwrap();
    }
    assert!(a.requests.load(Relaxed) > before, "it takes calls again");
    let mut changes = Vec::new();
    while let Ok(e) = events.try_recv() {
        changes.push(e.change);
    }
    use crate::health::HealthChange::*;
    assert_eq!(
        changes,
        [Unreachable, Readmitted],
        "a shed connection is no event"
    );
}

fn ids(fake: &Fake) -> Vec<[u8; 16]> {
    fake.ids.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_of_a_deduplicated_method_goes_back_to_its_endpoint_with_its_id() {
    let (host, _cache) = host();
    let (a, b) = (
        Fake::start(Mode::DropOnce).await,
        Fake::start(Mode::DropOnce).await,
    );
    // Not idempotent: without deduplication a lost answer is final.
    let plain = client(&host, vec![a.spec(), b.spec()], "retries = 2");
    let err = call(&plain, &CallOptions::default()).await.unwrap_err();
    assert_eq!(err.class(), "transport", "{err}");
    assert_eq!(ids(&a).len() + ids(&b).len(), 1, "sent once");
    for fake in [&a, &b] {
        fake.set(Mode::DropOnce);
        fake.ids.lock().unwrap().clear();
    }
    // Deduplicated: the same request id, to the same endpoint, nowhere else.
    let dedup = client(
        &host,
        vec![a.spec(), b.spec()],
        "retries = 2\ndedup-ttl-ms = 60000",
    );
    call(&dedup, &CallOptions::default()).await.unwrap();
    let (got_a, got_b) = (ids(&a), ids(&b));
    let (there, elsewhere) = if got_a.is_empty() {
        (got_b, got_a)
    } else {
        (got_a, got_b)
    };
    assert_eq!(there.len(), 2, "the attempt and its repeat");
    assert_eq!(there[0], there[1], "one request id for the call");
    assert!(elsewhere.is_empty(), "never sent to another provider");
    // The next call is another request.
    a.set(Mode::Echo);
    b.set(Mode::Echo);
    call(&dedup, &CallOptions::default()).await.unwrap();
    let all: Vec<_> = ids(&a).into_iter().chain(ids(&b)).collect();
    assert_eq!(all.len(), 3);
    assert_ne!(all[2], there[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_business_codes_are_retried_elsewhere_others_are_final() {
    let (host, _cache) = host();
    let (a, b) = (
        Fake::start(Mode::Conflict).await,
        Fake::start(Mode::Conflict).await,
    );
    let listed = client(
        &host,
        vec![a.spec(), b.spec()],
        "retries = 1\nidempotent = true\nretry-on-business = [\"conflict\"]",
    );
    match call(&listed, &CallOptions::default()).await.unwrap_err() {
        CallError::Remote { class, code, .. } => {
            assert_eq!(class, ErrorClass::Business);
            assert_eq!(
                code.as_deref(),
                Some("conflict"),
                "the code reaches the caller"
            );
        }
        other => panic!("{other}"),
    }
    let (got_a, got_b) = (ids(&a), ids(&b));
    assert_eq!(
        (got_a.len(), got_b.len()),
        (1, 1),
        "retried on the other one"
    );
    assert_eq!(got_a[0], got_b[0], "one request id for the call");
    // Not listed, or not safe to run twice: final at the first answer.
    for governance in [
        "retries = 1\nidempotent = true\nretry-on-business = [\"stale\"]",
        "retries = 1\nretry-on-business = [\"conflict\"]",
    ] {
        let before = a.requests.load(Relaxed) + b.requests.load(Relaxed);
        let c = client(&host, vec![a.spec(), b.spec()], governance);
        assert_eq!(
            call(&c, &CallOptions::default()).await.unwrap_err().class(),
            "business"
        );
        let after = a.requests.load(Relaxed) + b.requests.load(Relaxed);
        assert_eq!(after - before, 1, "{governance}");
    }
}

/// A call's future is moved by copying (into the caller's task, and each stage's into the
/// one above), so its size is paid on every call. The rare paths (a hedge, which holds
/// two attempts; a dial; a send that finds the writer's queue full) are boxed to keep it
/// small: 5,456 bytes before they were, 2,624 after; 1,616 once the connection's send
/// queued its frame before its future and the rare re-tagged options were boxed too;
/// 1,336 once the stages returned `async move` blocks instead of being `async fn`s;
/// 1,224 once the deadline was the connection's timer's, not a timer in every call;
/// 1,120 once a sent call waited on its answer's slot alone, in a future of its own, not
/// an `async` block holding the connection (`docs/performance.md`).
#[tokio::test]
async fn a_calls_future_stays_small() {
    let (host, _dir) = host();
    let c = client(
        &host,
        vec![EndpointSpec::new("127.0.0.1:1".to_string())],
        "",
    );
    let options = CallOptions::default();
    let call = c.call_raw("svc", "m", Bytes::new(), &options);
    let size = std::mem::size_of_val(&call);
    assert!(size <= 1_200, "a call's future is {size} bytes");
}

/// A rotation holds its members' endpoints (a call borrows the one it picks from its
/// rotation), so it must hold only those: an endpoint that no service lists any more is
/// let go, while another service keeps the endpoint it lists.
#[test]
fn an_endpoint_no_service_lists_any_more_is_let_go() {
    let (host, _dir) = host();
    let mut m = Manifest::embedded().unwrap();
    m.endpoints.clear();
    let (a, b) = (
        EndpointSpec::new("127.0.0.1:1"),
        EndpointSpec::new("127.0.0.1:2"),
    );
    let config = ClientConfig::new(m).endpoints("a", [a]).endpoints("b", [b]);
    let state = crate::state::ClientState::build(&host, config).unwrap();
    let kept = state.services["a"].read().rotation.clone();
    let held = |service: &str| state.services[service].read().rotation.members.to_vec();
    let (id_a, id_b) = (held("a")[0], held("b")[0]);
    let gone = Arc::downgrade(&state.endpoint(id_b).unwrap());
    assert!(kept.endpoint(id_a).is_some() && kept.endpoint(id_b).is_none());

    state.set_endpoints("b", Vec::new()).unwrap();
    assert!(held("b").is_empty());
    assert!(state.endpoint(id_b).is_none());
    assert!(
        gone.upgrade().is_none(),
        "a rotation still holds the endpoint"
    );
    let a_now = state.services["a"].read().rotation.clone();
    assert!(Arc::ptr_eq(
        a_now.endpoint(id_a).unwrap(),
        kept.endpoint(id_a).unwrap()
    ));

    // Listed again: `b`'s new rotation holds the endpoint the client holds now.
    state
        .set_endpoints("b", [EndpointSpec::new("127.0.0.1:2")].into())
        .unwrap();
    let id = held("b")[0];
    let now = state.services["b"].read().rotation.clone();
    assert!(Arc::ptr_eq(
        now.endpoint(id).unwrap(),
        &state.endpoint(id).unwrap()
    ));
    assert_eq!(held("a"), [id_a]);
}
