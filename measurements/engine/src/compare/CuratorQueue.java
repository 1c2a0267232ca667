// The long-queue scenario of CuratorBench (driven by measurements/engine/src/compare/queue.rs):
// one InterProcessMutex held by a holder session, <waiters> threads over <sessions> sessions of
// their own queued behind it, then the holder releases and the queue drains (each waiter
// acquires once and releases at once). Mirrors `OurQueue` in queue.rs line for line.
//
// Commands (through CuratorBench's stdin):
//   queue <connect> <path> <waiters> <sessions> -> STARTED (threads started; queueing goes on)
//   drain                                       -> RESULT kind=drain n=.. p50_ns=.. p99_ns=.. elapsed_ns=..
//   queue-close                                 -> CLOSED (the queue's sessions closed)
// The driver waits between the two until the server shows every waiter queued and watching.

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

final class CuratorQueue {
    private static List<CuratorFramework> clients = new ArrayList<>();
    private static InterProcessMutex holder;
    private static List<Thread> threads = new ArrayList<>();
    private static long[] handoffs;
    private static final AtomicInteger taken = new AtomicInteger();
    private static final AtomicLong releasedAt = new AtomicLong(-1);
    private static volatile Exception failure;

    private static CuratorFramework open(String connect) throws Exception {
        // The same settings as CuratorBench's sessions.
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new ExponentialBackoffRetry(100, 3))
                .build();
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("could not connect to " + connect);
        }
        return c;
    }

    /** Opens the holder's session and `sessions` more, takes the lock, starts the waiters. */
    static void start(String connect, String path, int waiters, int sessions) throws Exception {
        if (!threads.isEmpty()) throw new IllegalStateException("a queue is already running");
        clients.add(open(connect));
        for (int s = 0; s < sessions; s++) clients.add(open(connect));
        holder = new InterProcessMutex(clients.get(0), path);
        holder.acquire();
        handoffs = new long[waiters];
        taken.set(0);
        releasedAt.set(-1);
        failure = null;
        for (int i = 0; i < waiters; i++) {
            final InterProcessMutex lock = new InterProcessMutex(clients.get(1 + i % sessions), path);
            Thread t = new Thread(() -> {
                try {
                    lock.acquire();
                    long now = System.nanoTime();
                    long prev = releasedAt.get();
                    int k = taken.getAndIncrement();
                    if (k < handoffs.length) handoffs[k] = now - prev;
                    releasedAt.set(System.nanoTime());
                    lock.release();
                } catch (Exception e) {
                    failure = e;
                }
            });
            threads.add(t);
            t.start();
        }
    }

    /** Closes the queue's sessions (after the drain's counters were read). */
    static void close() {
        for (CuratorFramework c : clients) c.close();
        clients.clear();
    }

    /** Releases the holder's lock and waits for every waiter: {n, p50, p99, elapsed}. */
    static long[] drain() throws Exception {
        if (holder == null) throw new IllegalStateException("no queue");
        long start = System.nanoTime();
        releasedAt.set(start);
        holder.release();
        for (Thread t : threads) t.join();
        long elapsed = System.nanoTime() - start;
        threads.clear();
        holder = null;
        if (failure != null) throw failure;
        int n = taken.get();
        long[] sorted = java.util.Arrays.copyOf(handoffs, Math.min(n, handoffs.length));
        java.util.Arrays.sort(sorted);
        int m = sorted.length;
        if (m == 0) return new long[] {0, 0, 0, elapsed};
        return new long[] {n, sorted[m / 2], sorted[Math.min(m - 1, m * 99 / 100)], elapsed};
    }
}
