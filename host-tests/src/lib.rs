//! Helpers shared by the black-box tests in `tests/`.

pub mod etcd;
pub mod http;
pub mod load;
pub mod webdriver;

use std::path::{Path, PathBuf};

use axle::manifest::Manifest;
use axle::plugin::{LoadError, LoadedPlugin, Plugin, PluginHost};
use axle::spi;

/// A plugin host with a private artifact cache, so tests never share or race on the
/// user's cache.
pub struct TestHost {
    pub host: PluginHost,
    pub cache: tempfile::TempDir,
}

impl TestHost {
    pub fn new() -> Self {
        let cache = tempfile::tempdir().expect("temp dir");
        let host = PluginHost::new(Some(cache.path().to_path_buf())).expect("plugin host");
        TestHost { host, cache }
    }

    /// Loads plugin `name` from a manifest given as text (relative paths resolve against
    /// `base`).
    pub fn load(&self, manifest: &str, name: &str) -> Result<LoadedPlugin, LoadError> {
        load_named(&self.host, manifest, name)
    }
}

/// Loads plugin `name` of `manifest` into `host`.
fn load_named(host: &PluginHost, manifest: &str, name: &str) -> Result<LoadedPlugin, LoadError> {
    let m = Manifest::parse(manifest, "test.toml", Path::new("/")).expect("valid manifest");
    host.load(m.plugins.get(name).expect("plugin in manifest"))
}

impl Default for TestHost {
    fn default() -> Self {
        Self::new()
    }
}

/// A plugin host whose artifact cache every test of the process shares, for guests that
/// are slow to compile (a Python or StarlingMonkey component takes 10-20 s, a cache hit
/// milliseconds). Loads are serialised, so the first load of a component compiles it and
/// every later one, in any test, hits the cache.
pub struct SharedHost {
    test: TestHost,
    loading: std::sync::Mutex<()>,
}

impl SharedHost {
    /// The process's shared host.
    pub fn get() -> &'static SharedHost {
        static HOST: std::sync::OnceLock<SharedHost> = std::sync::OnceLock::new();
        HOST.get_or_init(|| SharedHost {
            test: TestHost::new(),
            loading: std::sync::Mutex::new(()),
        })
    }

    /// Like [`TestHost::load`], one load at a time.
    pub fn load(&self, manifest: &str, name: &str) -> Result<LoadedPlugin, LoadError> {
        self.load_into(&self.test.host, manifest, name)
    }

    /// The artifact cache directory (for `AXLE_CACHE_DIR` of an `axle` process).
    pub fn cache_dir(&self) -> &Path {
        self.test.cache.path()
    }

    /// A host of its own over the shared artifact cache: its own facts table, so a test
    /// can set endpoint facts without racing the other tests of the process.
    pub fn own_host(&self) -> PluginHost {
        PluginHost::new(Some(self.cache_dir().to_path_buf())).expect("plugin host")
    }

    /// Like [`SharedHost::load`], into `host` (from [`SharedHost::own_host`]).
    pub fn load_into(
        &self,
        host: &PluginHost,
        manifest: &str,
        name: &str,
    ) -> Result<LoadedPlugin, LoadError> {
        // A test that panicked while loading leaves nothing half-done behind: go on.
        let _one_at_a_time = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        load_named(host, manifest, name)
    }
}

