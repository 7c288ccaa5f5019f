//! A headless browser for the dashboard test: Debian's `chromium` driven through
//! `chromedriver` over the W3C WebDriver protocol (HTTP and JSON, a handful of
//! endpoints: new session, navigate, execute script, delete session) over a plain
//! `TcpStream`. The driver is started on a free port and killed on drop.
//!
//! `.ci/run` installs `chromium` and `chromium-driver`, so CI always runs the test;
//! elsewhere, without them on PATH (or `$CHROMEDRIVER` / `$CHROME_BIN`), it is skipped
//! with a message saying so. With `CI` set, a missing browser fails instead, as a missing
//! etcd does (`etcd.rs`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long the driver may take to answer its first `/status`.
const DRIVER_START: Duration = Duration::from_secs(30);

/// How long one WebDriver command may take (a navigation waits for the page's load).
const COMMAND: Duration = Duration::from_secs(60);

/// One HTTP/1.1 exchange with the driver: (status, body). The body is read by its
/// `Content-Length`: chromedriver says `Connection: close` but keeps the connection open.
fn exchange(addr: &str, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(COMMAND))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("not an HTTP status line: {line:?}")))?;
    let mut length = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("bad Content-Length: {line:?}")))?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// The first of `names` on PATH, or the file `env` names.
fn find(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| p.is_file())
}

/// A browser session, with its driver process.
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
}

impl Browser {
    /// Starts chromedriver and a headless chromium session, or returns `None` (after
    /// saying why) when they are not installed and this is not CI.
    pub fn start_or_skip(test: &str) -> Option<Browser> {
        let driver = find("CHROMEDRIVER", &["chromedriver"]);
        let chrome = find(
            "CHROME_BIN",
            &["chromium", "chromium-browser", "google-chrome"],
        );
        let (Some(driver), Some(chrome)) = (driver, chrome) else {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: chromium or chromedriver is not installed, and CI must run the \
                 browser tests (.ci/run installs chromium and chromium-driver)"
            );
            eprintln!(
                "SKIPPED {test}: no `chromium` and `chromedriver` on PATH (apt-get install \
                 chromium chromium-driver, or set CHROME_BIN and CHROMEDRIVER)"
            );
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port");
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", driver.display()));
        let mut browser = Browser {
            driver: child,
            addr: format!("127.0.0.1:{port}"),
            session: String::new(),
        };
        browser.wait_ready();
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chrome,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage"],
            },
        }}});
        let answer = browser.command("POST", "/session", &caps);
        browser.session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {answer}"))
            .to_string();
        Some(browser)
    }

    /// Polls the driver's `/status` until it says it is ready.
    fn wait_ready(&mut self) {
        let start = Instant::now();
        loop {
            if let Ok((_, body)) = exchange(&self.addr, "GET", "/status", "") {
                let ready =
                    serde_json::from_str::<Value>(&body).is_ok_and(|v| v["value"]["ready"] == true);
                if ready {
                    return;
                }
            }
            if let Ok(Some(status)) = self.driver.try_wait() {
                panic!("chromedriver exited at start: {status}");
            }
            assert!(
                start.elapsed() < DRIVER_START,
                "chromedriver not ready within {DRIVER_START:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One WebDriver command; its `value`, or a panic naming the driver's error.
    fn command(&self, method: &str, path: &str, body: &Value) -> Value {
        let (status, answer) = exchange(&self.addr, method, path, &body.to_string())
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        let v: Value = serde_json::from_str(&answer)
            .unwrap_or_else(|_| panic!("WebDriver {method} {path}: {answer}"));
        assert!(
            status == 200,
            "WebDriver {method} {path}: {status} {}",
            v["value"]
        );
        v["value"].clone()
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        let path = format!("/session/{}/url", self.session);
        self.command("POST", &path, &json!({ "url": url }));
    }

    /// Runs `script` (a function body: `return ...`) in the page; what it returns.
    pub fn execute(&self, script: &str) -> Value {
        let path = format!("/session/{}/execute/sync", self.session);
        self.command("POST", &path, &json!({ "script": script, "args": [] }))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = exchange(&self.addr, "DELETE", &path, "");
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
