use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use serde_json::json;

use super::*;

/// A connection to a fake server: its handshake answered, the server's
/// reading and writing ends returned.
fn pair() -> (Connection, BufReader<UnixStream>, UnixStream) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut w = theirs.try_clone().unwrap();
    let mut r = BufReader::new(theirs);
    let server = std::thread::spawn(move || {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let init: Value = serde_json::from_str(&l).unwrap();
        assert_eq!(init["method"], "initialize", "{l}");
        assert_eq!(init["params"]["protocolVersion"], PROTOCOL.as_str());
        writeln!(
            w,
            "{}",
            json!({"jsonrpc": "2.0", "id": init["id"], "result": {
                "protocolVersion": PROTOCOL.as_str(), "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "fake", "version": "1"}}})
        )
        .unwrap();
        l.clear();
        r.read_line(&mut l).unwrap();
        assert!(l.contains("notifications/initialized"), "{l}");
        (r, w)
    });
    let c = Connection::stdio(ours, Box::new(|| {}), Duration::from_secs(10)).unwrap();
    let (r, w) = server.join().unwrap();
    (c, r, w)
}

fn read(r: &mut BufReader<UnixStream>) -> Value {
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l:?}"))
}

fn call(c: &Arc<Connection>, name: &str) -> std::thread::JoinHandle<Result<Value, ClientError>> {
    let (c, name) = (c.clone(), name.to_string());
    std::thread::spawn(move || c.call_tool(&name, &Map::new(), Duration::from_secs(5), None, None))
}

#[test]
fn answers_reach_their_requests_in_any_order() {
    let (c, mut r, mut w) = pair();
    let c = Arc::new(c);
    let a = call(&c, "a");
    let m1 = read(&mut r);
    let b = call(&c, "b");
    let m2 = read(&mut r);
    for m in [&m2, &m1] {
        let text = m["params"]["name"].as_str().unwrap();
        writeln!(
            w,
            "{}",
            json!({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": text}]}})
        )
        .unwrap();
    }
    assert_eq!(a.join().unwrap().unwrap()["content"][0]["text"], "a");
    assert_eq!(b.join().unwrap().unwrap()["content"][0]["text"], "b");
}

#[test]
fn an_overlong_line_closes_the_connection() {
    let (c, _r, mut w) = pair();
    let big = vec![b'x'; MAX_LINE + 10];
    std::thread::spawn(move || {
        let _ = w.write_all(&big);
    });
    let e = c
        .call_tool("a", &Map::new(), Duration::from_secs(20), None, None)
        .unwrap_err();
    assert!(matches!(e, ClientError::Closed { .. }), "{e:?}");
    assert!(
        c.closed().unwrap().contains("longer than"),
        "{:?}",
        c.closed()
    );
}

#[test]
fn a_silent_server_times_out_and_is_told() {
    let (c, mut r, _w) = pair();
    let e = c
        .call_tool("slow", &Map::new(), Duration::from_millis(100), None, None)
        .unwrap_err();
    assert_eq!(e, ClientError::Timeout { ms: 100 });
    let asked = read(&mut r);
    let told = read(&mut r);
    assert_eq!(told["method"], "notifications/cancelled", "{told}");
    assert_eq!(told["params"]["requestId"], asked["id"], "{told}");
}

#[test]
fn a_cancelled_call_is_cancelled_at_the_server_and_progress_reaches_its_relay() {
    let (c, mut r, mut w) = pair();
    let cancel = Cancel::new();
    let got = Arc::new(Mutex::new(Vec::new()));
    let relay = {
        let got = got.clone();
        Relay::new(move |p| got.lock().unwrap().push(p))
    };
    let waiting = {
        let (cancel, relay) = (cancel.clone(), relay.clone());
        std::thread::spawn(move || {
            c.call_tool(
                "slow",
                &Map::new(),
                Duration::from_secs(30),
                Some(&cancel),
                Some(&relay),
            )
        })
    };
    let asked = read(&mut r);
    let token = asked["params"]["_meta"]["progressToken"].clone();
    assert!(!token.is_null(), "no progress token: {asked}");
    writeln!(
        w,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": token, "progress": 1, "total": 4, "message": "one"}})
    )
    .unwrap();
    // Another token's report is not this call's.
    writeln!(
        w,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": "other", "progress": 9}})
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while got.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    cancel.cancel();
    assert_eq!(waiting.join().unwrap().unwrap_err(), ClientError::Cancelled);
    assert_eq!(
        *got.lock().unwrap(),
        vec![Reported {
            progress: 1.0,
            total: Some(4.0),
            message: Some("one".into())
        }]
    );
    let told = read(&mut r);
    assert_eq!(told["method"], "notifications/cancelled", "{told}");
    assert_eq!(told["params"]["requestId"], asked["id"], "{told}");
}

#[test]
fn the_servers_requests_get_ping_only() {
    let (c, mut r, mut w) = pair();
    writeln!(w, r#"{{"jsonrpc":"2.0","id":"p","method":"ping"}}"#).unwrap();
    assert_eq!(
        read(&mut r),
        json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );
    writeln!(w, r#"{{"jsonrpc":"2.0","id":"q","method":"roots/list"}}"#).unwrap();
    let no = read(&mut r);
    assert_eq!(no["error"]["code"], -32601, "{no}");
    assert!(c.closed().is_none());
}