/// A hostile fixture built by `host-tests/build.rs`, e.g. `axle_fixture_trap`.
pub fn built_component(crate_name: &str) -> PathBuf {
    let path = Path::new(env!("AXLE_FIXTURE_DIR")).join(format!("{crate_name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: host-tests/build.rs builds it",
        path.display()
    );
    path
}

/// An example plugin in another language, built by `xtask` (`scripts/test` runs it) into
/// `<target>/<lang>-plugins/<name>.wasm`.
pub fn example_component(lang: &str, name: &str) -> PathBuf {
    let target = Path::new(env!("AXLE_TARGET_DIR"));
    let path = target
        .join(format!("{lang}-plugins"))
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo run --release -p xtask -- {lang}-plugins` \
         (scripts/test does)",
        path.display()
    );
    path
}

/// The behaviour every round-robin selector shares, whatever its language: each set
/// keeps its own cursor and visits its members in the order the kernel gave.
pub fn assert_round_robin(p: &LoadedPlugin) {
    let s = selector(p);
    s.endpoints_changed(&table(&[100; 6]));
    s.define_set(0, vec![5, 2, 4]);
    s.define_set(1, vec![0, 1]);
    let picks: Vec<u32> = (0..9).map(|_| s.select(0, 0).unwrap().endpoint).collect();
    assert_eq!(picks, [5, 2, 4, 5, 2, 4, 5, 2, 4], "{}", p.name);
    let other: Vec<u32> = (0..4).map(|_| s.select(1, 0).unwrap().endpoint).collect();
    assert_eq!(other, [0, 1, 0, 1], "each set keeps its own cursor");
    // Redefining a set restarts it; a new table forgets every set.
    s.define_set(0, vec![3, 1]);
    assert_eq!(s.select(0, 0).unwrap().endpoint, 3);
    s.endpoints_changed(&table(&[100; 6]));
    assert!(s.select(0, 0).is_none(), "sets are gone with the old table");
    assert!(s.select(7, 0).is_none(), "an undefined set has no answer");
    let stats = p.stats.snapshot();
    assert_eq!(stats.faults(), 0, "{stats:?}");
}

/// How many of `picks` picks from set `set` went to each of endpoints `0..n`, the hash
/// key counting up; every pick must be the plugin's own answer.
pub fn plugin_picks(p: &LoadedPlugin, set: u32, n: usize, picks: u64) -> Vec<u32> {
    let mut counts = vec![0u32; n];
    for i in 0..picks {
        let pick = selector(p)
            .select(set, i)
            .expect("a defined set is answered");
        assert!(
            pick.by_plugin,
            "{}: the plugin answered, not the fallback: {pick:?}",
            p.name
        );
        counts[pick.endpoint as usize] += 1;
    }
    counts
}

/// The `axle` binary next to the test executable (`cargo build -p axle` first; the
/// README's test command does).
pub fn axle_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = dir.join("axle");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release -p axle` (scripts/test does)",
        bin.display()
    );
    bin
}

/// An endpoint table with ids `0..n`, given weights and no tags.
pub fn table(weights: &[u32]) -> spi::EndpointTable {
    spi::EndpointTable::new(
        1,
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| spi::Endpoint {
                id: i as u32,
                address: format!("127.0.0.1:{}", 30_000 + i),
                weight: *w,
                tags: Vec::new(),
            })
            .collect(),
    )
}

/// The selector inside a loaded plugin.
pub fn selector(p: &LoadedPlugin) -> &axle::plugin::kinds::selector::SelectorPlugin {
    match &p.plugin {
        Plugin::Selector(s) => s,
        _ => panic!("{} is not a selector", p.name),
    }
}

/// A one-plugin manifest. Unless `extra` sets `timeout-ms`, calls get a second: the
/// default deadline is wall time, and a test machine running other tests in parallel can
/// deschedule a thread for longer than a plugin call's default budget.
pub fn manifest(name: &str, kind: &str, component: &str, extra: &str) -> String {
    let timeout = if extra.contains("timeout-ms") {
        ""
    } else {
        "timeout-ms = 1000\n"
    };
    format!("[plugins.{name}]\nkind = \"{kind}\"\ncomponent = {component:?}\n{timeout}{extra}\n")
}

