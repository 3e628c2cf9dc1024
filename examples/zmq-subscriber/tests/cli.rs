//! The command line of `kvidx-zmq-subscriber`: `--help` (or `-h`) prints the usage on stdout
//! and exits 0, in the subscriber, bridge and publish modes; a bad argument is still an
//! error (the usage on stderr, exit status 2).

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvidx-zmq-subscriber"))
        .args(args)
        .output()
        .expect("run kvidx-zmq-subscriber")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_prints_the_usage_on_stdout_and_exits_0() {
    let cases: [(&[&str], &str); 5] = [
        (&["--help"], "usage: kvidx-zmq-subscriber --endpoint URL"),
        (&["-h"], "usage: kvidx-zmq-subscriber --endpoint URL"),
        (
            &["bridge", "--help"],
            "usage: kvidx-zmq-subscriber bridge --nats URL",
        ),
        (
            &["bridge", "--nats", "nats://127.0.0.1:1", "-h"],
            "usage: kvidx-zmq-subscriber bridge --nats URL",
        ),
        (
            &["publish", "--help"],
            "usage: kvidx-zmq-subscriber publish --workload FILE",
        ),
    ];
    for (args, usage) in cases {
        let out = run(args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stdout.starts_with(usage), "{args:?}: stdout {stdout:?}");
        assert!(stdout.contains("--replay"), "{args:?}: {stdout}");
        assert!(stderr.is_empty(), "{args:?}: stderr {stderr:?}");
    }
}

#[test]
fn a_bad_argument_is_still_an_error_with_the_usage_on_stderr() {
    for args in [
        &["--bogus"][..],
        &["bridge", "--bogus"],
        &["publish", "--bogus"],
    ] {
        let out = run(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("unknown argument --bogus"), "{stderr}");
        assert!(stderr.contains("usage: kvidx-zmq-subscriber"), "{stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
