package tom.analysis;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF10;
import org.apache.spark.sql.api.java.UDF7;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * The fast path's order check with no shuffle: {@code tom_order_mark(file, block_start, peer, good,
 * index, clock, pid)} compares each good record with the previous good record this task read from
 * the same file.
 *
 * <p>The mark is 0 only if the row is its file's first good row, read from the file's first split
 * ({@code block_start} 0), with index 1; or the previous good row this task read from the same file
 * has the same peer, index one less and a lower key {@code (clock, host, port)}, compared as
 * {@code analysis.checks.key_after} does (clock, then host byte-wise, then port as an integer; a port
 * that is not plain digits is never "above"). So if no row of a file is marked, one task read all of
 * its good rows, in order 1..n with strictly increasing keys, whatever the splits: the window over
 * (peer, index) would find nothing either, provided each peer's records are in one file (the caller
 * checks that). A mark only sends the run to the exact checks.
 *
 * <p>Evaluation: the function is non-deterministic (never reordered, merged or evaluated twice),
 * sits in a projection right above the file scan, and is called once per row in scan order; every
 * task deserialises its own instance, so the fields below are one task's state. Reading each file
 * whole in its own task (analysis/order_mark.py) is what makes a healthy run unmarked.
 *
 * <p>The mark's bits: {@link #DISORDER}, {@link #INDEX_FAULT} (also: a file's first good row not in
 * its first split), {@link #PEER_CHANGE}.
 *
 * <p>The sequencer and causal orders have their own functions, {@link Sequencer} and {@link Causal}
 * (registered as {@code tom_order_mark_sequencer} and {@code tom_order_mark_causal}), with the same
 * evaluation, the same index and peer marks, and {@link #DISORDER} for their own order rules.
 */
@SuppressWarnings("rawtypes")
public final class OrderMark implements UDF7 {
    private static final long serialVersionUID = 1L;
    public static final String NAME = "tom_order_mark";
    public static final int DISORDER = 1;
    public static final int INDEX_FAULT = 2;
    public static final int PEER_CHANGE = 4;

    /** Registers {@link #NAME} and the numbered orders' functions (non-deterministic: never
     * reordered, merged or evaluated twice). */
    public static void register(SparkSession spark) {
        spark.udf().register(NAME, functions.udf(new OrderMark(), DataTypes.IntegerType).asNondeterministic());
        spark.udf().register(Sequencer.NAME,
                functions.udf(new Sequencer(), DataTypes.IntegerType).asNondeterministic());
        spark.udf().register(Causal.NAME,
                functions.udf(new Causal(), DataTypes.IntegerType).asNondeterministic());
    }

    private final Cursor cursor = new Cursor();
    private long clock;
    private String pid;

    /** The raw interface's method (so that a compiler without generics, Janino, builds this file too). */
    @Override
    public Object call(Object file, Object blockStart, Object peer, Object good, Object index, Object clock,
                       Object pid) {
        return mark((String) file, (Long) blockStart, (String) peer, (Boolean) good, (Long) index, (Long) clock,
                    (String) pid);
    }

    private Integer mark(String file, Long blockStart, String peer, Boolean good, Long index, Long clock,
                         String pid) {
        cursor.fileChanged(file);
        if (good == null || !good) {
            return 0;
        }
        boolean seen = cursor.seen();
        int mark = cursor.step(blockStart, peer, index);
        if (seen && !after(clock, pid)) {
            mark |= DISORDER;
        }
        this.clock = clock;
        this.pid = pid;
        return mark;
    }

    /** {@code (clock, pid)} above the previous good row's key; the pid is split only for equal clocks. */
    private boolean after(long clock, String pid) {
        if (clock != this.clock) {
            return clock > this.clock;
        }
        int c = compareUnsigned(host(pid), host(this.pid));
        if (c != 0) {
            return c > 0;
        }
        long port = port(pid);
        long previous = port(this.pid);
        return port >= 0 && previous >= 0 && port > previous;
    }

    private static byte[] host(String pid) {
        return pid.substring(0, Math.max(pid.lastIndexOf(':'), 0)).getBytes(StandardCharsets.UTF_8);
    }

    private static long port(String pid) {
        int colon = pid.lastIndexOf(':');
        return colon < 0 ? -1 : parsePort(pid.substring(colon + 1));
    }

    /** Byte-wise, unsigned: the order of Spark's string comparison (UTF-8 bytes). */
    private static int compareUnsigned(byte[] a, byte[] b) {
        int n = Math.min(a.length, b.length);
        for (int i = 0; i < n; i++) {
            int d = (a[i] & 0xff) - (b[i] & 0xff);
            if (d != 0) {
                return d;
            }
        }
        return a.length - b.length;
    }

    /** The port as a non-negative int; -1 unless it is 1 to 10 ASCII digits that fit an int. */
    private static long parsePort(String s) {
        if (s.isEmpty() || s.length() > 10) {
            return -1;
        }
        long v = 0;
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch < '0' || ch > '9') {
                return -1;
            }
            v = v * 10 + (ch - '0');
        }
        return v > Integer.MAX_VALUE ? -1 : v;
    }

    /**
     * The index and peer marks every order shares: one task's previous good row of the current file.
     * {@link #step} returns {@link #INDEX_FAULT} and {@link #PEER_CHANGE} bits of a good row against
     * the previous one (its file's first good row: index 1 in the first split) and remembers it;
     * {@link #fileChanged} says whether the row starts a new file (then the per-file state is reset).
     */
    private static final class Cursor implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        private String file;
        private boolean seen;
        private String peer;
        private long index;

        boolean fileChanged(String file) {
            if (file.equals(this.file)) {
                return false;
            }
            this.file = file;
            this.seen = false;
            return true;
        }

        boolean seen() {
            return seen;
        }

        int step(long blockStart, String peer, long index) {
            int mark = 0;
            if (!seen) {
                if (index != 1L || blockStart != 0L) {
                    mark |= INDEX_FAULT;
                }
            } else {
                if (!peer.equals(this.peer)) {
                    mark |= PEER_CHANGE;
                }
                if (index != this.index + 1) {
                    mark |= INDEX_FAULT;
                }
            }
            seen = true;
            this.peer = peer;
            this.index = index;
            return mark;
        }
    }

    /**
     * The sequencer order: {@code tom_order_mark_sequencer(file, block_start, peer, good, index, clock,
     * pid, kind, view, seq)}. Besides the index and peer marks, {@link #DISORDER} unless the key
     * {@code (view, seq)} (a view record's seq is 0) is above the previous good row's, and for a
     * message unless its clock is above the clock of the last message of the same origin this task
     * read from the file (each origin's messages in the order it sent them: so no message is
     * delivered twice). A null view or seq is marked.
     */
    public static final class Sequencer
            implements UDF10 {
        private static final long serialVersionUID = 1L;
        public static final String NAME = "tom_order_mark_sequencer";
        private final Cursor cursor = new Cursor();
        private final HashMap<String, Long> lastClock = new HashMap<>();
        private long view;
        private long seq;

        @Override
        public Object call(Object file, Object blockStart, Object peer, Object good, Object index, Object clock,
                           Object pid, Object kind, Object view, Object seq) {
            return mark((String) file, (Long) blockStart, (String) peer, (Boolean) good, (Long) index, (Long) clock,
                        (String) pid, (String) kind, (Long) view, (Long) seq);
        }

        private Integer mark(String file, Long blockStart, String peer, Boolean good, Long index, Long clock,
                             String pid, String kind, Long view, Long seq) {
            if (cursor.fileChanged(file)) {
                lastClock.clear();
            }
            if (good == null || !good) {
                return 0;
            }
            boolean seen = cursor.seen();
            int mark = cursor.step(blockStart, peer, index);
            if (view == null || seq == null) {
                return mark | DISORDER;
            }
            if (seen && (view < this.view || (view == this.view && seq <= this.seq))) {
                mark |= DISORDER;
            }
            this.view = view;
            this.seq = seq;
            if ("message".equals(kind)) {
                Long last = (Long) lastClock.put(pid, clock);
                if (last != null && clock <= last) {
                    mark |= DISORDER;
                }
            }
            return mark;
        }
    }

    /**
     * The causal order: {@code tom_order_mark_causal(file, block_start, peer, good, index, clock, pid,
     * kind, view, vc)}. Besides the index and peer marks, {@link #DISORDER} for a record whose view is
     * below the previous good row's, a view record whose view is not above it, and a message m that
     * breaks the running counts of its view: with {@code n[q]} the number of q's messages of the view
     * this task read before m from the file, m's own number {@code vc[pid]} must be
     * {@code n[pid] + 1} (an origin's messages in the order it numbered them), and for every q in
     * {@code vc}, {@code n[q] >= vc[q]} (q other than m's origin): m comes after the messages that
     * happened before it (analysis/causal.py). Also marked: a message whose clock is not above the
     * last message of its origin in the file, and a message without a vc or without its own count.
     */
    public static final class Causal implements UDF10 {
        private static final long serialVersionUID = 1L;
        public static final String NAME = "tom_order_mark_causal";
        private final Cursor cursor = new Cursor();
        private final HashMap<String, Long> lastClock = new HashMap<>();
        private final HashMap<String, Long> counts = new HashMap<>();
        private Long view;

        @Override
        public Object call(Object file, Object blockStart, Object peer, Object good, Object index, Object clock,
                           Object pid, Object kind, Object view, Object vc) {
            return mark((String) file, (Long) blockStart, (String) peer, (Boolean) good, (Long) index, (Long) clock,
                        (String) pid, (String) kind, (Long) view, (scala.collection.Map) vc);
        }

        private Integer mark(String file, Long blockStart, String peer, Boolean good, Long index, Long clock,
                             String pid, String kind, Long view, scala.collection.Map vc) {
            if (cursor.fileChanged(file)) {
                lastClock.clear();
                counts.clear();
                this.view = null;
            }
            if (good == null || !good) {
                return 0;
            }
            int mark = cursor.step(blockStart, peer, index);
            if (view == null) {
                return mark | DISORDER;
            }
            boolean isView = "view".equals(kind);
            if (this.view != null && (view < this.view || (isView && view <= this.view))) {
                mark |= DISORDER;
            }
            if (this.view == null || !this.view.equals(view)) {
                counts.clear();
                this.view = view;
            }
            if (isView) {
                return mark;
            }
            Long last = (Long) lastClock.put(pid, clock);
            if (last != null && clock <= last) {
                mark |= DISORDER;
            }
            if (vc == null) {
                return mark | DISORDER;
            }
            long own = ((Long) counts.getOrDefault(pid, 0L)).longValue();
            boolean numbered = false;
            scala.collection.Iterator entries = vc.iterator();
            while (entries.hasNext()) {
                scala.Tuple2 e = (scala.Tuple2) entries.next();
                if (e._2() == null) {
                    mark |= DISORDER;
                    continue;
                }
                long count = ((Number) e._2()).longValue();
                if (e._1().equals(pid)) {
                    numbered = true;
                    if (count != own + 1) {
                        mark |= DISORDER;
                    }
                } else if (((Long) counts.getOrDefault(e._1(), 0L)).longValue() < count) {
                    mark |= DISORDER;
                }
            }
            if (!numbered) {
                mark |= DISORDER;
            }
            counts.put(pid, own + 1);
            return mark;
        }
    }
}
