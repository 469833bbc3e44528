//! The request that checks a target, the wait for its first answer and the
//! wait for it to be calm: against listeners of the tests' own on
//! loopback, the decisions of the first wait also without any network.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// `url` as the storm asks it by default: a GET over plain HTTP/1.1.
fn at(url: &str) -> Target {
    Target::resolve_now(url, &Wire::default()).unwrap()
}

#[tokio::test]
async fn any_status_is_an_answer_and_a_refusal_is_not() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let n = socket.read(&mut buf).await.unwrap();
        let request = String::from_utf8_lossy(&buf[..n]).into_owned();
        socket
            .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        request
    });
    let url = at(&format!("http://{addr}/health?x=1"));
    let line = probe(&url, Duration::from_secs(5)).await.unwrap();
    assert_eq!(line.to_string(), "HTTP/1.1 503 Service Unavailable");
    let request = server.await.unwrap();
    assert!(
        request.starts_with("GET /health?x=1 HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(request.contains(&format!("Host: {addr}\r\n")), "{request}");
    // Nothing listens there any more.
    let err = probe(&url, Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(err, NoAnswer::Failed(_)), "{err:?}");
    assert!(err.to_string().contains("cannot connect"), "{err}");
}

#[tokio::test]
async fn silence_and_nonsense_are_no_answer() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepted by the kernel, never read: a stopped process.
    let err = probe(&at(&format!("http://{addr}/")), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_eq!(err, NoAnswer::Silent(Duration::from_millis(200)));
    assert_eq!(err.to_string(), "no answer within 0.2 s");
    let other = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_at = other.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = other.accept().await.unwrap();
        socket.write_all(b"SSH-2.0-OpenSSH\r\n").await.unwrap();
    });
    let err = probe(&at(&format!("http://{other_at}/")), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, NoAnswer::Failed(why) if why.contains("not HTTP")),
        "{err:?}"
    );
    server.await.unwrap();
    // https:// is taken now; what is neither is refused before any
    // request.
    for bad in ["ftp://example.com/", "not a url", "/path"] {
        assert!(net_target::check_url(bad).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn a_target_that_answers_every_probe_is_calm_after_the_window() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf).await;
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
        }
    });
    let path = std::env::temp_dir().join(format!("retry-storm-calm-{}", std::process::id()));
    let mut commands = File::create(&path).unwrap();
    let names = ["fixed".to_string()];
    // A hundredth of the time: a probe every 10 ms for 0.3 s.
    let start = Instant::now();
    calm(
        &format!("http://{addr}/"),
        &Wire::default(),
        Duration::from_secs(30),
        100.0,
        &names,
        &mut commands,
    )
    .await
    .unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    let said = std::fs::read_to_string(&path).unwrap();
    assert!(
        said.starts_with("# fixed: the target calm after 0."),
        "{said}"
    );
    assert!(said.contains("every 0.01 s for 0.3 s"), "{said}");
    server.abort();
    std::fs::remove_file(&path).unwrap();
}

/// The storm's own patience, for the decisions taken without a network.
const STORM: Patience = FIRST_ANSWER;

#[test]
fn durations_read_in_minutes_when_whole_else_in_seconds() {
    assert_eq!(span(Duration::from_secs(300)), "5 min");
    assert_eq!(span(Duration::from_secs(10)), "10 s");
    assert_eq!(span(Duration::from_secs(90)), "90 s");
    assert_eq!(span(Duration::from_millis(200)), "0.2 s");
    assert_eq!(span(Duration::from_millis(60_500)), "60.5 s");
}

#[test]
fn anything_but_silence_ends_the_wait_before_it_begins() {
    let s = Duration::from_secs;
    let mut said = None;
    let refused = NoAnswer::Failed("cannot connect to h:1: Connection refused".into());
    assert_eq!(
        after(refused, s(0), &mut said, &STORM),
        Err("cannot connect to h:1: Connection refused".into())
    );
    // A connection never made, before the target was ever silent: a
    // firewall as likely as a full queue, so not waited for.
    let unconnected = NoAnswer::Unconnected("h:1".into(), s(10));
    assert_eq!(
        after(unconnected, s(10), &mut said, &STORM),
        Err("no connection to h:1 within 10 s".into())
    );
    assert_eq!(said, None, "nothing said");
}

#[test]
fn silence_is_waited_for_saying_so_at_once_then_every_so_often_up_to_the_limit() {
    let s = Duration::from_secs;
    let mut said = None;
    let silent = || NoAnswer::Silent(s(10));
    let first = after(silent(), s(10), &mut said, &STORM).unwrap().unwrap();
    assert_eq!(
        first,
        "it accepted the connection but has not answered within 10 s: still working \
         through a backlog (a run before may have left it one), or stopped? Waiting for \
         it, at most 5 min (the limit of the wait for a calm target)"
    );
    assert_eq!(said, Some(s(10)));
    assert_eq!(after(silent(), s(20), &mut said, &STORM), Ok(None));
    assert_eq!(after(silent(), s(30), &mut said, &STORM), Ok(None));
    assert_eq!(
        after(silent(), s(40), &mut said, &STORM),
        Ok(Some(
            "still no answer after 40 s; waiting at most 5 min".into()
        ))
    );
    assert_eq!(said, Some(s(40)));
    // Its listen queue full once it has been silent: waited for too.
    let unconnected = NoAnswer::Unconnected("h:1".into(), s(10));
    assert_eq!(after(unconnected, s(50), &mut said, &STORM), Ok(None));
    assert_eq!(
        after(silent(), s(300), &mut said, &STORM),
        Err(
            "no answer within 5 min of waiting (each request given 10 s): still working \
             through a backlog, or stopped"
                .into()
        )
    );
}

