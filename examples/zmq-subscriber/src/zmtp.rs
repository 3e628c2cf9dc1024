//! A minimal ZMTP 3.0 peer over TCP (NULL security): what the subscriber needs of a SUB
//! socket (subscribe, receive) and of a DEALER (send a request, receive replies), and what the
//! `publish` mode needs of a PUB and a ROUTER on accepted connections; one peer per
//! connection, with every frame and message bounded in size.
//!
//! Why not a general ZMQ library: a peer announces each frame's length before its bytes, and
//! the pure-Rust `zeromq` crate (0.7) reserves the announced length up front, so one hostile
//! or corrupt header (say 1 TiB) aborts the process on the failed allocation. Here a frame
//! longer than [`Limits::max_frame`] (or a message beyond [`Limits::max_message`]) is an error
//! before anything is allocated, and a frame's buffer grows only with the bytes received.
//!
//! Not cancel-safe: after a timeout around [`Connection::recv`] the stream may be mid-frame;
//! drop the connection (the subscriber connects again).

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Bounds on what a peer may send.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest frame, in bytes.
    pub max_frame: u64,
    /// Largest message (all its frames), in bytes.
    pub max_message: u64,
    /// Most frames in one message.
    pub max_frames: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame: 64 << 20,
            max_message: 64 << 20,
            max_frames: 16,
        }
    }
}

/// The socket type this side announces, and the peer types it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketType {
    /// A subscriber: the peer must be a PUB or XPUB.
    Sub,
    /// A DEALER: the peer must be a ROUTER (an engine's replay socket).
    Dealer,
    /// A publisher (the `publish` mode's engine side): the peer must be a SUB or XSUB.
    Pub,
    /// A ROUTER (the `publish` mode's replay socket): the peer must be a DEALER or REQ.
    Router,
}

impl SocketType {
    fn name(self) -> &'static [u8] {
        match self {
            SocketType::Sub => b"SUB",
            SocketType::Dealer => b"DEALER",
            SocketType::Pub => b"PUB",
            SocketType::Router => b"ROUTER",
        }
    }

    fn accepts(self, peer: &[u8]) -> bool {
        match self {
            SocketType::Sub => peer == b"PUB" || peer == b"XPUB",
            SocketType::Dealer => peer == b"ROUTER" || peer == b"DEALER",
            SocketType::Pub => peer == b"SUB" || peer == b"XSUB",
            SocketType::Router => peer == b"DEALER" || peer == b"REQ",
        }
    }
}

const FLAG_MORE: u8 = 0x01;
const FLAG_LONG: u8 = 0x02;
const FLAG_COMMAND: u8 = 0x04;
/// Commands of the handshake and heartbeats are small; a longer one is not ZMTP.
const MAX_COMMAND: u64 = 4096;

/// One ZMTP connection to one peer.
pub struct Connection {
    stream: BufReader<TcpStream>,
    limits: Limits,
}

/// The 64-byte ZMTP 3.0 greeting of a NULL-security client.
fn greeting() -> [u8; 64] {
    let mut g = [0u8; 64];
    g[0] = 0xFF;
    g[9] = 0x7F;
    g[10] = 3; // version 3.0
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// Encodes a command frame (short or long form).
fn command_frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 9);
    if body.len() <= 255 {
        out.extend_from_slice(&[FLAG_COMMAND, body.len() as u8]);
    } else {
        out.push(FLAG_COMMAND | FLAG_LONG);
        out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// Encodes a command: its name, then its data.
fn command(name: &[u8], data: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(1 + name.len() + data.len());
    body.push(name.len() as u8);
    body.extend_from_slice(name);
    body.extend_from_slice(data);
    command_frame(&body)
}

/// Splits a command body into its name and data.
fn parse_command(body: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let n = *body.first().ok_or("empty command")? as usize;
    if body.len() < 1 + n {
        return Err("truncated command name".into());
    }
    Ok((&body[1..1 + n], &body[1 + n..]))
}

/// Finds a property's value in READY data: `[name len u8][name][value len u32 BE][value]...`.
fn property<'a>(mut data: &'a [u8], wanted: &[u8]) -> Result<Option<&'a [u8]>, String> {
    while !data.is_empty() {
        let n = data[0] as usize;
        if data.len() < 1 + n + 4 {
            return Err("truncated READY property".into());
        }
        let name = &data[1..1 + n];
        let v = u32::from_be_bytes(data[1 + n..5 + n].try_into().unwrap()) as usize;
        let rest = &data[5 + n..];
        if rest.len() < v {
            return Err("truncated READY property value".into());
        }
        if name.eq_ignore_ascii_case(wanted) {
            return Ok(Some(&rest[..v]));
        }
        data = &rest[v..];
    }
    Ok(None)
}

