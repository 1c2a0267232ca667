// The Curator 5.4 side of the interoperability tests (tests/interop.rs). One process is one
// Curator client; the Rust test drives it through arguments, stdin and stdout.
//
//   Interop loop CONNECT mutex|rw|sem PATH N ID [MAX]
//       warms up, prints CLOCK <nanoTime> and READY, waits for GO on stdin, then N times: acquire,
//       record enter, hold ~1 ms, record exit, release; prints the records and DONE.
//       Records are "<enter|exit> <r|w|x> <ID> <System.nanoTime()>" (CLOCK_MONOTONIC on Linux).
//   Interop hold CONNECT mutex|downgrade|revocable|write PATH
//       acquires (downgrade: write, then read, keeping both), prints HELD <node path>, then
//       serves stdin commands: LIST (participants as "P <path>" for a mutex; "R"/"W" read/write
//       participants and "S" all children in Curator's sort order for a r/w lock; then END),
//       QUEUE-READ / QUEUE-WRITE (another lock object waits on a thread), RELEASE (exit).
//       revocable: makeRevocable, and on revocation releases and prints REVOKED.
//       write: once the write lock is held, prints HELD, AT <nanoTime>, releases and exits.
//       read-section / write-section: once the read (write) lock is held, a 50 ms section,
//       then releases, prints SECTION <r|w> <enter nanoTime> <exit nanoTime> and exits.
//   Interop revoke CONNECT NODE_PATH
//       Revoker.attemptRevoke; prints OK.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.ACLProvider;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.LockInternals;
import org.apache.curator.framework.recipes.locks.LockInternalsSorter;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;

public class Interop {
    private static final List<String> records = new ArrayList<>();

