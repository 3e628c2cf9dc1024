//! `kvidx-zmq-subscriber publish` seen from independent ZMQ peers (the `zeromq` crate): a SUB
//! receives each engine's batches as `[topic, 8-byte sequence from 0, batch]`, in order, and a
//! DEALER on the replay socket gets every batch sent from the asked sequence on, then the end
//! marker, in the `["", topic, seq, batch]` layout.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use zeromq::{DealerSocket, Socket, SocketRecv, SocketSend, SubSocket, ZmqMessage};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the publisher when the test ends, however it ends.
struct Publisher(Child);

impl Drop for Publisher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn batches_go_out_in_sequence_and_the_replay_socket_holds_them() {
    let dir = std::env::temp_dir().join(format!("kvidx-publish-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let workload = dir.join("workload.jsonl");
    let mut f = std::fs::File::create(&workload).unwrap();
    // Worker 7: 20 stores of one block each (3 batches of up to 8); worker 9: one store.
    for i in 0..20u64 {
        writeln!(f, r#"{{"t":{i},"op":"stored","worker":7,"dp_rank":0,"event_id":{i},"parent":null,"blocks":[[{l},{l}]]}}"#, l = 100 + i).unwrap();
    }
    writeln!(f, r#"{{"t":20,"op":"stored","worker":9,"dp_rank":0,"event_id":0,"parent":null,"blocks":[[5,5]]}}"#).unwrap();
    drop(f);
    let (live, replay) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvidx-zmq-subscriber"))
        .args(["publish", "--workload", workload.to_str().unwrap()])
        .args(["--endpoint", &format!("tcp://127.0.0.1:{live}=7")])
        .args(["--replay", &format!("tcp://127.0.0.1:{replay}")])
        .args(["--topic", "kv@test@m", "--max-seconds", "60"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _publisher = Publisher(child);
    // The sockets are bound once the publisher says it waits for a subscriber.
    let mut lines = BufReader::new(stderr).lines();
    let line = lines.next().unwrap().unwrap();
    assert!(
        line.contains("3 batches, waiting for a subscriber"),
        "{line}"
    );
    std::thread::spawn(move || lines.for_each(|l| eprintln!("{}", l.unwrap_or_default())));

    let mut sub = SubSocket::new();
    sub.connect(&format!("tcp://127.0.0.1:{live}"))
        .await
        .unwrap();
    sub.subscribe("kv@").await.unwrap();
    let mut payloads = Vec::new();
    for seq in 0..3u64 {
        let m = sub.recv().await.unwrap().into_vec();
        assert_eq!(m.len(), 3);
        assert_eq!(&m[0][..], b"kv@test@m");
        assert_eq!(&m[1][..], seq.to_be_bytes());
        payloads.push(m[2].clone());
    }
    assert_eq!(payloads[0][0], 0x93, "a 3-element msgpack array");

    let mut dealer = DealerSocket::new();
    dealer
        .connect(&format!("tcp://127.0.0.1:{replay}"))
        .await
        .unwrap();
    let mut request = ZmqMessage::from(Vec::<u8>::new());
    request.push_back(1u64.to_be_bytes().to_vec().into());
    dealer.send(request).await.unwrap();
    for seq in 1..3u64 {
        let m = dealer.recv().await.unwrap().into_vec();
        assert_eq!(m.len(), 4);
        assert!(m[0].is_empty());
        assert_eq!(&m[1][..], b"kv@test@m");
        assert_eq!(&m[2][..], seq.to_be_bytes());
        assert_eq!(m[3], payloads[seq as usize]);
    }
    let end = dealer.recv().await.unwrap().into_vec();
    assert_eq!(&end[2][..], [0xFF; 8], "the end marker");
    std::fs::remove_dir_all(&dir).unwrap();
}