/// `tcp://host:port` -> `host:port`.
fn tcp_address(endpoint: &str) -> Result<&str, String> {
    endpoint
        .strip_prefix("tcp://")
        .filter(|a| a.contains(':') && !a.starts_with('*'))
        .ok_or_else(|| format!("{endpoint}: not a tcp://host:port endpoint"))
}

impl Connection {
    /// Connects to `endpoint` (`tcp://host:port`) and completes the ZMTP handshake (greeting,
    /// READY both ways) within `timeout`. Fails on anything that is not a ZMTP 3 peer of a
    /// type `socket_type` talks to (raw TCP junk included).
    pub async fn connect(
        endpoint: &str,
        socket_type: SocketType,
        limits: Limits,
        timeout: Duration,
    ) -> Result<Connection, String> {
        let address = tcp_address(endpoint)?;
        let handshake = async {
            let stream = TcpStream::connect(address)
                .await
                .map_err(|e| e.to_string())?;
            Self::handshake(stream, socket_type, limits).await
        };
        tokio::time::timeout(timeout, handshake)
            .await
            .map_err(|_| format!("{endpoint}: no ZMTP handshake within {timeout:?}"))?
            .map_err(|e| format!("{endpoint}: {e}"))
    }

    /// Completes the ZMTP handshake on a connection a listener accepted, within `timeout`
    /// (the greeting and READY are the same both ways with NULL security).
    pub async fn accept(
        stream: TcpStream,
        socket_type: SocketType,
        limits: Limits,
        timeout: Duration,
    ) -> Result<Connection, String> {
        tokio::time::timeout(timeout, Self::handshake(stream, socket_type, limits))
            .await
            .map_err(|_| format!("no ZMTP handshake within {timeout:?}"))?
    }

    /// Greeting and READY both ways on a fresh TCP connection.
    async fn handshake(
        stream: TcpStream,
        socket_type: SocketType,
        limits: Limits,
    ) -> Result<Connection, String> {
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let mut c = Connection {
            stream: BufReader::new(stream),
            limits,
        };
        c.write(&greeting()).await?;
        let mut peer = [0u8; 64];
        c.stream
            .read_exact(&mut peer)
            .await
            .map_err(|e| format!("greeting: {e}"))?;
        if peer[0] != 0xFF || peer[9] & 1 != 1 {
            return Err("not a ZMTP peer (bad greeting signature)".to_string());
        }
        if peer[10] < 3 {
            return Err(format!("ZMTP version {}.{} (need 3)", peer[10], peer[11]));
        }
        if &peer[12..16] != b"NULL" || peer[16..32].iter().any(|&b| b != 0) {
            return Err("the peer wants a security mechanism other than NULL".to_string());
        }
        let mut ready = vec![11u8];
        ready.extend_from_slice(b"Socket-Type");
        ready.extend_from_slice(&(socket_type.name().len() as u32).to_be_bytes());
        ready.extend_from_slice(socket_type.name());
        c.write(&command(b"READY", &ready)).await?;
        let (flags, body) = c.read_frame(limits.max_frame).await?;
        if flags & FLAG_COMMAND == 0 {
            return Err("expected READY, got a message".to_string());
        }
        let (name, data) = parse_command(&body)?;
        if name == b"ERROR" {
            return Err(format!(
                "the peer refused: {}",
                String::from_utf8_lossy(data)
            ));
        }
        if name != b"READY" {
            return Err(format!(
                "expected READY, got {}",
                String::from_utf8_lossy(name)
            ));
        }
        let peer_type = property(data, b"Socket-Type")?.unwrap_or_default();
        if !socket_type.accepts(peer_type) {
            return Err(format!(
                "a {} peer cannot talk to a {}",
                String::from_utf8_lossy(peer_type),
                String::from_utf8_lossy(socket_type.name())
            ));
        }
        Ok(c)
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .get_mut()
            .write_all(bytes)
            .await
            .map_err(|e| e.to_string())
    }

    /// Subscribes to messages whose first frame starts with `topic` (a ZMTP 3.0 subscription
    /// message, which ZMTP 3.1 publishers accept too).
    pub async fn subscribe(&mut self, topic: &[u8]) -> Result<(), String> {
        let mut m = Vec::with_capacity(1 + topic.len());
        m.push(1);
        m.extend_from_slice(topic);
        self.send(&[&m]).await
    }

