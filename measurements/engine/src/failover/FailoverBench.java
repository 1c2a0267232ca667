// The Curator 5.4 side of `cargo run --release --features testing --example failover`
// (driven by measurements/engine/src/failover/curator_side.rs).
//
// Usage: java FailoverBench <connectString> <clients>
// Prints "READY", then runs one command per stdin line, answering each with one line:
//   open <i>                 -> SESSION <i> <session id, hex>  (client i, reopened if open)
//   start <path> <holdMs>    -> OK  (every client loops acquire / hold / release on <path>;
//                               connect attempt counts restart from 0)
//   close                    -> OK  (every client closed)
//   holder                   -> HOLDER <i>  (the client holding the lock now, -1 if none)
//   stop                     -> one "ACQ <i> <acquired ns> <released ns>" line per hold, then
//                               "END errors=<n> lost=<n> attempts=<a0>,<a1>,..."
//   quit
// Times are System.nanoTime() (CLOCK_MONOTONIC on Linux, the clock the Rust side reads).
// Connect attempts are counted by a HostProvider around ZooKeeper's StaticHostProvider:
// the client takes one host from it per connection attempt (next(spinDelay)).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZookeeperFactory;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.ConnectStringParser;
import org.apache.zookeeper.client.HostProvider;
import org.apache.zookeeper.client.StaticHostProvider;
import org.apache.zookeeper.client.ZKClientConfig;

public class FailoverBench {
    static final class CountingHosts implements HostProvider {
        final StaticHostProvider inner;
        final AtomicLong count;

        CountingHosts(Collection<InetSocketAddress> hosts, AtomicLong count) {
            this.inner = new StaticHostProvider(hosts);
            this.count = count;
        }

        public int size() { return inner.size(); }

        public InetSocketAddress next(long spinDelay) {
            count.incrementAndGet();
            return inner.next(spinDelay);
        }

        public void onConnected() { inner.onConnected(); }

        public boolean updateServerList(Collection<InetSocketAddress> s, InetSocketAddress c) {
            return inner.updateServerList(s, c);
        }
    }

    static String connect;
    static CuratorFramework[] clients;
    static AtomicLong[] attempts;
    static volatile int holder = -1;
    static volatile boolean running;
    static final List<long[]> holds = new ArrayList<>();
    static final AtomicLong errors = new AtomicLong();
    static final AtomicLong lost = new AtomicLong();
    static Thread[] loops;

    static CuratorFramework open(int i) throws Exception {
        final AtomicLong count = attempts[i];
        ZookeeperFactory factory = new ZookeeperFactory() {
            public ZooKeeper newZooKeeper(String cs, int timeout, Watcher w, boolean ro)
                    throws Exception {
                return newZooKeeper(cs, timeout, w, ro, new ZKClientConfig());
            }

            public ZooKeeper newZooKeeper(String cs, int timeout, Watcher w, boolean ro,
                    ZKClientConfig config) throws Exception {
                HostProvider hosts = new CountingHosts(
                        new ConnectStringParser(cs).getServerAddresses(), count);
                return new ZooKeeper(cs, timeout, w, ro, hosts, config);
            }
        };
        // Same session timeout as our side (10 s), Curator's usual retry policy.
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new ExponentialBackoffRetry(100, 3))
                .zookeeperFactory(factory)
                .build();
        c.getConnectionStateListenable().addListener((client, state) -> {
            if (state == ConnectionState.LOST) lost.incrementAndGet();
        });
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new Exception("could not connect to " + connect);
        }
        return c;
    }

    static void loop(int i, String path, long holdMs) {
        InterProcessMutex lock = new InterProcessMutex(clients[i], path);
        while (running) {
            try {
                if (!lock.acquire(500, TimeUnit.MILLISECONDS)) continue;
            } catch (Exception e) {
                errors.incrementAndGet();
                continue;
            }
            long acquired = System.nanoTime();
            holder = i;
            try {
                Thread.sleep(holdMs);
            } catch (InterruptedException e) {
                // stop: release below
            }
            holder = -1;
            long released = System.nanoTime();
            try {
                lock.release();
            } catch (Exception e) {
                errors.incrementAndGet();
            }
            synchronized (holds) {
                holds.add(new long[] {i, acquired, released});
            }
        }
    }

    public static void main(String[] args) throws Exception {
        connect = args[0];
        int n = Integer.parseInt(args[1]);
        clients = new CuratorFramework[n];
        attempts = new AtomicLong[n];
        for (int i = 0; i < n; i++) attempts[i] = new AtomicLong();
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
                        for (CuratorFramework c : clients) if (c != null) c.close();
                        return;
                    case "open": {
                        int i = Integer.parseInt(w[1]);
                        if (clients[i] != null) clients[i].close();
                        clients[i] = open(i);
                        long sid = clients[i].getZookeeperClient().getZooKeeper().getSessionId();
                        System.out.println("SESSION " + i + " " + Long.toHexString(sid));
                        break;
                    }
                    case "start": {
                        String path = w[1];
                        long holdMs = Long.parseLong(w[2]);
                        synchronized (holds) { holds.clear(); }
                        errors.set(0);
                        for (AtomicLong a : attempts) a.set(0);
                        lost.set(0);
                        running = true;
                        loops = new Thread[n];
                        for (int i = 0; i < n; i++) {
                            final int k = i;
                            loops[i] = new Thread(() -> loop(k, path, holdMs));
                            loops[i].start();
                        }
                        System.out.println("OK");
                        break;
                    }
                    case "close":
                        for (int i = 0; i < n; i++) {
                            if (clients[i] != null) clients[i].close();
                            clients[i] = null;
                        }
                        System.out.println("OK");
                        break;
                    case "holder":
                        System.out.println("HOLDER " + holder);
                        break;
                    case "stop": {
                        running = false;
                        for (Thread t : loops) t.join(60000);
                        StringBuilder out = new StringBuilder();
                        synchronized (holds) {
                            for (long[] h : holds) {
                                out.append("ACQ ").append(h[0]).append(' ').append(h[1])
                                        .append(' ').append(h[2]).append('\n');
                            }
                        }
                        out.append("END errors=").append(errors.get()).append(" lost=")
                                .append(lost.get()).append(" attempts=");
                        for (int i = 0; i < n; i++) {
                            if (i > 0) out.append(',');
                            out.append(attempts[i].get());
                        }
                        System.out.println(out);
                        break;
                    }
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
