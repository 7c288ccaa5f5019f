//! A private etcd per test, and `axle serve` providers that register with it.
//!
//! Each test starts its own etcd (Debian's `etcd-server`) on free loopback ports with a
//! temporary data dir and kills it when dropped, so tests never share state and a test
//! can stop and restart "the registry" under load. `.ci/run` installs etcd, so CI always
//! runs these tests; elsewhere, without an `etcd` binary on PATH (or `$ETCD_BIN`), they
//! are skipped with a message saying so. With `CI` set, a missing etcd fails instead.
//!
//! [`Etcd::start_tls_or_skip`] starts one that speaks TLS only and requires client
//! certificates (its health is then read from a plain metrics listener).

use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `etcd` binary, if installed.
pub fn etcd_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ETCD_BIN") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file())
}

/// A free loopback port (bound, then released for the child to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// TLS for a test etcd: its certificate and key (PEM, for 127.0.0.1) and the CA its
/// clients' certificates must chain to (`--client-cert-auth`).
#[derive(Clone, Debug)]
pub struct EtcdTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: PathBuf,
}

/// One etcd member on loopback, killed on drop.
pub struct Etcd {
    bin: PathBuf,
    child: Option<Child>,
    data: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    tls: Option<EtcdTls>,
    /// A plain `/health` listener, for a TLS etcd.
    metrics_port: u16,
}

impl Etcd {
    /// Starts etcd, or returns `None` (after saying why) when it is not installed and this
    /// is not CI.
    pub fn start_or_skip(test: &str) -> Option<Etcd> {
        Etcd::start(test, None)
    }

    /// Starts an etcd that serves clients over TLS only and requires a client certificate.
    pub fn start_tls_or_skip(test: &str, tls: EtcdTls) -> Option<Etcd> {
        Etcd::start(test, Some(tls))
    }

