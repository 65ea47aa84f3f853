use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn open(a: Admission) -> Arc<ConnHandle> {
    match a {
        Admission::Open(h) => h,
        other => panic!("not admitted: {other:?}"),
    }
}

/// Makes `h` (idle) look idle for longer than [`PRESSURE_IDLE`].
fn age(conns: &Conns, h: &ConnHandle) {
    let mut state = conns.lock();
    let mut c = state.remove(h.id).unwrap();
    c.idle_since -= PRESSURE_IDLE * 2;
    state.insert(h.id, c);
}

fn limits(max: usize, per_peer: usize, idle_per_peer: usize) -> ConnLimits {
    ConnLimits::fit(max, Some(per_peer), Some(idle_per_peer), None, None)
}

#[test]
fn derived_caps() {
    let l = ConnLimits::fit(512, None, None, None, None);
    assert_eq!(
        (
            l.max,
            l.per_peer,
            l.idle_per_peer,
            l.max_streams,
            l.streams_per_peer
        ),
        (512, 256, 64, 128, 32)
    );
    let l = ConnLimits::fit(1, None, None, None, None);
    assert_eq!(
        (
            l.max,
            l.per_peer,
            l.idle_per_peer,
            l.max_streams,
            l.streams_per_peer
        ),
        (1, 1, 1, 1, 1)
    );
    let l = ConnLimits::fit(8, Some(100), Some(200), Some(3), Some(9));
    assert_eq!(
        (
            l.max,
            l.per_peer,
            l.idle_per_peer,
            l.max_streams,
            l.streams_per_peer
        ),
        (8, 8, 8, 3, 3)
    );
}

#[test]
fn the_heaviest_peers_oldest_idle_connection_makes_room_at_once() {
    let conns = Conns::new(limits(3, 3, 3));
    let light = open(conns.admit(ip("10.0.0.2")));
    std::thread::sleep(std::time::Duration::from_millis(2));
    let heavy_a = open(conns.admit(ip("10.0.0.1")));
    std::thread::sleep(std::time::Duration::from_millis(2));
    let heavy_b = open(conns.admit(ip("10.0.0.1")));
    // Full: the peer holding the most idle connections loses its oldest,
    // though another peer's has been idle longer; the new connection is
    // admitted at once, without waiting for that one to close.
    let new = open(conns.admit(ip("10.0.0.3")));
    assert!(heavy_a.evicted.is_cancelled());
    assert!(!light.evicted.is_cancelled() && !heavy_b.evicted.is_cancelled());
    assert!(!new.evicted.is_cancelled());
    // An evicted connection runs no new request.
    assert!(conns.begin(&heavy_a).is_none());
    // Busy ones stay: with every one busy, a new connection waits.
    let _l = conns.begin(&light).unwrap();
    let _h = conns.begin(&heavy_b).unwrap();
    let _n = conns.begin(&new).unwrap();
    assert!(matches!(conns.admit(ip("10.0.0.4")), Admission::Wait));
    drop(_h);
    let _d = open(conns.admit(ip("10.0.0.4")));
    assert!(heavy_b.evicted.is_cancelled());
}

#[test]
fn evicted_connections_still_closing_hold_new_ones_back_past_the_slack() {
    let max = CLOSING_SLACK + 1;
    let conns = Conns::new(limits(max, max, max));
    let mut held: Vec<_> = (0..max)
        .map(|_| open(conns.admit(ip("10.0.0.1"))))
        .collect();
    // Each new one evicts one idle; their handles are not dropped yet.
    for _ in 0..CLOSING_SLACK {
        held.push(open(conns.admit(ip("10.0.0.2"))));
    }
    assert_eq!(conns.lock().closing, CLOSING_SLACK);
    assert!(matches!(conns.admit(ip("10.0.0.3")), Admission::Wait));
    assert_eq!(
        conns.lock().closing,
        CLOSING_SLACK,
        "no eviction while waiting"
    );
    // One closes: room again.
    let first = held.remove(0);
    assert!(first.evicted.is_cancelled());
    drop(first);
    assert!(matches!(conns.admit(ip("10.0.0.3")), Admission::Open(_)));
}

#[test]
fn a_peer_at_its_cap_evicts_its_own_or_is_refused() {
    let conns = Conns::new(limits(10, 2, 2));
    let other = open(conns.admit(ip("10.0.0.9")));
    let a = open(conns.admit(ip("10.0.0.1")));
    let b = open(conns.admit(ip("10.0.0.1")));
    age(&conns, &a);
    age(&conns, &b);
    let c = open(conns.admit(ip("10.0.0.1")));
    assert!(a.evicted.is_cancelled(), "its own oldest idle went");
    assert!(!other.evicted.is_cancelled(), "another peer's stays");
    let _b = conns.begin(&b).unwrap();
    let _c = conns.begin(&c).unwrap();
    assert!(matches!(conns.admit(ip("10.0.0.1")), Admission::PeerFull));
    assert!(matches!(conns.admit(ip("10.0.0.2")), Admission::Open(_)));
}

