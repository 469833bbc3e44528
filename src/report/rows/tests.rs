use super::*;

#[test]
fn shards_rows_merge_into_the_row_of_one_process() {
    let row = |ok: f64, requests: f64, sent: f64, in_flight: u64, unix_ms: u64| ClientRow {
        unix_ms,
        elapsed_s: 5.0,
        ok_per_s: ok,
        errors_per_s: 0.5,
        timeouts_per_s: 0.25,
        retries_per_s: 1.0,
        in_flight,
        p50_ms: Some(1.0),
        p99_ms: Some(1.0),
        max_ms: Some(1.0),
        gave_up_per_s: 0.0,
        throttled_per_s: 0.0,
        attempts_per_request: Some(sent / requests),
        requests_per_s: requests,
        sent_per_s: sent,
        cancelled_per_s: None,
        outstanding: None,
        refused_per_s: None,
        gone_per_s: None,
        connections: None,
    };
    let a = row(10.0, 10.0, 12.0, 3, 1_000);
    let b = row(20.0, 30.0, 36.0, 4, 1_002);
    let mut latency = crate::report::histogram::latency_histogram();
    for us in [1_000, 2_000, 3_000, 100_000] {
        latency.record(us).unwrap();
    }
    let m = ClientRow::merged(&[&a, &b], &latency);
    assert_eq!(m.ok_per_s, 30.0);
    assert_eq!(m.errors_per_s, 1.0);
    assert_eq!(m.timeouts_per_s, 0.5);
    assert_eq!(m.in_flight, 7);
    assert_eq!(m.unix_ms, 1_002);
    // 48 sent for 40 requests, not the mean of 1.2 and 1.2 by chance:
    assert_eq!(m.attempts_per_request, Some(1.2));
    // The percentiles are the merged histogram's, not the rows'.
    assert_eq!(m.p50_ms, Some(2.0));
    assert_eq!(m.max_ms, Some(100.031));
    assert_eq!(m.cancelled_per_s, None);
    assert_eq!(
        m.connections, None,
        "HTTP/1.1 rows have no connections column"
    );
    // HTTP/2 shards are processes each holding its own connections: the
    // server sees their sum.
    let h2 = |row: &ClientRow, n| ClientRow {
        connections: Some(n),
        ..row.clone()
    };
    let m = ClientRow::merged(&[&h2(&a, 2), &h2(&b, 3)], &latency);
    assert_eq!(m.connections, Some(5));
}

#[test]
fn empty_interval_has_no_percentiles() {
    let row = ClientRow::new(
        &ClientCounts::default(),
        Duration::from_secs(5),
        0,
        0,
        Duration::ZERO,
    );
    assert_eq!(row.latency(), Percentiles::default());
    assert!(row.to_string().ends_with(
        "p50: -, p99: -, max: -, gave up: 0.00 req/sec, throttled: 0.00 req/sec, \
         attempts/request: -"
    ));
}

#[test]
fn server_row_line_matches_the_original_prefix() {
    let row = ServerRow::new(
        ServerCounts {
            completed: 100,
            abandoned: 3,
            ..ServerCounts::starting_at(40, 0)
        },
        Duration::from_millis(500),
        ServerState {
            concurrency: 42,
            delay: Duration::from_millis(110),
            ..ServerState::default()
        },
        0,
        Duration::ZERO,
    );
    assert_eq!(row.completed_per_s, 200.0);
    assert_eq!(row.max_concurrency, 42, "at least what is in flight now");
    assert_eq!(
        row.to_string(),
        "concurrency: 42, last delay: 110ms, completed: 200.00 req/sec, abandoned: 6.00 req/sec"
    );
}

#[test]
fn delays_format_compactly() {
    assert_eq!(format_delay(Duration::from_millis(100)), "100ms");
    assert_eq!(format_delay(Duration::from_millis(2346)), "2.35s");
    assert_eq!(format_delay(Duration::from_secs(3800)), "1h 3m 20s");
}

#[test]
fn a_pool_row_adds_its_columns_and_a_curve_row_does_not() {
    let counts = ServerCounts {
        completed: 10,
        refused: 4,
        dropped: 2,
        ..ServerCounts::starting_at(30, 12)
    };
    let state = ServerState {
        concurrency: 25,
        delay: Duration::from_millis(100),
        held: Held::default(),
        defences: Some(Gauges {
            queue: 5,
            busy: 20,
            limit: None,
        }),
        failing: false,
    };
    let pool = ServerRow::new(counts, Duration::from_secs(2), state, 0, Duration::ZERO);
    assert_eq!(
        (pool.queue, pool.max_queue, pool.busy),
        (Some(5), Some(12), Some(20))
    );
    assert_eq!(
        (pool.refused_per_s, pool.dropped_per_s),
        (Some(2.0), Some(1.0))
    );
    assert_eq!((pool.limited_per_s, pool.limit), (Some(0.0), None));
    assert!(
        pool.to_string()
            .ends_with("queue: 5 (max 12), busy: 20, refused: 2.00 req/sec, dropped: 1.00 req/sec"),
        "{pool}"
    );
    let curve = ServerRow::new(
        counts,
        Duration::from_secs(2),
        ServerState {
            defences: None,
            ..state
        },
        0,
        Duration::ZERO,
    );
    // CSV: the curve's header is the 2014 server's, the pool's has more,
    // and both read back.
    let header = |row: &ServerRow| {
        let mut w = csv::Writer::from_writer(vec![]);
        w.serialize(row).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let back: ServerRow = r.deserialize().next().unwrap().unwrap();
        assert_eq!(&back, row);
        text.lines().next().unwrap().to_string()
    };
    assert!(
        header(&curve).ends_with("abandoned_time_per_s"),
        "{}",
        header(&curve)
    );
    assert!(
        header(&pool).ends_with(
            "abandoned_time_per_s,queue,max_queue,busy,refused_per_s,limited_per_s,\
             rejected_per_s,dropped_per_s"
        ),
        "{}",
        header(&pool)
    );
}
