use super::*;

const T: Duration = Duration::from_secs(4);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A chain on connection 7 with nothing renewed yet.
fn chain_at(tick: Option<Duration>) -> ProofChain {
    let mut chain = ProofChain::new(tick);
    chain.restart(7, None);
    chain
}

#[test]
fn three_syncs_spaced_by_a_quarter_and_a_later_write_prove_the_first_send() {
    let t0 = BootInstant::now();
    let mut chain = chain_at(None);
    // i: sent at 0, answered at 10.
    assert_eq!(chain.answered(7, t0, t0 + ms(10), T), None);
    // j: sent 1,090 ms after i's answer (spacing is 1,080 ms at T = 4 s), answered at 1,110.
    assert_eq!(chain.answered(7, t0 + ms(1100), t0 + ms(1110), T), None);
    // m: sent after j's answer: the leader renewed at or after i's send, but nothing yet
    // shows it still led a quorum then.
    assert_eq!(chain.answered(7, t0 + ms(1120), t0 + ms(1130), T), None);
    // A write sent at i's send or later, answered: the proof.
    chain.write_sent(t0 + ms(5));
    assert_eq!(chain.write_answered(7, t0 + ms(5), true), Some(t0));
    // Bound once: the same renewal is not proven twice.
    assert_eq!(chain.write_answered(7, t0 + ms(5), true), None);
}

#[test]
fn a_write_sent_before_the_renewal_does_not_bind_it() {
    let t0 = BootInstant::now();
    let mut chain = chain_at(None);
    chain.write_sent(t0);
    assert_eq!(
        chain.write_answered(7, t0, true),
        None,
        "nothing renewed yet"
    );
    chain.answered(7, t0 + ms(100), t0 + ms(110), T);
    chain.answered(7, t0 + ms(1200), t0 + ms(1210), T);
    assert_eq!(
        chain.answered(7, t0 + ms(1220), t0 + ms(1230), T),
        None,
        "the renewal at 100 ms is after the only write"
    );
    chain.write_sent(t0 + ms(1300));
    assert_eq!(
        chain.write_answered(7, t0 + ms(1300), true),
        Some(t0 + ms(100))
    );
}

#[test]
fn a_renewal_proven_after_its_write_was_answered_is_a_proof_at_once() {
    let t0 = BootInstant::now();
    let mut chain = chain_at(None);
    chain.answered(7, t0, t0 + ms(10), T);
    chain.write_sent(t0 + ms(20));
    assert_eq!(chain.write_answered(7, t0 + ms(20), true), None);
    chain.answered(7, t0 + ms(1100), t0 + ms(1110), T);
    assert_eq!(chain.answered(7, t0 + ms(1120), t0 + ms(1130), T), Some(t0));
}

#[test]
fn a_write_that_failed_proves_nothing() {
    let t0 = BootInstant::now();
    let mut chain = ProofChain::new(None);
    chain.restart(3, Some(t0));
    chain.write_sent(t0 + ms(1));
    assert_eq!(chain.write_answered(3, t0 + ms(1), false), None);
    assert!(
        !chain.write_due(t0 + ms(2), T),
        "not at once: one write period later"
    );
    assert!(chain.write_due(t0 + ms(1) + write_period(T), T));
}

#[test]
fn a_connect_response_is_a_renewal_bound_by_the_first_write() {
    let t0 = BootInstant::now();
    let mut chain = ProofChain::new(None);
    chain.restart(3, Some(t0));
    assert!(chain.write_due(t0, T), "the first write is due at once");
    chain.write_sent(t0 + ms(2));
    assert!(!chain.write_due(t0 + T, T), "one write at a time");
    assert_eq!(chain.write_answered(3, t0 + ms(2), true), Some(t0));
    assert!(!chain.write_due(t0 + ms(3), T));
    assert!(chain.write_due(t0 + ms(2) + write_period(T), T));
}

#[test]
fn a_read_only_member_renews_nothing() {
    let t0 = BootInstant::now();
    let mut chain = ProofChain::new(None);
    chain.restart(3, None);
    chain.write_sent(t0);
    assert_eq!(chain.write_answered(3, t0, true), None);
}

#[test]
fn syncs_too_close_together_prove_nothing() {
    let t0 = BootInstant::now();
    let mut chain = chain_at(None);
    chain.write_sent(t0 + ms(2000));
    chain.write_answered(7, t0 + ms(2000), true);
    for k in 0..10u64 {
        // Every 100 ms, answered 5 ms later: no pair is a quarter of T apart yet.
        let sent = t0 + ms(100 * k);
        assert_eq!(chain.answered(7, sent, sent + ms(5), T), None, "sync {k}");
    }
}