    private static void record(String what, String kind, String id) {
        records.add(what + " " + kind + " " + id + " " + System.nanoTime());
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static void holdBriefly() throws InterruptedException {
        // Widens the critical section so that an overlap, if the locks allowed one, is seen.
        Thread.sleep(1);
    }

    // With INTEROP_TLS_CA=ca.pem: ZooKeeper's client TLS settings (Netty socket, the CA as a
    // PEM trust store), read from system properties when a ZooKeeper handle is made. Leader.java
    // calls it too.
    static void tlsFromEnv() {
        String tlsCa = System.getenv("INTEROP_TLS_CA");
        if (tlsCa != null) {
            System.setProperty("zookeeper.clientCnxnSocket", "org.apache.zookeeper.ClientCnxnSocketNetty");
            System.setProperty("zookeeper.client.secure", "true");
            System.setProperty("zookeeper.ssl.trustStore.location", tlsCa);
            System.setProperty("zookeeper.ssl.trustStore.type", "PEM");
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        CuratorFrameworkFactory.Builder builder = CuratorFrameworkFactory.builder()
                .connectString(args[1])
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new ExponentialBackoffRetry(100, 10));
        // With INTEROP_DIGEST=user:password: digest credentials and CREATOR_ALL_ACL on every
        // node Curator creates (lock directories included), as a secured deployment would.
        String digest = System.getenv("INTEROP_DIGEST");
        if (digest != null) {
            builder = builder.authorization("digest", digest.getBytes(StandardCharsets.UTF_8))
                    .aclProvider(new ACLProvider() {
                        @Override public List<ACL> getDefaultAcl() { return ZooDefs.Ids.CREATOR_ALL_ACL; }
                        @Override public List<ACL> getAclForPath(String path) { return ZooDefs.Ids.CREATOR_ALL_ACL; }
                    });
        }
        tlsFromEnv();
        CuratorFramework client = builder.build();
        client.start();
        client.blockUntilConnected();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        try {
            switch (mode) {
                case "loop": loop(client, in, args); break;
                case "hold": hold(client, in, args[2], args[3]); break;
                case "revoke": Revoker.attemptRevoke(client, args[2]); say("OK"); break;
                default: throw new IllegalArgumentException("unknown mode " + mode);
            }
        } finally {
            client.close();
        }
    }

    private static void loop(CuratorFramework client, BufferedReader in, String[] args) throws Exception {
        String recipe = args[2];
        String path = args[3];
        int n = Integer.parseInt(args[4]);
        String id = args[5];
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        InterProcessSemaphoreV2 semaphore =
                recipe.equals("sem") ? new InterProcessSemaphoreV2(client, path, Integer.parseInt(args[6])) : null;
        // Warm up (class loading, JIT, the lock's parents) so the timed run really contends.
        switch (recipe) {
            case "mutex": mutex.acquire(); mutex.release(); break;
            case "rw": rw.writeLock().acquire(); rw.writeLock().release(); rw.readLock().acquire(); rw.readLock().release(); break;
            case "sem": semaphore.returnLease(semaphore.acquire()); break;
            default: throw new IllegalArgumentException("unknown recipe " + recipe);
        }
        say("CLOCK " + System.nanoTime());
        say("READY");
        if (!"GO".equals(in.readLine())) throw new IllegalStateException("expected GO");
        for (int i = 0; i < n; i++) {
            switch (recipe) {
                case "mutex":
                    mutex.acquire();
                    record("enter", "x", id);
                    holdBriefly();
                    record("exit", "x", id);
                    mutex.release();
                    break;
                case "rw": {
                    // One write in three, spread over the run.
                    boolean write = Math.floorMod(i + id.hashCode(), 3) == 0;
                    InterProcessLock lock = write ? rw.writeLock() : rw.readLock();
                    String kind = write ? "w" : "r";
                    lock.acquire();
                    record("enter", kind, id);
                    holdBriefly();
                    record("exit", kind, id);
                    lock.release();
                    break;
                }
                case "sem": {
                    Lease lease = semaphore.acquire();
                    record("enter", "x", id);
                    holdBriefly();
                    record("exit", "x", id);
                    semaphore.returnLease(lease);
                    break;
                }
                default: throw new IllegalArgumentException("unknown recipe " + recipe);
            }
        }
        for (String r : records) say(r);
        say("DONE");
    }

    /** Curator's own r/w sort (a private class): exactly what its read/write lock sorts by. */
    private static LockInternalsSorter readWriteSorter() throws Exception {
        Class<?> c = Class.forName(
                "org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock$SortingLockInternalsDriver");
        Constructor<?> ctor = c.getDeclaredConstructor();
        ctor.setAccessible(true);
        return (LockInternalsSorter) ctor.newInstance();
    }

    private static void hold(CuratorFramework client, BufferedReader in, String kind, String path) throws Exception {
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        switch (kind) {
            case "mutex":
                mutex.acquire();
                break;
            case "downgrade":
                rw.writeLock().acquire();
                rw.readLock().acquire();
                break;
            case "write":
                // Prints HELD and AT <nanoTime> once the write lock is held, then exits.
                rw.writeLock().acquire();
                long at = System.nanoTime();
                say("HELD " + rw.writeLock().getParticipantNodes().iterator().next());
                say("AT " + at);
                rw.writeLock().release();
                return;
            case "read-section":
            case "write-section": {
                InterProcessLock lock = kind.startsWith("read") ? rw.readLock() : rw.writeLock();
                lock.acquire();
                long enter = System.nanoTime();
                holdBriefly();
                Thread.sleep(50);
                long exit = System.nanoTime();
                lock.release();
                say("SECTION " + kind.charAt(0) + " " + enter + " " + exit);
                return;
            }
            case "revocable": {
                CountDownLatch revoked = new CountDownLatch(1);
                mutex.makeRevocable(lock -> revoked.countDown());
                mutex.acquire();
                say("HELD " + mutex.getParticipantNodes().iterator().next());
                revoked.await();
                mutex.release();
                say("REVOKED");
                return;
            }
            default: throw new IllegalArgumentException("unknown kind " + kind);
        }
        say("HELD " + (kind.equals("mutex") ? mutex.getParticipantNodes() : rw.writeLock().getParticipantNodes())
                .iterator().next());
        String line;
        while ((line = in.readLine()) != null) {
            switch (line) {
                case "LIST":
                    if (kind.equals("mutex")) {
                        for (String p : new InterProcessMutex(client, path).getParticipantNodes()) say("P " + p);
                    } else {
                        InterProcessReadWriteLock other = new InterProcessReadWriteLock(client, path);
                        for (String p : other.readLock().getParticipantNodes()) say("R " + p);
                        for (String p : other.writeLock().getParticipantNodes()) say("W " + p);
                        for (String p : LockInternals.getSortedChildren(client, path, "__READ__", readWriteSorter()))
                            say("S " + p);
                    }
                    say("END");
                    break;
                case "QUEUE-READ":
                case "QUEUE-WRITE": {
                    InterProcessReadWriteLock other = new InterProcessReadWriteLock(client, path);
                    InterProcessLock lock = line.equals("QUEUE-READ") ? other.readLock() : other.writeLock();
                    Thread t = new Thread(() -> {
                        try {
                            lock.acquire();
                            lock.release();
                        } catch (Exception e) {
                            // The client closes under it at exit.
                        }
                    });
                    t.setDaemon(true);
                    t.start();
                    break;
                }
                case "RELEASE":
                    if (kind.equals("mutex")) {
                        mutex.release();
                    } else {
                        rw.writeLock().release();
                        rw.readLock().release();
                    }
                    say("RELEASED");
                    return;
                default: throw new IllegalArgumentException("unknown command " + line);
            }
        }
    }
}
