// One Curator 5.4 LeaderLatch participant in its own JVM, for the election failover measurement
// (measurements/engine/src/failover/election/; the zk-locks participant speaks the same lines,
// participant.rs).
//
// Usage: java ElectionParticipant <connectString> <latchPath> <id>
// Connects (session 10 s, Curator's usual retry policy) and prints "SESSION <id, hex>". Commands
// on stdin, one a line:
//   reopen  closes the client, opens another: "SESSION <id, hex>" again (placement on a member)
//   start   starts the latch; from then on "LEADING <ns> <term>" when it becomes leader and
//           "NOT-LEADING <ns>" when it stops (term: the sequence number of its latch node)
//   has     "HAS <true|false> <ns>" (hasLeadership)
//   act     a read through the session (checkExists), then "ACTED <ns>"
//   close   prints "CLOSING <ns>", closes the latch (silently, Curator's default) and the
//           client, prints "CLOSED <ns>" and exits
// End of input exits. Times are System.nanoTime() (CLOCK_MONOTONIC on Linux, the clock the
// Rust side reads). Errors are "ERROR <text>".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class ElectionParticipant {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static CuratorFramework open(String connect) throws Exception {
        // The failover program's client settings: session 10 s, the usual retry policy.
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new ExponentialBackoffRetry(100, 3))
                .build();
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new Exception("could not connect to " + connect);
        }
        say("SESSION " + Long.toHexString(c.getZookeeperClient().getZooKeeper().getSessionId()));
        return c;
    }

    static String term(LeaderLatch latch) {
        String path = latch.getOurPath();
        if (path == null) return "-";
        return path.substring(path.length() - 10);
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        String id = args[2];
        CuratorFramework client = open(connect);
        LeaderLatch latch = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                switch (line.trim()) {
                    case "reopen":
                        client.close();
                        client = open(connect);
                        break;
                    case "start": {
                        final LeaderLatch l = new LeaderLatch(client, path, id);
                        l.addListener(new LeaderLatchListener() {
                            @Override public void isLeader() {
                                say("LEADING " + System.nanoTime() + " " + term(l));
                            }
                            @Override public void notLeader() {
                                say("NOT-LEADING " + System.nanoTime());
                            }
                        });
                        l.start();
                        latch = l;
                        break;
                    }
                    case "act":
                        client.checkExists().forPath(path);
                        say("ACTED " + System.nanoTime());
                        break;
                    case "has":
                        say("HAS " + (latch != null && latch.hasLeadership()) + " " + System.nanoTime());
                        break;
                    case "close":
                        say("CLOSING " + System.nanoTime());
                        if (latch != null) latch.close();
                        client.close();
                        say("CLOSED " + System.nanoTime());
                        return;
                    default:
                        say("ERROR unknown command " + line);
                }
            } catch (Exception e) {
                say("ERROR " + e.toString().replace('\n', ' '));
            }
        }
        client.close();
    }
}