#[test]
fn a_stated_tick_sets_the_spacing() {
    let t0 = BootInstant::now();
    // A 4 s tick with T = 2.2 s: syncs 0.6 s apart may have no PING between them.
    let t = ms(2200);
    let mut chain = chain_at(Some(Duration::from_secs(4)));
    chain.write_sent(t0 + ms(5));
    chain.write_answered(7, t0 + ms(5), true);
    chain.answered(7, t0, t0 + ms(10), t);
    chain.answered(7, t0 + ms(600), t0 + ms(610), t);
    assert_eq!(chain.answered(7, t0 + ms(620), t0 + ms(630), t), None);
    // Two seconds and T/50 after i's answer, j proves it.
    chain.answered(7, t0 + ms(2060), t0 + ms(2070), t);
    assert_eq!(chain.answered(7, t0 + ms(2080), t0 + ms(2090), t), Some(t0));
    // A short stated tick proves sooner than the unstated T/4.
    let mut short = chain_at(Some(ms(500)));
    short.write_sent(t0 + ms(5));
    short.write_answered(7, t0 + ms(5), true);
    short.answered(7, t0, t0 + ms(10), T);
    short.answered(7, t0 + ms(350), t0 + ms(360), T);
    assert_eq!(short.answered(7, t0 + ms(370), t0 + ms(380), T), Some(t0));
}

#[test]
fn steady_syncs_and_writes_keep_the_proof_under_half_the_timeout() {
    let t0 = BootInstant::now();
    let mut chain = ProofChain::new(None);
    chain.restart(0, Some(t0));
    let step = period(T);
    let mut worst = Duration::ZERO;
    let mut proof = None;
    for k in 0..200u32 {
        let now = t0 + step * k;
        let answered = now + ms(3);
        if chain.write_due(now, T) {
            chain.write_sent(now);
            if let Some(p) = chain.write_answered(0, now, true) {
                proof = Some(p);
            }
        }
        if let Some(p) = chain.answered(0, now, answered, T) {
            proof = Some(p);
        }
        if k > 24 {
            let age = answered.saturating_duration_since(proof.expect("proven by now"));
            worst = worst.max(age);
        }
    }
    assert!(worst < T / 2, "a proof {worst:?} old in steady state");
}

#[test]
fn answers_from_an_earlier_connection_are_ignored() {
    let t0 = BootInstant::now();
    let mut chain = ProofChain::new(None);
    chain.restart(1, None);
    chain.answered(1, t0, t0 + ms(1), T);
    chain.answered(1, t0 + ms(1200), t0 + ms(1201), T);
    chain.restart(2, None);
    assert_eq!(chain.answered(1, t0 + ms(1300), t0 + ms(1301), T), None);
    assert_eq!(chain.answered(2, t0 + ms(1300), t0 + ms(1301), T), None);
    chain.write_sent(t0 + ms(1400));
    assert_eq!(chain.write_answered(1, t0 + ms(1400), true), None);
}

#[test]
fn a_sync_sent_before_the_middle_one_was_answered_proves_nothing() {
    let t0 = BootInstant::now();
    let mut chain = chain_at(None);
    chain.write_sent(t0 + ms(2));
    chain.write_answered(7, t0 + ms(2), true);
    chain.answered(7, t0, t0 + ms(1), T);
    // j sent at 1,100 ms; m sent at 1,105 ms while j was in flight; both answered at 1,110.
    chain.answered(7, t0 + ms(1100), t0 + ms(1110), T);
    assert_eq!(chain.answered(7, t0 + ms(1105), t0 + ms(1110), T), None);
    // The next sync, sent after j's answer, proves i.
    assert_eq!(chain.answered(7, t0 + ms(1111), t0 + ms(1112), T), Some(t0));
}

#[test]
fn syncs_are_due_one_period_apart() {
    let t0 = BootInstant::now();
    let mut chain = ProofChain::default();
    assert!(chain.due(t0, T));
    chain.sent(t0);
    chain.write_sent(t0);
    assert!(!chain.due(t0 + period(T) - ms(1), T));
    assert!(chain.due(t0 + period(T), T));
    assert_eq!(chain.next_due(T), Some(t0 + period(T)));
    chain.write_answered(0, t0, true);
    assert_eq!(chain.next_due(T), Some(t0 + period(T)));
}
