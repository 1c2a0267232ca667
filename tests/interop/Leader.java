// The Curator 5.4 side of the leader-election interoperability tests (tests/interop/leader.rs).
// One process is one Curator client (session timeout 2 s, so a kill -9 hands over quickly)
// with one participant; the Rust test drives it through arguments, stdin and stdout.
//
//   Leader CONNECT latch|selector PATH ID
//       starts a LeaderLatch (close mode NOTIFY_LEADER) or a LeaderSelector (auto requeue)
//       with id ID; prints CLOCK <nanoTime> and READY. Prints LEADING when it becomes leader
//       and NOT-LEADING when it stops. A selector's takeLeadership leads until YIELD (or an
//       interrupt). Records are "<enter|exit> x <ID> <System.nanoTime()>", printed on DUMP.
//       Commands on stdin:
//         LEADER        prints "LEADER <id> <isLeader>" (getLeader)
//         PARTICIPANTS  prints "P <id> <isLeader>" per participant (getParticipants), then END
//         HAS           prints "HAS <hasLeadership>"
//         YIELD         a selector's takeLeadership returns (it queues again)
//         DUMP          prints the records, then END
//         CLOSE         records the exit if leading, closes, prints the records, END, CLOSED
//                       and exits

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.Semaphore;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class Leader {
    private static final List<String> records = new ArrayList<>();
    private static volatile boolean leading = false;

    private static synchronized void record(String what, String id) {
        records.add(what + " x " + id + " " + System.nanoTime());
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String kind = args[1];
        String path = args[2];
        String id = args[3];
        Interop.tlsFromEnv(); // INTEROP_TLS_CA=ca.pem: over TLS
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(2000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new ExponentialBackoffRetry(100, 10))
                .build();
        client.start();
        client.blockUntilConnected();
        Semaphore yield = new Semaphore(0);
        LeaderLatch latch = null;
        LeaderSelector selector = null;
        if (kind.equals("latch")) {
            latch = new LeaderLatch(client, path, id, LeaderLatch.CloseMode.NOTIFY_LEADER);
            latch.addListener(new LeaderLatchListener() {
                @Override public void isLeader() { record("enter", id); leading = true; say("LEADING"); }
                @Override public void notLeader() {
                    if (leading) { record("exit", id); }
                    leading = false;
                    say("NOT-LEADING");
                }
            });
            latch.start();
        } else {
            selector = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                @Override public void takeLeadership(CuratorFramework c) throws Exception {
                    record("enter", id);
                    leading = true;
                    say("LEADING");
                    try {
                        yield.acquire();
                    } finally {
                        leading = false;
                        record("exit", id);
                        say("NOT-LEADING");
                    }
                }
            });
            selector.setId(id);
            selector.autoRequeue();
            selector.start();
        }
        say("CLOCK " + System.nanoTime());
        say("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            switch (line) {
                case "LEADER": {
                    Participant p = latch != null ? latch.getLeader() : selector.getLeader();
                    say("LEADER " + p.getId() + " " + p.isLeader());
                    break;
                }
                case "PARTICIPANTS": {
                    Collection<Participant> ps = latch != null ? latch.getParticipants() : selector.getParticipants();
                    for (Participant p : ps) say("P " + p.getId() + " " + p.isLeader());
                    say("END");
                    break;
                }
                case "HAS":
                    say("HAS " + (latch != null ? latch.hasLeadership() : selector.hasLeadership()));
                    break;
                case "YIELD":
                    yield.release();
                    break;
                case "DUMP":
                    synchronized (Leader.class) {
                        for (String r : records) say(r);
                    }
                    say("END");
                    break;
                case "CLOSE":
                    if (leading && latch != null) { leading = false; record("exit", id); }
                    if (latch != null) latch.close(); else { yield.release(); selector.close(); }
                    synchronized (Leader.class) {
                        for (String r : records) say(r);
                    }
                    say("END");
                    say("CLOSED");
                    client.close();
                    return;
                default: throw new IllegalArgumentException("unknown command " + line);
            }
        }
    }
}
