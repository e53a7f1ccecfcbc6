package tom.analysis;

import java.nio.charset.StandardCharsets;

import org.apache.spark.sql.SparkSession;
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
 */
public final class OrderMark implements UDF7<String, Long, String, Boolean, Long, Long, String, Integer> {
    private static final long serialVersionUID = 1L;
    public static final String NAME = "tom_order_mark";
    public static final int DISORDER = 1;
    public static final int INDEX_FAULT = 2;
    public static final int PEER_CHANGE = 4;

    /** Registers {@link #NAME} (non-deterministic: never reordered, merged or evaluated twice). */
    public static void register(SparkSession spark) {
        spark.udf().register(NAME, functions.udf(new OrderMark(), DataTypes.IntegerType).asNondeterministic());
    }

    private String file;
    private boolean seen;
    private String peer;
    private long index;
    private long clock;
    private String pid;

    @Override
    public Integer call(String file, Long blockStart, String peer, Boolean good, Long index, Long clock,
                        String pid) {
        if (!file.equals(this.file)) {
            this.file = file;
            this.seen = false;
        }
        if (good == null || !good) {
            return 0;
        }
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
            if (!after(clock, pid)) {
                mark |= DISORDER;
            }
        }
        this.seen = true;
        this.peer = peer;
        this.index = index;
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
}