#[test]
fn a_peer_keeps_at_most_its_idle_cap() {
    let conns = Conns::new(limits(100, 50, 2));
    let a = open(conns.admit(ip("10.0.0.1")));
    let b = open(conns.admit(ip("10.0.0.1")));
    age(&conns, &a);
    age(&conns, &b);
    let busy = open(conns.admit(ip("10.0.0.1")));
    // Its third idle connection took the place of its oldest.
    assert!(a.evicted.is_cancelled());
    assert!(!b.evicted.is_cancelled());
    let other = open(conns.admit(ip("10.0.0.2")));
    let request = conns.begin(&busy).unwrap();
    let d = open(conns.admit(ip("10.0.0.1")));
    // b and d idle (the cap), busy serving: its request ends, it is idle
    // once more than the cap allows, and the oldest idle one goes.
    assert!(!b.evicted.is_cancelled() && !d.evicted.is_cancelled());
    drop(request);
    assert!(b.evicted.is_cancelled());
    assert!(!d.evicted.is_cancelled() && !busy.evicted.is_cancelled());
    // Another peer's idle connection is not its to lose.
    assert!(!other.evicted.is_cancelled());
}

#[test]
fn a_peer_opening_connections_faster_than_it_uses_them_is_shed() {
    let conns = Conns::new(limits(100, 50, 2));
    let a = open(conns.admit(ip("10.0.0.1")));
    let b = open(conns.admit(ip("10.0.0.1")));
    // Past its idle cap, its idle ones fresh (their requests may be on
    // their way): the new one gets in and nothing is evicted for it, until
    // the peer holds SHED_FROM of them.
    let more: Vec<_> = (2..SHED_FROM)
        .map(|_| open(conns.admit(ip("10.0.0.1"))))
        .collect();
    assert!(!a.evicted.is_cancelled() && !b.evicted.is_cancelled());
    assert_eq!(conns.lock().idle_of(ip("10.0.0.1")), SHED_FROM);
    // Then, with more waiting in the backlog, the new one is closed at
    // once, and nothing of the peer's is evicted for it.
    assert!(matches!(conns.admit(ip("10.0.0.1")), Admission::Shed));
    assert!(!a.evicted.is_cancelled() && !b.evicted.is_cancelled());
    assert_eq!(conns.lock().closing, 0);
    // With nothing behind it, the new one gets in.
    let new = open(conns.admit_behind(ip("10.0.0.1"), || false));
    assert!(!a.evicted.is_cancelled() && !b.evicted.is_cancelled());
    drop((new, more));
    // Another peer gets in.
    assert!(matches!(conns.admit(ip("10.0.0.2")), Admission::Open(_)));
    // The peer uses one: it has room again.
    let _r = conns.begin(&a).unwrap();
    let _c = open(conns.admit(ip("10.0.0.1")));
    // Once its idle ones have sat a while, a new one takes the oldest's
    // place instead.
    age(&conns, &b);
    let _d = open(conns.admit(ip("10.0.0.1")));
    assert!(b.evicted.is_cancelled());
}

#[test]
fn under_pressure_idle_connections_time_out_sooner() {
    let conns = Conns::new(limits(8, 8, 8));
    let held: Vec<_> = (0..6).map(|_| open(conns.admit(ip("10.0.0.1")))).collect();
    let _busy = conns.begin(&held[0]).unwrap();
    // Six of eight open (three quarters): past PRESSURE_IDLE, every idle
    // one is shed; the busy one stays.
    conns
        .lock()
        .shed_under_pressure(&conns.limits, Instant::now() + PRESSURE_IDLE * 2);
    assert!(!held[0].evicted.is_cancelled());
    assert!(held[1..].iter().all(|h| h.evicted.is_cancelled()));
    // Below three quarters, nothing is shed however long it sat.
    let conns = Conns::new(limits(8, 8, 8));
    let held: Vec<_> = (0..5).map(|_| open(conns.admit(ip("10.0.0.1")))).collect();
    conns
        .lock()
        .shed_under_pressure(&conns.limits, Instant::now() + PRESSURE_IDLE * 2);
    assert!(held.iter().all(|h| !h.evicted.is_cancelled()));
}

#[test]
fn streams_are_bounded_overall_and_per_peer() {
    let conns = Conns::new(ConnLimits::fit(100, None, None, Some(3), Some(2)));
    let a = open(conns.admit(ip("127.0.0.1")));
    let b = open(conns.admit(ip("127.0.0.2")));
    let s1 = conns.stream(&a).unwrap();
    let _s2 = conns.stream(&a).unwrap();
    assert_eq!(conns.stream(&a).unwrap_err(), StreamRefusal::Peer(2));
    let _s3 = conns.stream(&b).unwrap();
    assert_eq!(conns.stream(&b).unwrap_err(), StreamRefusal::Server(3));
    drop(s1);
    assert!(conns.stream(&b).is_ok());
}
