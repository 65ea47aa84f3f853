//! In-process cost of an http tool call, for bench/http.sh: the median of
//! `Engine::call` on a GET tool against the median of a bare HTTP/1.1 GET
//! of the same URL over a std `TcpStream` (no glovebox). Their difference
//! is the engine's own added latency without process start.
//!
//! Usage: `http_inproc ROOT TOOL URL [RUNS]`; prints three numbers in
//! milliseconds: engine median, bare median, difference.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use glovebox::engine::{Caller, Engine};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bare_get(url: &url::Url) -> std::io::Result<usize> {
    let addr = (
        url.host_str().unwrap_or("127.0.0.1"),
        url.port().unwrap_or(80),
    );
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    write!(
        s,
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        url.path(),
        url.host_str().unwrap_or_default()
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, root, tool, url, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: http_inproc ROOT TOOL URL [RUNS]");
    };
    let runs: usize = rest.first().map_or(Ok(500), |r| r.parse())?;
    let url = url::Url::parse(url)?;
    let engine = Engine::open(Some(std::path::Path::new(root)))?;
    let caller = Caller::default();
    let mut call = Vec::with_capacity(runs);
    let mut bare = Vec::with_capacity(runs);
    for i in 0..runs + 20 {
        let t = Instant::now();
        let o = engine.call(tool, serde_json::Value::Null, &caller);
        let dt = t.elapsed().as_secs_f64() * 1e3;
        anyhow::ensure!(o.ok, "call failed: {:?}", o.error);
        let t = Instant::now();
        bare_get(&url)?;
        let db = t.elapsed().as_secs_f64() * 1e3;
        if i >= 20 {
            call.push(dt);
            bare.push(db);
        }
    }
    let (c, b) = (median(call), median(bare));
    println!("{c:.3} {b:.3} {:.3}", c - b);
    Ok(())
}
