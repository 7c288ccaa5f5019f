//! The second peer of `axle bench rpc`: a unary echo over tarpc, a Rust RPC framework
//! with its own binary protocol (bincode frames, length-delimited, over TCP), on
//! loopback.
//!
//! Where tonic pays for HTTP/2 (headers, trailers, flow control), tarpc is closer to
//! Axle's shape: one TCP connection multiplexing requests by id, a binary header and the
//! payload. The payload crosses as `Bytes` (bincode writes it as a length and the bytes),
//! so neither side serializes anything but the envelope, as with tonic and Axle.

use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;
use futures::{future, StreamExt};
use tarpc::context;
use tarpc::server::incoming::{spawn_incoming, Incoming};
use tarpc::server::BaseChannel;
use tarpc::tokio_serde::formats::Bincode;

/// The benchmark's one method, as a tarpc service.
#[tarpc::service]
pub trait Echo {
    /// Returns its argument.
    async fn echo(body: Bytes) -> Bytes;
}

/// The server side: the request is the response.
#[derive(Clone, Copy)]
struct EchoServer;

impl Echo for EchoServer {
    async fn echo(self, _: context::Context, body: Bytes) -> Bytes {
        body
    }
}

/// Axle and tonic accept any payload the benchmark picks; tarpc's length-delimited
/// framing refuses frames over 8 MiB by default, so both sides lift the cap.
const MAX_FRAME: usize = usize::MAX;

/// Starts a tarpc server answering `echo`, on 127.0.0.1:0; the returned task runs it
/// until aborted.
pub async fn start_server() -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let mut listener =
        tarpc::serde_transport::tcp::listen((Ipv4Addr::LOCALHOST, 0), Bincode::default).await?;
    listener.config_mut().max_frame_length(MAX_FRAME);
    let addr = listener.local_addr();
    let channels = listener
        .filter_map(|accepted| future::ready(accepted.ok()))
        .map(|transport| {
            // tarpc leaves accepted sockets with Nagle on; Axle's and tonic's are NODELAY.
            let _ = transport.get_ref().set_nodelay(true);
            BaseChannel::with_defaults(transport)
        });
    let task = tokio::spawn(spawn_incoming(channels.execute(EchoServer.serve())));
    Ok((addr, task))
}

/// A client over ONE connection; clones share it (tarpc multiplexes requests by id).
pub async fn connect(addr: SocketAddr) -> std::io::Result<EchoClient> {
    let mut connecting = tarpc::serde_transport::tcp::connect(addr, Bincode::default);
    connecting.config_mut().max_frame_length(MAX_FRAME);
    let transport = connecting.await?;
    // Nagle would hold back small requests; Axle's and tonic's sockets are NODELAY.
    transport.get_ref().set_nodelay(true)?;
    let mut config = tarpc::client::Config::default();
    // The benchmark's highest concurrency is 256: never queue a call behind the cap.
    config.max_in_flight_requests = 4096;
    Ok(EchoClient::new(config, transport).spawn())
}

/// One call with tarpc's default deadline (10 s).
pub async fn echo(client: &EchoClient, body: Bytes) -> Result<Bytes, String> {
    client
        .echo(context::current(), body)
        .await
        .map_err(|e| format!("tarpc echo: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn echoes_payloads_and_concurrent_calls() {
        let (addr, server) = start_server().await.expect("server starts");
        let client = connect(addr).await.expect("client connects");
        for len in [0usize, 1024, 100 * 1024, 9 << 20] {
            let body: Bytes = (0..len).map(|i| (i % 251) as u8).collect();
            let back = echo(&client, body.clone()).await.expect("echo");
            assert_eq!(back, body, "{len}-byte payload");
        }
        // 64 concurrent calls from clones of one client: one connection.
        let calls = (0..64u32).map(|i| {
            let c = client.clone();
            tokio::spawn(async move {
                let body = Bytes::from(format!("call {i}").repeat(i as usize + 1));
                assert_eq!(echo(&c, body.clone()).await.expect("echo"), body);
            })
        });
        for call in futures::future::join_all(calls).await {
            call.expect("task did not panic");
        }
        server.abort();
    }
}
