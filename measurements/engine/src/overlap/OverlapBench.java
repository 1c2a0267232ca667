// The Curator 5.4 holder of `cargo run --release --features testing --example overlap`
// (driven by measurements/engine/src/overlap/sides.rs).
//
// Usage: java OverlapBench
// Prints "READY", then runs one command per stdin line, answering each with one line:
//   hold <connectString> <sessionMs> <path> -> HELD <acquired ns>  (a new client takes the
//                                              mutex at <path>; its state changes are timed)
//   ends <waitMs>   -> ENDS <first SUSPENDED ns or -1> <first LOST ns or -1>, once LOST was
//                      seen or <waitMs> passed
//   close           -> OK  (the client closed)
//   quit
// Times are System.nanoTime() (CLOCK_MONOTONIC on Linux, the clock the Rust side reads).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class OverlapBench {
    static CuratorFramework client;
    static final AtomicLong suspended = new AtomicLong(-1);
    static final AtomicLong lost = new AtomicLong(-1);
    static CountDownLatch lostLatch = new CountDownLatch(1);

    static long hold(String connect, int sessionMs, String path) throws Exception {
        suspended.set(-1);
        lost.set(-1);
        lostLatch = new CountDownLatch(1);
        final CountDownLatch seen = lostLatch;
        // Curator's usual retry policy; the connection timeout as long as the session.
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(sessionMs)
                .retryPolicy(new ExponentialBackoffRetry(100, 3))
                .build();
        c.getConnectionStateListenable().addListener((cl, state) -> {
            long now = System.nanoTime();
            if (state == ConnectionState.SUSPENDED) suspended.compareAndSet(-1, now);
            if (state == ConnectionState.LOST) {
                lost.compareAndSet(-1, now);
                seen.countDown();
            }
        });
        c.start();
        client = c;
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new Exception("could not connect to " + connect);
        }
        InterProcessMutex lock = new InterProcessMutex(c, path);
        if (!lock.acquire(30, TimeUnit.SECONDS)) throw new Exception("lock not acquired");
        return System.nanoTime();
    }

    public static void main(String[] args) throws Exception {
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 0 || w[0].isEmpty()) continue;
            try {
                switch (w[0]) {
                    case "quit":
                        if (client != null) client.close();
                        return;
                    case "hold":
                        System.out.println("HELD " + hold(w[1], Integer.parseInt(w[2]), w[3]));
                        break;
                    case "ends":
                        lostLatch.await(Long.parseLong(w[1]), TimeUnit.MILLISECONDS);
                        System.out.println("ENDS " + suspended.get() + " " + lost.get());
                        break;
                    case "close":
                        if (client != null) client.close();
                        client = null;
                        System.out.println("OK");
                        break;
                    default:
                        System.out.println("ERROR unknown command " + w[0]);
                }
            } catch (Exception e) {
                System.out.println("ERROR " + e.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
    }
}
