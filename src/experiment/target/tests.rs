use super::*;
use tokio::net::TcpListener;

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
    let url = format!("http://{addr}/health?x=1");
    let line = probe(&url, Duration::from_secs(5)).await.unwrap();
    assert_eq!(line, "HTTP/1.1 503 Service Unavailable");
    let request = server.await.unwrap();
    assert!(
        request.starts_with("GET /health?x=1 HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(request.contains(&format!("Host: {addr}\r\n")), "{request}");
    // Nothing listens there any more.
    let err = probe(&url, Duration::from_secs(5)).await.unwrap_err();
    assert!(err.contains("cannot connect"), "{err}");
}

#[tokio::test]
async fn silence_and_nonsense_are_no_answer() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepted by the kernel, never read: a stopped process.
    let err = probe(&format!("http://{addr}/"), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(err.contains("no answer within"), "{err}");
    let other = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = other.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = other.accept().await.unwrap();
        socket.write_all(b"SSH-2.0-OpenSSH\r\n").await.unwrap();
    });
    let err = probe(&format!("http://{at}/"), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.contains("not HTTP"), "{err}");
    server.await.unwrap();
    for bad in ["https://example.com/", "not a url", "/path"] {
        assert!(probe(bad, Duration::from_secs(1)).await.is_err(), "{bad}");
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