    fn start(test: &str, tls: Option<EtcdTls>) -> Option<Etcd> {
        let Some(bin) = etcd_binary() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: etcd is not installed, and CI must run the etcd tests (.ci/run installs etcd-server)"
            );
            eprintln!(
                "SKIPPED {test}: no `etcd` on PATH (apt-get install etcd-server, or set ETCD_BIN)"
            );
            return None;
        };
        let data = tempfile::tempdir().expect("etcd data dir");
        let mut etcd = Etcd {
            bin,
            child: None,
            data,
            client_port: 0,
            peer_port: 0,
            tls,
            metrics_port: 0,
        };
        // Ports are picked free and then handed over: another process can take one in
        // between, so a failed start is retried on new ports.
        for attempt in 0..3 {
            etcd.client_port = free_port();
            etcd.peer_port = free_port();
            etcd.metrics_port = free_port();
            if etcd.spawn() {
                return Some(etcd);
            }
            eprintln!("etcd did not start (attempt {attempt}); retrying on other ports");
            let _ = std::fs::remove_dir_all(etcd.data_dir());
        }
        panic!("etcd did not start in 3 attempts");
    }

    fn data_dir(&self) -> PathBuf {
        self.data.path().join("member-data")
    }

    /// Spawns etcd on the chosen ports and data dir; true once it answers `/health`.
    fn spawn(&mut self) -> bool {
        let dir = self.data_dir();
        let _ = std::fs::create_dir_all(&dir);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut command = Command::new(&self.bin);
        if let Some(tls) = &self.tls {
            command
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg(format!("--trusted-ca-file={}", tls.client_ca.display()))
                .arg("--client-cert-auth")
                .arg(format!(
                    "--listen-metrics-urls=http://127.0.0.1:{}",
                    self.metrics_port
                ));
        }
        let child = command
            .arg("--name=axle-test")
            .arg(format!("--data-dir={}", dir.display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=axle-test={peer}"))
            .arg("--initial-cluster-state=new")
            .args([
                "--heartbeat-interval=10",
                "--election-timeout=100",
                "--logger=zap",
                "--log-level=error",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start etcd");
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return false; // exited: a port was taken
            }
            if self.healthy() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        false
    }

    /// Whether etcd answers `GET /health` with `"health":"true"`.
    pub fn healthy(&self) -> bool {
        let port = if self.tls.is_some() {
            self.metrics_port
        } else {
            self.client_port
        };
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if s.write_all(req.as_bytes()).is_err() {
            return false;
        }
        let mut body = String::new();
        let _ = s.read_to_string(&mut body);
        body.contains("\"health\":\"true\"")
    }

    /// `http(s)://127.0.0.1:PORT`, for a raw etcd client.
    pub fn client_url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// `etcd://127.0.0.1:PORT` (TLS is `[discovery.etcd]`'s business, not the URL's).
    pub fn url(&self) -> String {
        format!("etcd://127.0.0.1:{}", self.client_port)
    }

    /// The discovery backend `axle` uses, on this etcd with `config` (credentials, TLS), for
    /// registering or subscribing in-process; a 500 ms resync, so a test sees a change soon
    /// after etcd does. Opened inside `rt`, which must outlive it.
    pub fn backend(
        &self,
        rt: &tokio::runtime::Runtime,
        config: axle::discovery::EtcdConfig,
    ) -> std::sync::Arc<dyn axle::discovery::Backend> {
        use axle::discovery::{self, BackendOptions, RegistryUrl};
        let _in = rt.enter();
        let url = RegistryUrl::parse(&self.url()).expect("etcd url");
        let options = BackendOptions {
            parse_endpoints: axle::manifest::parse_endpoints,
            manifest_endpoints: Default::default(),
            lease_ttl: Duration::from_secs(10),
            resync: Duration::from_millis(500),
            file_poll: Duration::from_millis(100),
            etcd: config,
        };
        discovery::open(&url, options).expect("etcd backend")
    }

    /// A consumer's view of `namespace/service/group` in this (plain, open) etcd.
    pub fn subscribe(
        &self,
        rt: &tokio::runtime::Runtime,
        namespace: &str,
        service: &str,
        group: &str,
    ) -> tokio::sync::watch::Receiver<axle::discovery::Listing> {
        let key = axle::discovery::ServiceKey::new(namespace, service, group).expect("key");
        let backend = self.backend(rt, Default::default());
        // The subscription's watch task is spawned on `rt`.
        let _in = rt.enter();
        backend.subscribe(&key)
    }

    /// Kills etcd (SIGKILL): the registry disappears without a word.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts etcd again on the same ports and data (leases and keys survive).
    pub fn restart(&mut self) {
        self.stop();
        assert!(self.spawn(), "etcd did not come back on its ports");
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An `axle serve` process registered with a registry, killed on drop.
pub struct Provider {
    child: Child,
    /// Where it listens (and is registered).
    pub addr: String,
    /// When the `listening on` line was read.
    pub listening_at: Instant,
    /// When the last `registered` line was read (registration is done).
    pub registered_at: Instant,
    /// The registry keys it printed.
    pub keys: Vec<String>,
    /// Its admin endpoint, when started with `--admin`.
    pub admin: Option<String>,
    /// Later stdout lines.
    pub lines: mpsc::Receiver<String>,
}

impl Provider {
    /// `axle serve --listen 127.0.0.1:0 --registry URL ARGS...`; waits (up to 30 s) for
    /// its three `registered` lines (echo, flaky, kv).
    pub fn start(registry: &str, args: &[&str]) -> Provider {
        let mut child = Command::new(crate::axle_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--registry", registry])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start axle serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let next = |lines: &mpsc::Receiver<String>, child: &mut Child| match lines
            .recv_timeout(Duration::from_secs(30))
        {
            Ok(l) => l,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("axle serve {args:?}: no output ({e})");
            }
        };
        let first = next(&lines, &mut child);
        let Some(addr) = first.strip_prefix("listening on ").map(str::to_string) else {
            let _ = child.kill();
            panic!("axle serve did not start: {first:?}");
        };
        let listening_at = Instant::now();
        let mut keys = Vec::new();
        let mut admin = None;
        while keys.len() < 3 {
            let l = next(&lines, &mut child);
            if let Some(a) = l.strip_prefix("admin on ") {
                admin = Some(a.to_string());
                continue;
            }
            match l.strip_prefix("registered ") {
                Some(k) => keys.push(k.to_string()),
                None => {
                    let _ = child.kill();
                    panic!("axle serve: expected `registered KEY`, got {l:?}");
                }
            }
        }
        Provider {
            child,
            addr,
            listening_at,
            registered_at: Instant::now(),
            keys,
            admin,
            lines,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no deregistration, the lease must run out.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits (up to `timeout`) for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let until = Instant::now() + timeout;
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` every 10 ms until it is true or `timeout` passes; how long it took.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f().then(|| start.elapsed())
}

/// `axle rules COMMAND SERVICE ARGS... --registry URL`, with `stdin` piped in.
pub fn axle_rules(
    etcd: &Etcd,
    command: &str,
    service: &str,
    args: &[&str],
    stdin: &str,
) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(crate::axle_bin())
        .args(["rules", command, service])
        .args(args)
        .args(["--registry", &etcd.url()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run axle rules");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stdin.as_bytes())
        .expect("write the rule");
    child.wait_with_output().expect("axle rules exits")
}

/// `axle rules put SERVICE` of `text`, which must be accepted; the revision it printed.
pub fn put_rule(etcd: &Etcd, service: &str, text: &str) -> i64 {
    let out = axle_rules(etcd, "put", service, &[], text);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "put {text:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("put printed no revision: {stdout:?}"))
}

/// Writes `text` as `service`'s rule straight into etcd, around `axle rules put` and its
/// checks (what a follower must refuse on its own); the revision of the write.
pub fn put_rule_raw(etcd: &Etcd, service: &str, text: &str) -> i64 {
    crate::rt().block_on(async {
        let mut c = etcd_client::Client::connect([etcd.client_url()], None)
            .await
            .expect("raw etcd client");
        let put = c
            .put(format!("/axle/default/rules/{service}"), text, None)
            .await
            .expect("put the rule");
        put.header().expect("a response header").revision()
    })
}