#[test]
fn a_failure_while_waiting_ends_it_and_says_how_long_it_waited() {
    let s = Duration::from_secs;
    let mut said = Some(s(10));
    let refused = NoAnswer::Failed("cannot connect to h:1: Connection refused".into());
    assert_eq!(
        after(refused, s(61), &mut said, &STORM),
        Err(
            "cannot connect to h:1: Connection refused, after 61 s waiting for its first \
             answer"
                .into()
        )
    );
}

/// A test's patience: each request 200 ms, which a loopback answer takes
/// well within even on a loaded machine (if not, the wait goes on and
/// the test only takes longer), a line at every silence.
fn quick(within: Duration) -> Patience {
    Patience {
        each: Duration::from_millis(200),
        within,
        say_every: Duration::ZERO,
    }
}

#[tokio::test]
async fn a_target_that_takes_the_connection_in_and_answers_later_is_waited_for() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // It holds every connection unanswered until the wait has been said,
    // and answers every one after: a backlog worked through.
    let through = Arc::new(AtomicBool::new(false));
    let connections = Arc::new(AtomicUsize::new(0));
    let server = {
        let (through, connections) = (Arc::clone(&through), Arc::clone(&connections));
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                connections.fetch_add(1, Ordering::SeqCst);
                if !through.load(Ordering::SeqCst) {
                    held.push(socket);
                    continue;
                }
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let _ = socket.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
            }
        })
    };
    let mut lines = Vec::new();
    let mut say = |line: &str| {
        lines.push(line.to_string());
        through.store(true, Ordering::SeqCst);
    };
    let answer = first_answer(
        &at(&format!("http://{addr}/")),
        quick(Duration::from_secs(60)),
        &mut say,
    )
    .await;
    assert_eq!(
        answer.map(|reply| reply.to_string()),
        Ok("HTTP/1.1 200 OK".to_string())
    );
    assert!(
        lines[0].starts_with(
            "it accepted the connection but has not answered within 0.2 s: still working"
        ),
        "{lines:?}"
    );
    assert!(lines[0].ends_with("at most 1 min (the limit of the wait for a calm target)"));
    assert!(connections.load(Ordering::SeqCst) >= 2, "tried again");
    server.abort();
}

#[tokio::test]
async fn a_refusal_or_a_failure_ends_the_wait_at_once_before_it_and_during_it() {
    // Nothing listens there (bound, so that no one else takes the port):
    // no line, no wait, though each request may take 10 s and the wait 5
    // minutes.
    let bound = tokio::net::TcpSocket::new_v4().unwrap();
    bound.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let nowhere = format!("http://{}/", bound.local_addr().unwrap());
    let mut lines = Vec::new();
    let start = Instant::now();
    let err = first_answer(&at(&nowhere), STORM, &mut |l: &str| {
        lines.push(l.to_string())
    })
    .await
    .unwrap_err();
    assert!(err.contains("cannot connect"), "{err}");
    assert!(start.elapsed() < STORM.each, "at once");
    assert!(lines.is_empty(), "{lines:?}");
    // Silent first, then a connection closed unanswered while the storm
    // waits.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        // Held, unanswered, as long as the server runs.
        let (_first, _) = listener.accept().await.unwrap();
        loop {
            // Read first: closed with the request unread, it would be reset.
            let (mut socket, _) = listener.accept().await.unwrap();
            let _ = socket.read(&mut [0u8; 1024]).await;
        }
    });
    let mut lines = Vec::new();
    let err = first_answer(
        &at(&format!("http://{addr}/")),
        quick(Duration::from_secs(60)),
        &mut |l: &str| lines.push(l.to_string()),
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("closed the connection without an answer, after"),
        "{err}"
    );
    assert!(err.ends_with("s waiting for its first answer"), "{err}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    server.abort();
}

#[tokio::test]
async fn a_target_silent_to_the_end_of_the_wait_fails_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let patience = Patience {
        each: Duration::from_millis(50),
        within: Duration::from_millis(150),
        say_every: Duration::ZERO,
    };
    let mut lines = Vec::new();
    let start = Instant::now();
    let err = first_answer(&at(&url), patience, &mut |l: &str| {
        lines.push(l.to_string())
    })
    .await
    .unwrap_err();
    assert!(start.elapsed() >= patience.within);
    assert_eq!(
        err,
        "no answer within 0.15 s of waiting (each request given 0.05 s): still working through a \
         backlog, or stopped"
    );
    assert!(
        lines[0].starts_with("it accepted the connection"),
        "{lines:?}"
    );
    drop(listener);
}

#[tokio::test]
async fn a_signal_while_waiting_ends_the_check_with_nothing_done() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // The signal comes with the second connection: the first was not
    // answered, and the storm is waiting.
    let (signal, signalled) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        let mut signal = Some(signal);
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            held.push(socket);
            if held.len() == 2 {
                let _ = signal.take().unwrap().send(());
            }
        }
    });
    let shutdown = std::pin::pin!(async move {
        let _ = signalled.await;
    });
    let outage: Outage = "stall".parse().unwrap();
    let within = Duration::from_secs(60);
    let start = Instant::now();
    let wires = Wires::default();
    let err = check(
        &format!("http://{addr}/"),
        &wires,
        &outage,
        quick(within),
        shutdown,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, StormError::InterruptedBeforeLoad), "{err}");
    assert!(start.elapsed() < within);
    server.abort();
}
