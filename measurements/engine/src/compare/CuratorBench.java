// The Curator 5.4 side of `cargo run --release --features testing --example compare`
// (driven by measurements/engine/src/compare/curator_side.rs).
//
// Usage: java CuratorBench <connectString> <sessions>
// Opens <sessions> CuratorFrameworks (one ZooKeeper session each), prints "READY", then runs
// one command per stdin line and answers each with one parseable line:
//   roundtrip <path> <n>                       -> RESULT kind=roundtrip n=.. p50_ns=.. p99_ns=.. elapsed_ns=..
//   uncontended <recipe> <path> <n>            -> RESULT kind=uncontended n=.. p50_ns=.. p99_ns=.. elapsed_ns=..
//   contended <recipe> <path> <sessions> <count> -> RESULT kind=contended n=.. p50_ns=.. p99_ns=.. elapsed_ns=..
//   queue ... / drain                          -> the long queue, see CuratorQueue.java
//   quit
// recipe: mutex | semaphore-mutex | write | read (contended also read-write: writers and
// readers of one lock, alternating; see contenderRecipe). Failures print "ERROR <message>".
// The measurement loops mirror measurements/engine/src/compare/ours.rs line for line, so the numbers compare.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBench {
    private static CuratorFramework[] clients;

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        int sessions = Integer.parseInt(args[1]);
        clients = new CuratorFramework[sessions];
        for (int i = 0; i < sessions; i++) {
            // Same session timeout as our side (10 s), Curator's usual retry policy.
            clients[i] = CuratorFrameworkFactory.builder()
                    .connectString(connect)
                    .sessionTimeoutMs(10000)
                    .connectionTimeoutMs(10000)
                    .retryPolicy(new ExponentialBackoffRetry(100, 3))
                    .build();
            clients[i].start();
            if (!clients[i].blockUntilConnected(30, TimeUnit.SECONDS)) {
                System.out.println("ERROR could not connect to " + connect);
                return;
            }
        }
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 0 || w[0].isEmpty()) continue;
            if (w[0].equals("quit")) break;
            try {
                long[] r;
                switch (w[0]) {
                    case "roundtrip":
                        r = roundtrip(w[1], Integer.parseInt(w[2]));
                        break;
                    case "uncontended":
                        r = uncontended(w[1], w[2], Integer.parseInt(w[3]));
                        break;
                    case "contended":
                        r = contended(w[1], w[2], Integer.parseInt(w[3]), Integer.parseInt(w[4]));
                        break;
                    case "queue":
                        CuratorQueue.start(w[1], w[2], Integer.parseInt(w[3]), Integer.parseInt(w[4]));
                        System.out.println("STARTED");
                        System.out.flush();
                        continue;
                    case "queue-close":
                        CuratorQueue.close();
                        System.out.println("CLOSED");
                        System.out.flush();
                        continue;
                    case "drain":
                        r = CuratorQueue.drain();
                        break;
                    default:
                        throw new IllegalArgumentException("unknown command " + w[0]);
                }
                System.out.println("RESULT kind=" + w[0] + " n=" + r[0] + " p50_ns=" + r[1]
                        + " p99_ns=" + r[2] + " elapsed_ns=" + r[3]);
            } catch (Exception e) {
                System.out.println("ERROR " + e.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
        for (CuratorFramework c : clients) c.close();
    }

    private static InterProcessLock recipe(CuratorFramework client, String recipe, String path) {
        switch (recipe) {
            case "mutex": return new InterProcessMutex(client, path);
            case "semaphore-mutex": return new InterProcessSemaphoreMutex(client, path);
            case "write": return new InterProcessReadWriteLock(client, path).writeLock();
            case "read": return new InterProcessReadWriteLock(client, path).readLock();
            default: throw new IllegalArgumentException("unknown recipe " + recipe);
        }
    }

    /** The recipe of contender `index`: read-write alternates a writer (even) and a reader (odd). */
    private static String contenderRecipe(String recipe, int index) {
        if (!recipe.equals("read-write")) return recipe;
        return index % 2 == 0 ? "write" : "read";
    }

    /** {n, p50, p99, elapsed} of per-operation durations in nanoseconds. */
    private static long[] summary(long[] samples, int n, long elapsed) {
        long[] s = Arrays.copyOf(samples, n);
        Arrays.sort(s);
        if (n == 0) return new long[] {0, 0, 0, elapsed};
        return new long[] {n, s[n / 2], s[Math.min(n - 1, n * 99 / 100)], elapsed};
    }

    private static long[] roundtrip(String path, int n) throws Exception {
        CuratorFramework client = clients[0];
        long[] samples = new long[n];
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            long t = System.nanoTime();
            client.checkExists().forPath(path);
            samples[i] = System.nanoTime() - t;
        }
        return summary(samples, n, System.nanoTime() - start);
    }

    private static long[] uncontended(String recipe, String path, int n) throws Exception {
        InterProcessLock lock = recipe(clients[0], recipe, path);
        long[] samples = new long[n];
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            long t = System.nanoTime();
            lock.acquire();
            lock.release();
            samples[i] = System.nanoTime() - t;
        }
        return summary(samples, n, System.nanoTime() - start);
    }

    /**
     * One thread per session, each with its own lock object of `recipe`, zero hold time,
     * until `count` acquisitions in total. The
     * hand-off latency is from the moment a holder calls release to the moment the next
     * holder's acquire returns.
     */
    private static long[] contended(String recipe, String path, int sessions, int count)
            throws Exception {
        if (sessions > clients.length) throw new IllegalArgumentException("too many sessions");
        AtomicLong taken = new AtomicLong();
        AtomicLong releasedAt = new AtomicLong(-1);
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        List<long[]> perThread = new ArrayList<>();
        int[] lengths = new int[sessions];
        Exception[] failure = new Exception[1];
        for (int s = 0; s < sessions; s++) {
            final int id = s;
            final long[] handoffs = new long[count + sessions];
            perThread.add(handoffs);
            final InterProcessLock lock = recipe(clients[s], contenderRecipe(recipe, s), path);
            Thread t = new Thread(() -> {
                try {
                    go.await();
                    int k = 0;
                    while (true) {
                        lock.acquire();
                        long now = System.nanoTime();
                        long prev = releasedAt.get();
                        if (prev >= 0 && k < handoffs.length) handoffs[k++] = now - prev;
                        long total = taken.incrementAndGet();
                        releasedAt.set(System.nanoTime());
                        lock.release();
                        if (total >= count) break;
                    }
                    lengths[id] = k;
                } catch (Exception e) {
                    synchronized (failure) { failure[0] = e; }
                }
            });
            threads.add(t);
            t.start();
        }
        long start = System.nanoTime();
        go.countDown();
        for (Thread t : threads) t.join();
        long elapsed = System.nanoTime() - start;
        if (failure[0] != null) throw failure[0];
        int total = 0;
        for (int l : lengths) total += l;
        long[] all = new long[total];
        int at = 0;
        for (int s = 0; s < sessions; s++) {
            System.arraycopy(perThread.get(s), 0, all, at, lengths[s]);
            at += lengths[s];
        }
        long[] r = summary(all, total, elapsed);
        r[0] = taken.get();
        return r;
    }
}
