//! HTTP for the gateway and sidecar tests: a minimal HTTP/1.1 client over a std
//! `TcpStream` (one request per connection, `Connection: close`), and a process (`axle
//! gateway`, `axle sidecar`, an example application) that prints its address first,
//! killed on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// An HTTP answer.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpAnswer {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics with the body if it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// `error.class` of a JSON error body.
    pub fn error_class(&self) -> String {
        self.json()["error"]["class"]
            .as_str()
            .unwrap_or_else(|| panic!("no error.class in {:?}", self.body))
            .to_string()
    }
}

/// Sends one request to `addr` and reads the whole answer.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<HttpAnswer> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    // A server may answer (413) before reading all of a large body and close: what it
    // answered is what counts.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => return Err(e),
    }
    parse(&raw)
}

/// `POST path` with a JSON body.
pub fn post(addr: &str, path: &str, headers: &[(&str, &str)], body: &str) -> HttpAnswer {
    request(addr, "POST", path, headers, body.as_bytes())
        .unwrap_or_else(|e| panic!("POST {path} to {addr}: {e}"))
}

fn parse(raw: &[u8]) -> std::io::Result<HttpAnswer> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad("no header end"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(HttpAnswer {
        status,
        headers,
        body: body.to_string(),
    })
}

/// An `axle SUBCOMMAND ARGS...` process that prints `listening on ADDR` first.
pub struct AxleProcess {
    child: Child,
    pub addr: String,
    /// Its later stdout lines.
    pub lines: mpsc::Receiver<String>,
}

impl AxleProcess {
    /// Starts it and waits (up to 60 s: plugins may compile) for its address.
    pub fn start(args: &[&str]) -> AxleProcess {
        let mut cmd = Command::new(crate::axle_bin());
        cmd.args(args);
        AxleProcess::spawn(cmd, "listening on ")
    }

    /// Starts `cmd` (any program) and waits for its first line, `PREFIX ADDR`.
    pub fn spawn(mut cmd: Command, prefix: &str) -> AxleProcess {
        let args = format!("{cmd:?}");
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {args}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines.recv_timeout(Duration::from_secs(60));
        let Some(addr) = first
            .as_deref()
            .ok()
            .and_then(|l| l.strip_prefix(prefix))
            .map(str::to_string)
        else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args} did not start: {first:?}");
        };
        AxleProcess { child, addr, lines }
    }

    /// The next stdout line starting with `prefix` (up to `timeout`), without it.
    pub fn line_starting(&self, prefix: &str, timeout: Duration) -> Option<String> {
        let until = std::time::Instant::now() + timeout;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            let line = self.lines.recv_timeout(left).ok()?;
            if let Some(rest) = line.strip_prefix(prefix) {
                return Some(rest.to_string());
            }
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, reaped.
    pub fn kill_9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits (up to `timeout`) for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let until = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for AxleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
