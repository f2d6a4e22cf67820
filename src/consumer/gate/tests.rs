use super::*;
use futures_util::FutureExt;

/// Keeps every lane waiting and counts which one each of `n` grants went to.
async fn grants(weights: &[u32], n: usize) -> Vec<usize> {
    let limit = Limit::new(1);
    let gate = Gate::new(limit.clone(), Arc::new(RateGate::default()), weights);
    let stop = CancellationToken::new();
    let task = tokio::spawn(gate.clone().run(stop.clone()));
    let mut asks: Vec<_> = (0..weights.len()).map(|i| Box::pin(gate.acquire(i))).collect();
    let mut counts = vec![0; weights.len()];
    for _ in 0..n {
        let (p, i, _) = futures_util::future::select_all(asks.iter_mut()).await;
        let permit = p.expect("granted");
        counts[i] += 1;
        asks[i] = Box::pin(gate.acquire(i));
        // Every lane asks again before the slot comes back.
        for a in asks.iter_mut() {
            assert!(a.as_mut().now_or_never().is_none(), "one slot only");
        }
        drop(permit);
    }
    stop.cancel();
    task.await.unwrap();
    counts
}

#[tokio::test]
async fn grants_follow_the_weights_while_every_queue_waits() {
    // Strides are rounded: a grant more or less than the exact share.
    let close = |got: Vec<usize>, want: &[usize]| {
        let ok = got.iter().zip(want).all(|(&g, &w)| g.abs_diff(w) <= 1);
        assert!(ok, "{got:?} against {want:?}");
    };
    close(grants(&[1, 3], 400).await, &[100, 300]);
    close(grants(&[2, 1, 1], 400).await, &[200, 100, 100]);
    close(grants(&[5, 1], 600).await, &[500, 100]);
}

#[tokio::test]
async fn a_queue_that_does_not_wait_leaves_its_share_and_banks_nothing() {
    let limit = Limit::new(1);
    let gate = Gate::new(limit.clone(), Arc::new(RateGate::default()), &[1, 1]);
    let stop = CancellationToken::new();
    let task = tokio::spawn(gate.clone().run(stop.clone()));
    // Only lane 0 waits: it gets every slot.
    for _ in 0..10 {
        drop(gate.acquire(0).await.expect("granted"));
    }
    // Lane 1 joins: from then on they alternate, no catch-up burst for lane 1.
    let held = gate.acquire(0).await.expect("granted");
    let (mut a, mut b) = (Box::pin(gate.acquire(0)), Box::pin(gate.acquire(1)));
    tokio::task::yield_now().await;
    drop(held);
    let mut order = Vec::new();
    for _ in 0..6 {
        let p = tokio::select! {
            p = &mut a => { order.push(0); a = Box::pin(gate.acquire(0)); p }
            p = &mut b => { order.push(1); b = Box::pin(gate.acquire(1)); p }
        };
        tokio::task::yield_now().await;
        drop(p);
    }
    let ones = order.iter().filter(|&&i| i == 1).count();
    assert_eq!(ones, 3, "{order:?}");
    stop.cancel();
    task.await.unwrap();
}

/// Yields until `ok` holds (the gate's task runs meanwhile); fails after many turns.
async fn settle(what: &str, ok: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if ok() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{what}");
}

fn parked(gate: &Gate) -> Vec<usize> {
    gate.lock().lanes.iter().map(|l| l.parked.len()).collect()
}

#[tokio::test]
async fn slots_are_parked_by_weight_for_fetched_jobs_and_given_back() {
    let limit = Limit::new(4);
    let gate = Gate::new(limit.clone(), Arc::new(RateGate::default()), &[1, 3]);
    let (a, b) = (Share::new(gate.clone(), 0), Share::new(gate.clone(), 1));
    a.buffer().add(10);
    b.buffer().add(10);
    let stop = CancellationToken::new();
    let task = tokio::spawn(gate.clone().run(stop.clone()));
    // No pool asks yet: the four slots are parked, by weight.
    settle("every slot parked", || limit.in_flight() == 4).await;
    assert_eq!(parked(&gate), [1, 3]);
    // A parked slot is taken at once, and counted as the queue's.
    let running = b.acquire().await.expect("parked");
    b.buffer().take(1);
    assert_eq!((b.running().in_flight(), parked(&gate)), (1, vec![1, 2]));
    // b has nothing more to start: its parked slots go to a, which still has jobs.
    b.buffer().take(9);
    b.unpark();
    settle("b's slots parked for a", || parked(&gate) == [3, 0]).await;
    // a's pool stops: its slots go back to the limit, and nobody wants more.
    a.close();
    assert_eq!(limit.in_flight(), 1, "only the running job");
    assert!(a.acquire().await.is_none(), "a closed lane gets nothing");
    drop(running);
    assert_eq!((limit.in_flight(), b.running().in_flight()), (0, 0));
    stop.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_queue_held_back_by_its_rate_parks_nothing_until_the_hold_ends() {
    let limit = Limit::new(4);
    let gate = Gate::new(limit.clone(), Arc::new(RateGate::default()), &[1, 1]);
    let (a, b) = (Share::new(gate.clone(), 0), Share::new(gate.clone(), 1));
    a.buffer().add(10);
    b.buffer().add(10);
    let stop = CancellationToken::new();
    let task = tokio::spawn(gate.clone().run(stop.clone()));
    settle("the slots parked by weight", || parked(&gate) == [2, 2]).await;
    // a waits on its own rate: its slots go to b, and a's jobs want none meanwhile.
    let held = a.hold();
    settle("every slot parked for b", || parked(&gate) == [0, 4]).await;
    // The hold ends: once b has nothing more to start, a's jobs get the slots again.
    drop(held);
    b.buffer().take(10);
    b.unpark();
    settle("every slot parked for a", || parked(&gate) == [4, 0]).await;
    stop.cancel();
    task.await.unwrap();
}

#[tokio::test]
async fn a_dropped_request_takes_nothing() {
    let limit = Limit::new(1);
    let gate = Gate::new(limit.clone(), Arc::new(RateGate::default()), &[1, 1]);
    let stop = CancellationToken::new();
    let task = tokio::spawn(gate.clone().run(stop.clone()));
    let held = gate.acquire(0).await.expect("granted");
    drop(Box::pin(gate.acquire(1)).now_or_never());
    let next = tokio::spawn({
        let gate = gate.clone();
        async move { gate.acquire(0).await.is_some() }
    });
    drop(held);
    assert!(next.await.unwrap());
    assert_eq!(limit.in_flight(), 0);
    stop.cancel();
    task.await.unwrap();
}