/// An `axle serve` process on a free loopback port, killed when dropped.
pub struct ServeProcess {
    child: std::process::Child,
    pub addr: String,
    /// The admin endpoint's address, when started with `--admin`.
    pub admin: Option<String>,
    /// Kept open: the process may print more, and a closed pipe would fail its writes.
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl ServeProcess {
    /// Starts `axle serve --listen 127.0.0.1:0 ARGS...` and waits for its address.
    pub fn start(args: &[&str]) -> ServeProcess {
        ServeProcess::start_with_manifest(None, args)
    }

    /// Starts `axle serve --listen ADDR ARGS...` (to restart a provider where it was).
    pub fn start_at(addr: &str, args: &[&str]) -> ServeProcess {
        let mut all = vec!["--listen", addr];
        all.extend_from_slice(args);
        ServeProcess::start_with_manifest(None, &all)
    }

    /// Kills the process with SIGKILL (no goaway, no drain: a crash) and reaps it.
    pub fn kill_9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The same, with a manifest file.
    pub fn start_with_manifest(manifest: Option<&Path>, args: &[&str]) -> ServeProcess {
        ServeProcess::start_with_env(manifest, args, &[])
    }

    /// The same, with environment variables (`AXLE_LOG`, to quiet a provider whose
    /// plugin is meant to fault).
    pub fn start_with_env(
        manifest: Option<&Path>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> ServeProcess {
        use std::io::BufRead;
        let mut cmd = std::process::Command::new(axle_bin());
        cmd.envs(env.iter().copied());
        cmd.arg("serve");
        if !args.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(args);
        if let Some(m) = manifest {
            cmd.arg("--manifest").arg(m);
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start axle serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stdout = std::io::BufReader::new(stdout);
        let mut next_line = |prefix: &str| {
            let mut line = String::new();
            let read = stdout.read_line(&mut line);
            match (read, line.strip_prefix(prefix)) {
                (Ok(_), Some(addr)) => Ok(addr.trim().to_string()),
                _ => Err(line),
            }
        };
        let addr = next_line("listening on ");
        // `--admin` prints its address on the second line.
        let admin = args
            .contains(&"--admin")
            .then(|| next_line("admin on "))
            .transpose();
        match (addr, admin) {
            (Ok(addr), Ok(admin)) => ServeProcess {
                child,
                addr,
                admin,
                stdout,
            },
            (Err(line), _) | (_, Err(line)) => {
                let _ = child.kill();
                panic!("axle serve did not start: {line:?}");
            }
        }
    }

    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM (a graceful stop: goaway, drain, exit).
    pub fn terminate(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {}", self.pid());
    }

    /// What it printed after its start lines, up to its exit (call after it exited).
    pub fn rest_of_stdout(&mut self) -> String {
        use std::io::Read;
        let mut rest = String::new();
        let _ = self.stdout.read_to_string(&mut rest);
        rest
    }

    /// Waits for the process to exit (after a signal); `None` if it is still running
    /// after `timeout`.
    pub fn wait_exit(&mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let until = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        None
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The counters of plugin `name` of `client` now (calls, faults by cause, quarantine).
pub fn plugin_stats(client: &axle::client::Client, name: &str) -> axle::plugin::StatsSnapshot {
    client
        .plugin_stats()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, stats)| stats)
        .unwrap_or_else(|| panic!("the counters of plugin {name}"))
}

/// The component calls plugin `name` of `client` has taken so far (its pick, its
/// `select-run`, the tables and sets pushed to it).
pub fn plugin_calls(client: &axle::client::Client, name: &str) -> u64 {
    plugin_stats(client, name).calls
}

/// A client for `service` at `endpoints`, with the embedded manifest's plugins and
/// `selector` filling the service's selector slot (seeded when it is random; a call
/// budget of a second, as in [`manifest`]).
pub fn client_for(
    host: &PluginHost,
    service: &str,
    selector: &str,
    endpoints: Vec<axle::manifest::EndpointSpec>,
) -> axle::client::Client {
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    let slots = m.services.entry(service.to_string()).or_default();
    slots.selector = Some(selector.to_string());
    if let Some(p) = m.plugins.get_mut(selector) {
        p.timeout_ms = 1000;
        if selector.contains("random") {
            p.config.insert("seed".into(), toml::Value::Integer(7));
        }
    }
    axle::client::Client::new(
        host,
        axle::client::ClientConfig::new(m).endpoints(service, endpoints),
    )
    .expect("client")
}

/// A client for `service` at `endpoints` whose governance is `governance` (TOML keys,
/// e.g. `"retries = 3\nidempotent = true"`), set at the global tier (which the
/// per-endpoint breakers follow) and the service tier.
pub fn governed_client(
    host: &PluginHost,
    service: &str,
    endpoints: Vec<axle::manifest::EndpointSpec>,
    governance: &str,
) -> axle::client::Client {
    let mut m = Manifest::embedded().expect("embedded manifest");
    m.endpoints.clear();
    let layer: axle::governance::TierSettings =
        toml::from_str(governance).expect("governance TOML");
    layer.validate().expect("valid governance");
    m.governance = layer.clone();
    m.service_governance.insert(service.to_string(), layer);
    // The default selector, with room for a loaded test machine.
    let selector = m.slots.selector.clone().unwrap_or_default();
    if let Some(p) = m.plugins.get_mut(&selector) {
        p.timeout_ms = 1000;
    }
    axle::client::Client::new(
        host,
        axle::client::ClientConfig::new(m).endpoints(service, endpoints),
    )
    .expect("client")
}

/// The embedded manifest with `extra` keys added to its `[governance]` table, written to
/// a file in `dir` (for `axle serve --manifest`).
pub fn manifest_with_governance(dir: &Path, extra: &str) -> PathBuf {
    let base = axle::manifest::defaults::EMBEDDED_MANIFEST;
    let text = base.replacen("[governance]\n", &format!("[governance]\n{extra}\n"), 1);
    assert_ne!(text, base, "the embedded manifest has a [governance] table");
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).expect("write manifest");
    path
}

/// Reads `counters` until `reached` holds of them or 60 s pass, running `step` (a few
/// calls) between readings; returns the last reading. For a state that only a later call
/// brings about, such as a faulted plugin's replacement being put in use: it is made on a
/// rebuild thread, so how many calls that takes depends on how busy the machine is.
pub fn step_until<S>(
    counters: impl Fn() -> S,
    reached: impl Fn(&S) -> bool,
    mut step: impl FnMut(),
) -> S {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut now = counters();
    while !reached(&now) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
        step();
        now = counters();
    }
    now
}

/// `calls` 64-byte raw `echo` calls from each of `callers` tasks on `runtime`, the options
/// of each from `options(caller, call)`: (answered, failed). Fails the test if any
/// calling task panicked or an answer came back altered.
pub fn drive_echo(
    runtime: &tokio::runtime::Runtime,
    client: &axle::client::Client,
    callers: usize,
    calls: u64,
    what: &str,
    options: fn(usize, u64) -> axle::client::CallOptions,
) -> (u64, u64) {
    runtime.block_on(async {
        let tasks: Vec<_> = (0..callers)
            .map(|caller| {
                let client = client.clone();
                let what = what.to_string();
                tokio::spawn(async move {
                    let (mut ok, mut failed) = (0u64, 0u64);
                    for call in 0..calls {
                        let body = bytes::Bytes::from_static(&[7; 64]);
                        match client
                            .call_raw("echo", "x", body, &options(caller, call))
                            .await
                        {
                            Ok(reply) if reply.payload.len() == 64 => ok += 1,
                            Ok(reply) => panic!("echo answered {} bytes", reply.payload.len()),
                            Err(e) => {
                                if failed < 3 {
                                    eprintln!("{what}: call failed: {e}");
                                }
                                failed += 1;
                            }
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        let mut totals = (0, 0);
        for t in tasks {
            match t.await {
                Ok((ok, failed)) => {
                    totals.0 += ok;
                    totals.1 += failed;
                }
                Err(e) => panic!("{what}: a calling task did not finish: {e}"),
            }
        }
        totals
    })
}

/// `axle stats --admin ADDR --json` of a running `axle serve --admin`, parsed (fails the
/// test if the admin endpoint does not answer).
pub fn admin_stats(admin: &str) -> serde_json::Value {
    let out = std::process::Command::new(axle_bin())
        .args(["stats", "--admin", admin, "--json"])
        .output()
        .expect("run axle stats");
    assert!(
        out.status.success(),
        "the provider answers its admin endpoint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stats --json prints JSON")
}

/// Runs `axle ARGS` to completion, its compiled-plugin cache in `cache`.
pub fn run_axle(args: &[&str], cache: &Path) -> std::process::Output {
    std::process::Command::new(axle_bin())
        .args(args)
        .env("AXLE_CACHE_DIR", cache)
        .output()
        .expect("run axle")
}

/// What a process printed, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A two-worker tokio runtime for tests that drive a client.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A throwaway certificate authority for the TLS tests (the bench's own).
pub use axle_bench::pki::Pki as TestPki;

/// The calls `client` has made to the endpoint at `addr` (0 when it has none there).
pub fn calls_at(client: &axle::client::Client, addr: &str) -> u64 {
    client
        .endpoints()
        .into_iter()
        .find(|v| v.address == addr)
        .map_or(0, |v| v.calls)
}

/// `n` raw calls to `flaky/even`, one after another, each of which must succeed; how many
/// of them each of `servers` took, in order.
pub fn calls_per_server(
    runtime: &tokio::runtime::Runtime,
    client: &axle::client::Client,
    servers: &[ServeProcess],
    n: u32,
) -> Vec<u64> {
    let before: Vec<u64> = servers.iter().map(|s| calls_at(client, &s.addr)).collect();
    runtime.block_on(async {
        for _ in 0..n {
            client
                .call_raw(
                    "flaky",
                    "even",
                    bytes::Bytes::new(),
                    &axle::client::CallOptions::default(),
                )
                .await
                .unwrap();
        }
    });
    servers
        .iter()
        .zip(before)
        .map(|(s, b)| calls_at(client, &s.addr) - b)
        .collect()
}
