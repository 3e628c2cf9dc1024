//! The replay client: asks an engine's ROUTER replay socket for every buffered batch from a
//! sequence number on, as a DEALER (`["", start_seq]`), and reads the replies until the end
//! marker. Understands both reply layouts: vLLM >= 0.26 / SGLang `["", topic, seq, payload]`
//! and older vLLM `["", seq, payload]`.

use std::time::Duration;

use bytes::Bytes;
use kvidx::engine::{parse_seq_frame, REPLAY_END_SEQ};
use zeromq::{DealerSocket, SocketRecv, SocketSend, ZmqMessage};

/// One replayed batch: its sequence number and payload.
pub struct Replayed {
    /// The batch's sequence number.
    pub seq: u64,
    /// The msgpack payload.
    pub payload: Bytes,
}

/// Requests the batches from `start_seq` on and returns them in the order received.
/// The replay may start later than asked (the buffer no longer holds the range): the
/// caller checks the first sequence number.
pub async fn fetch(
    dealer: &mut DealerSocket,
    start_seq: u64,
    wait: Duration,
) -> Result<Vec<Replayed>, String> {
    let mut request = ZmqMessage::from(Vec::<u8>::new());
    request.push_back(Bytes::copy_from_slice(&start_seq.to_be_bytes()));
    dealer
        .send(request)
        .await
        .map_err(|e| format!("replay request: {e}"))?;
    let mut out = Vec::new();
    loop {
        let reply = tokio::time::timeout(wait, dealer.recv())
            .await
            .map_err(|_| "replay: no end marker in time".to_string())?
            .map_err(|e| format!("replay: {e}"))?;
        let mut frames = reply.into_vec();
        if frames.first().is_some_and(|f| f.is_empty()) {
            frames.remove(0);
        }
        let (seq_frame, payload) = match frames.len() {
            3 => (frames[1].clone(), frames[2].clone()),
            2 => (frames[0].clone(), frames[1].clone()),
            n => return Err(format!("replay: reply of {n} frames")),
        };
        let seq = parse_seq_frame(&seq_frame).ok_or("replay: sequence frame is not 8 bytes")?;
        if seq == REPLAY_END_SEQ {
            return Ok(out);
        }
        out.push(Replayed { seq, payload });
    }
}
