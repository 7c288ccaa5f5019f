//! The gRPC baseline of `axle bench rpc`: a unary echo over tonic (HTTP/2) on loopback.
//!
//! What `tonic-build` would generate from
//! `service Echo { rpc Echo(bytes) returns (bytes); }` (package `axle.bench`) is written
//! out by hand here, so no protoc / prost is needed. The codec passes [`Bytes`] through
//! unchanged, so neither side serializes anything: the comparison with Axle is fair — same
//! payload bytes, same loopback, one connection, and the gRPC stack's own cost (HTTP/2
//! framing, the 5-byte gRPC message prefix, headers and trailers) is all that is measured.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::BoxFuture;
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};

/// The gRPC service name (`package.Service`), as generated code would spell it.
const SERVICE: &str = "axle.bench.Echo";
/// The one method's route.
const ECHO_PATH: &str = "/axle.bench.Echo/Echo";
/// tonic refuses to decode messages over 4 MiB by default; the benchmark picks payload
/// sizes, so the baseline must not fail where Axle would not. Both sides lift the cap.
const MAX_MESSAGE: usize = usize::MAX;

// ---- codec -------------------------------------------------------------------------

/// A codec for opaque bytes: what prost would be, minus the serialization.
#[derive(Clone, Copy, Debug, Default)]
struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;

    fn encoder(&mut self) -> Self::Encoder {
        BytesCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    /// Copies the payload into tonic's frame buffer (the one copy any codec makes).
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    /// Takes the whole message; `copy_to_bytes` on tonic's `BytesMut` is a split, not a copy.
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

// ---- server ------------------------------------------------------------------------

/// The `Echo` method's handler: the request message is the response message.
struct EchoMethod;

impl UnaryService<Bytes> for EchoMethod {
    type Response = Bytes;
    type Future = std::future::Ready<Result<Response<Bytes>, Status>>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        std::future::ready(Ok(Response::new(request.into_inner())))
    }
}

/// The service as generated server code shapes it: route by path, hand the request to
/// `tonic::server::Grpc`, answer `UNIMPLEMENTED` for any other method.
#[derive(Clone, Copy, Debug, Default)]
struct EchoServer;

impl NamedService for EchoServer {
    const NAME: &'static str = SERVICE;
}

impl<B> tower::Service<http::Request<B>> for EchoServer
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != ECHO_PATH {
            let status = Status::unimplemented(format!("no method {}", req.uri().path()));
            return Box::pin(std::future::ready(Ok(status.into_http())));
        }
        Box::pin(async move {
            let mut grpc = Grpc::new(BytesCodec).max_decoding_message_size(MAX_MESSAGE);
            Ok(grpc.unary(EchoMethod, req).await)
        })
    }
}

/// Starts a tonic server with one unary method `/axle.bench.Echo/Echo` that returns its
/// request bytes. Binds 127.0.0.1:0; the returned task runs the server until aborted.
pub async fn start_server() -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    // Nagle would hold back small responses; Axle's sockets are NODELAY too.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let task = tokio::spawn(async move {
        if let Err(e) = Server::builder()
            .add_service(EchoServer)
            .serve_with_incoming(incoming)
            .await
        {
            tracing::warn!("tonic echo server stopped: {}", chain(&e));
        }
    });
    Ok((addr, task))
}

// ---- client ------------------------------------------------------------------------

/// A client over ONE HTTP/2 connection. Clones share the connection (a `Channel` is a
/// handle to one multiplexed connection), so many tasks can call concurrently, each call
/// being its own HTTP/2 stream, as gRPC clients are normally used.
#[derive(Clone, Debug)]
pub struct EchoClient {
    inner: tonic::client::Grpc<Channel>,
}

impl EchoClient {
    /// Opens the connection now (not lazily), so the first timed call does not pay for it.
    pub async fn connect(addr: SocketAddr) -> Result<EchoClient, String> {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| chain(&e))?
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(|e| format!("connecting to {addr}: {}", chain(&e)))?;
        let inner = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_MESSAGE);
        Ok(EchoClient { inner })
    }

    /// One unary call: sends `body`, returns what the server sent back.
    pub async fn echo(&mut self, body: Bytes) -> Result<Bytes, String> {
        self.inner
            .ready()
            .await
            .map_err(|e| format!("channel not ready: {}", chain(&e)))?;
        let path = PathAndQuery::from_static(ECHO_PATH);
        let response = self
            .inner
            .unary(Request::new(body), path, BytesCodec)
            .await
            .map_err(|s| format!("echo failed: {s}"))?;
        Ok(response.into_inner())
    }
}

/// An error with its sources: tonic's transport errors say little at the top level
/// ("transport error") and put the cause underneath.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn echoes_payloads_and_concurrent_calls() {
        let (addr, server) = start_server().await.expect("server starts");
        let mut client = EchoClient::connect(addr).await.expect("client connects");

        for len in [0usize, 1024, 100 * 1024] {
            let body: Bytes = (0..len).map(|i| (i % 251) as u8).collect();
            let back = client.echo(body.clone()).await.expect("echo");
            assert_eq!(back, body, "{len}-byte payload");
        }

        // 64 concurrent calls from clones of one client, i.e. streams on one connection.
        let calls = (0..64u32).map(|i| {
            let mut c = client.clone();
            tokio::spawn(async move {
                let body = Bytes::from(format!("call {i}").repeat(i as usize + 1));
                let back = c.echo(body.clone()).await.expect("concurrent echo");
                assert_eq!(back, body);
            })
        });
        for call in futures::future::join_all(calls).await {
            call.expect("task did not panic");
        }

        // Any other method is UNIMPLEMENTED, as generated servers answer.
        let mut raw = client.inner.clone();
        raw.ready().await.unwrap();
        let err = raw
            .unary(
                Request::new(Bytes::new()),
                PathAndQuery::from_static("/axle.bench.Echo/Nope"),
                BytesCodec,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unimplemented);

        server.abort();
    }
}