    /// Sends one message.
    pub async fn send(&mut self, frames: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            let more = if i + 1 < frames.len() { FLAG_MORE } else { 0 };
            if f.len() <= 255 {
                out.extend_from_slice(&[more, f.len() as u8]);
            } else {
                out.push(more | FLAG_LONG);
                out.extend_from_slice(&(f.len() as u64).to_be_bytes());
            }
            out.extend_from_slice(f);
        }
        self.write(&out).await
    }

    /// Reads one frame, refusing lengths over the frame limit, or over `budget` (what is left
    /// of the message limit), before allocating; the buffer grows with the bytes received.
    async fn read_frame(&mut self, budget: u64) -> Result<(u8, Bytes), String> {
        let flags = self.stream.read_u8().await.map_err(|e| e.to_string())?;
        if flags & !(FLAG_MORE | FLAG_LONG | FLAG_COMMAND) != 0 {
            return Err(format!("bad frame flags {flags:#04x}"));
        }
        let len = if flags & FLAG_LONG != 0 {
            self.stream.read_u64().await.map_err(|e| e.to_string())?
        } else {
            u64::from(self.stream.read_u8().await.map_err(|e| e.to_string())?)
        };
        let limit = if flags & FLAG_COMMAND != 0 {
            MAX_COMMAND
        } else {
            self.limits.max_frame
        };
        if len > limit {
            return Err(format!("a frame of {len} bytes (limit {limit})"));
        }
        if flags & FLAG_COMMAND == 0 && len > budget {
            return Err(format!(
                "a message over the limits ({} bytes at most)",
                self.limits.max_message
            ));
        }
        let mut buf = Vec::new();
        (&mut self.stream)
            .take(len)
            .read_to_end(&mut buf)
            .await
            .map_err(|e| e.to_string())?;
        if buf.len() as u64 != len {
            return Err("connection closed in the middle of a frame".into());
        }
        Ok((flags, Bytes::from(buf)))
    }

    /// Receives the next message (its frames), answering PINGs and skipping other commands.
    /// Fails on a closed connection, malformed framing, an ERROR command or a message over
    /// the limits.
    pub async fn recv(&mut self) -> Result<Vec<Bytes>, String> {
        let mut frames = Vec::new();
        let mut total = 0u64;
        loop {
            let budget = self.limits.max_message - total;
            let (flags, body) = self.read_frame(budget).await?;
            if flags & FLAG_COMMAND != 0 {
                if !frames.is_empty() {
                    return Err("a command inside a message".into());
                }
                let (name, data) = parse_command(&body)?;
                match name {
                    b"PING" if data.len() >= 2 => {
                        let pong = command(b"PONG", &data[2..]);
                        self.write(&pong).await?;
                    }
                    b"ERROR" => {
                        return Err(format!("peer error: {}", String::from_utf8_lossy(data)))
                    }
                    _ => {}
                }
                continue;
            }
            total += body.len() as u64; // within max_message: read_frame checked the budget
            if frames.len() == self.limits.max_frames {
                return Err(format!(
                    "a message over the limits ({} frames at most)",
                    self.limits.max_frames
                ));
            }
            frames.push(body);
            if flags & FLAG_MORE == 0 {
                return Ok(frames);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use zeromq::{PubSocket, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

    fn limits() -> Limits {
        Limits {
            max_frame: 1 << 20,
            max_message: 2 << 20,
            max_frames: 8,
        }
    }

    #[tokio::test]
    async fn subscribes_to_a_zeromq_publisher() {
        let mut publisher = PubSocket::new();
        let endpoint = publisher
            .bind("tcp://127.0.0.1:0")
            .await
            .unwrap()
            .to_string();
        let mut c =
            Connection::connect(&endpoint, SocketType::Sub, limits(), Duration::from_secs(5))
                .await
                .unwrap();
        c.subscribe(b"kv@").await.unwrap();
        let big = vec![7u8; 70_000]; // a long frame
        let mut got = None;
        for _ in 0..200 {
            // PUB drops messages until the subscription arrives.
            let mut m = ZmqMessage::from(Bytes::from_static(b"kv@a"));
            m.push_back(Bytes::copy_from_slice(&5u64.to_be_bytes()));
            m.push_back(Bytes::from(big.clone()));
            publisher.send(m).await.unwrap();
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(20), c.recv()).await {
                got = Some(r.unwrap());
                break;
            }
        }
        let frames = got.expect("no message in 4 s");
        assert_eq!(frames.len(), 3);
        assert_eq!(&frames[0][..], b"kv@a");
        assert_eq!(frames[2].len(), 70_000);
    }

    #[tokio::test]
    async fn talks_to_a_zeromq_router() {
        let mut router = RouterSocket::new();
        let endpoint = router.bind("tcp://127.0.0.1:0").await.unwrap().to_string();
        let mut c = Connection::connect(
            &endpoint,
            SocketType::Dealer,
            limits(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        c.send(&[b"", b"12345678"]).await.unwrap();
        let request = router.recv().await.unwrap().into_vec();
        assert_eq!(
            &request[1..],
            [Bytes::new(), Bytes::from_static(b"12345678")]
        );
        let mut reply = ZmqMessage::from(request[0].clone());
        reply.push_back(Bytes::new());
        reply.push_back(Bytes::from_static(b"ok"));
        router.send(reply).await.unwrap();
        let frames = c.recv().await.unwrap();
        assert_eq!(frames, [Bytes::new(), Bytes::from_static(b"ok")]);
        // A SUB refuses a ROUTER.
        let err = Connection::connect(&endpoint, SocketType::Sub, limits(), Duration::from_secs(5))
            .await
            .err()
            .unwrap();
        assert!(err.contains("a ROUTER peer cannot talk to a SUB"), "{err}");
    }

    /// A fake PUB on a raw socket: completes the handshake (reading the client's READY, so
    /// that closing does not reset the connection), runs `then` on the stream, and keeps it
    /// open a moment.
    fn fake_publisher(then: impl FnOnce(&mut std::net::TcpStream) + Send + 'static) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("tcp://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut g = greeting();
            g[11] = 1; // 3.1
            s.write_all(&g).unwrap();
            let mut peer = [0u8; 64];
            s.read_exact(&mut peer).unwrap();
            let mut ready = vec![11u8];
            ready.extend_from_slice(b"Socket-Type");
            ready.extend_from_slice(&3u32.to_be_bytes());
            ready.extend_from_slice(b"PUB");
            s.write_all(&command(b"READY", &ready)).unwrap();
            let mut header = [0u8; 2];
            s.read_exact(&mut header).unwrap();
            let mut body = vec![0u8; header[1] as usize];
            s.read_exact(&mut body).unwrap();
            assert_eq!(&body[..6], b"\x05READY");
            then(&mut s);
            std::thread::sleep(Duration::from_secs(1));
        });
        endpoint
    }

    #[tokio::test]
    async fn a_huge_announced_frame_is_refused_without_allocating_it() {
        let endpoint = fake_publisher(|s| {
            let mut header = vec![FLAG_LONG];
            header.extend_from_slice(&(1u64 << 40).to_be_bytes()); // 1 TiB
            let _ = s.write_all(&header);
        });
        let mut c =
            Connection::connect(&endpoint, SocketType::Sub, limits(), Duration::from_secs(5))
                .await
                .unwrap();
        let err = c.recv().await.err().unwrap();
        assert!(
            err.contains("a frame of 1099511627776 bytes (limit 1048576)"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn messages_over_the_limits_and_bad_framing_are_refused() {
        // Three frames of 1 MiB: the message would exceed 2 MiB (refused at the third header).
        let endpoint = fake_publisher(|s| {
            for i in 0..3 {
                let more = if i < 2 { FLAG_MORE } else { 0 };
                let mut f = vec![more | FLAG_LONG];
                f.extend_from_slice(&(1u64 << 20).to_be_bytes());
                f.resize(9 + (1 << 20), 0);
                if s.write_all(&f).is_err() {
                    return;
                }
            }
        });
        let mut c =
            Connection::connect(&endpoint, SocketType::Sub, limits(), Duration::from_secs(5))
                .await
                .unwrap();
        let err = c.recv().await.err().unwrap();
        assert!(err.contains("a message over the limits"), "{err}");

        let endpoint = fake_publisher(|s| {
            let _ = s.write_all(&[0x40, 1, 0]);
        });
        let mut c =
            Connection::connect(&endpoint, SocketType::Sub, limits(), Duration::from_secs(5))
                .await
                .unwrap();
        assert!(c.recv().await.err().unwrap().contains("bad frame flags"));

        // Nine one-byte frames: more than 8 frames.
        let endpoint = fake_publisher(|s| {
            let mut m = Vec::new();
            for i in 0..9 {
                m.extend_from_slice(&[if i < 8 { FLAG_MORE } else { 0 }, 1, b'x']);
            }
            let _ = s.write_all(&m);
        });
        let mut c =
            Connection::connect(&endpoint, SocketType::Sub, limits(), Duration::from_secs(5))
                .await
                .unwrap();
        let err = c.recv().await.err().unwrap();
        assert!(err.contains("8 frames at most"), "{err}");
    }

    #[tokio::test]
    async fn raw_tcp_junk_and_silence_fail_the_handshake() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("tcp://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut junk, _) = listener.accept().unwrap();
            let _ = junk.write_all(&[b'x'; 64]);
            let (_silent, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_secs(3));
        });
        let err = Connection::connect(&endpoint, SocketType::Sub, limits(), Duration::from_secs(5))
            .await
            .err()
            .unwrap();
        assert!(err.contains("bad greeting signature"), "{err}");
        let err = Connection::connect(
            &endpoint,
            SocketType::Sub,
            limits(),
            Duration::from_millis(300),
        )
        .await
        .err()
        .unwrap();
        assert!(err.contains("no ZMTP handshake within 300ms"), "{err}");
    }
}
