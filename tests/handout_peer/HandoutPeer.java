// HandoutPeer: the base TOM tool of the SE424 recitation 11 handout
// ("Totally Ordered Multicast Tool"), written from the handout alone.
// Java 17, default package, no dependencies.
//
//   javac -d OUT HandoutPeer.java
//   java [-Ddelay=MILLIS] -cp OUT HandoutPeer neighborsFilePath outputFilePath port
//
// Four threads joined by LinkedBlockingQueues (handout section 4):
// listener -> incoming queue -> processor -> outgoing queue -> sender,
// and the UI (main thread) -> outgoing queue.

import java.io.*;
import java.net.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class HandoutPeer {
    // MESSAGE-<clock>-<from>-<text>: the from ends at the first ":<digits>-" after the clock.
    static final Pattern MESSAGE = Pattern.compile("MESSAGE-(\\d+)-(.*?:\\d+)-(.*)", Pattern.DOTALL);
    // ACK-<clock>-<from>: everything after the clock is the from.
    static final Pattern ACK = Pattern.compile("ACK-(\\d+)-(.+)", Pattern.DOTALL);
    static final String STOP = "\u0000stop"; // poison pill for the sender, never sent

    /** One pending entry: a message, or a reservation made by a premature ACK (text == null). */
    static final class Entry {
        final long clock;
        final String from;
        String text;
        int acks;
        Entry(long clock, String from) { this.clock = clock; this.from = from; }
        String message() { return "MESSAGE-" + clock + "-" + from + "-" + text; }
        String describe() {
            return acks + " ACKs on " + (text != null ? message() : "(reserved) ACK-" + clock + "-" + from);
        }
    }

    /** Pending queue order: by clock, ties by String.compareTo of the raw from strings. */
    record Key(long clock, String from) implements Comparable<Key> {
        public int compareTo(Key o) {
            int c = Long.compare(clock, o.clock);
            return c != 0 ? c : from.compareTo(o.from);
        }
    }

    final List<InetSocketAddress> neighbors = new ArrayList<>();
    final LinkedBlockingQueue<String> incoming = new LinkedBlockingQueue<>();
    final LinkedBlockingQueue<String> outgoing = new LinkedBlockingQueue<>();
    final Object lock = new Object();              // guards clock and pending
    final TreeMap<Key, Entry> pending = new TreeMap<>();
    long clock = 0;
    final long delay = Long.getLong("delay", 0L);
    String from;
    ServerSocket server;
    Writer output;

    // ---- console: stdout flushed at once; a line never starts after a pending prompt ----
    static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    static final boolean PIPED = System.console() == null; // no terminal echo of the typed Enter
    static boolean midLine = false;

    static synchronized void say(String line) {
        if (midLine && PIPED) OUT.println();
        midLine = false;
        OUT.println(line);
        OUT.flush();
    }

    static synchronized void prompt(String text) {
        if (midLine && PIPED) OUT.println();
        OUT.print(text);
        OUT.flush();
        midLine = true;
    }

    // A terminal echoes the Enter that ends the typed line; a pipe does not, so the prompt line stays open.
    static synchronized void typed() { if (!PIPED) midLine = false; }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: java [-Ddelay=MILLIS] HandoutPeer neighborsFilePath outputFilePath port");
            System.exit(2);
        }
        new HandoutPeer().run(args[0], args[1], Integer.parseInt(args[2]));
    }

    void run(String neighborsPath, String outputPath, int port) throws Exception {
        loadNeighbors(neighborsPath);
        say("Loaded " + neighbors.size() + " neighbors");
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

        List<InetAddress> choices = localAddresses();
        say("Choose an IP address to listen on :");
        for (int i = 0; i < choices.size(); i++) say(i + ": " + choices.get(i));
        InetAddress listenOn = readAddress(stdin, choices, ": ");
        InetAddress fromAddress = listenOn;
        if (listenOn.isAnyLocalAddress()) {
            say("Enter the IP to write in the from field :");
            fromAddress = readAddress(stdin, choices, ": ");
        }
        from = fromAddress + ":" + port;

        output = new BufferedWriter(new OutputStreamWriter(new FileOutputStream(outputPath, true), StandardCharsets.UTF_8));
        server = new ServerSocket();
        server.setReuseAddress(true);
        server.bind(new InetSocketAddress(listenOn, port), 50);
        say("Started to listen on " + server);
        say("Sending messages from: " + from);
        start("listener", this::listen);
        start("incoming", this::processIncoming);
        say("Started incoming messages processor.");
        Thread sender = start("outgoing", this::sendOutgoing);
        say("Started outgoing messages processor.");

        ui(stdin);
        // Quit (menu 3 or end of stdin): let the sender finish what is already queued.
        outgoing.put(STOP);
        sender.join(120_000);
        server.close();
        output.flush();
        System.exit(0);
    }

    void loadNeighbors(String path) throws IOException {
        for (String raw : java.nio.file.Files.readAllLines(java.nio.file.Path.of(path), StandardCharsets.UTF_8)) {
            String line = raw.trim();
            if (line.isEmpty() || line.startsWith("#")) continue;
            int colon = line.lastIndexOf(':');
            try {
                neighbors.add(InetSocketAddress.createUnresolved(line.substring(0, colon),
                        Integer.parseInt(line.substring(colon + 1))));
            } catch (RuntimeException e) {
                System.err.println("ignored bad neighbor line: " + raw);
            }
        }
    }

    /** 0.0.0.0 first, then the IPv4 addresses of the network interfaces (loopback as localhost/127.0.0.1). */
    static List<InetAddress> localAddresses() throws IOException {
        List<InetAddress> list = new ArrayList<>();
        list.add(InetAddress.getByName("0.0.0.0"));
        for (NetworkInterface nif : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            for (InetAddress a : Collections.list(nif.getInetAddresses())) {
                if (!(a instanceof Inet4Address)) continue;
                list.add(a.equals(InetAddress.getLoopbackAddress()) ? InetAddress.getLoopbackAddress() : a);
            }
        }
        return list;
    }

    /** Reads an index into the list, or an IP literal (then the list's own object if it holds that IP). */
    static InetAddress readAddress(BufferedReader stdin, List<InetAddress> choices, String ask) throws IOException {
        for (int tries = 0; tries < 100; tries++) {
            prompt(ask);
            String line = stdin.readLine();
            typed();
            if (line == null) { System.err.println("end of input before an address was chosen"); System.exit(1); }
            line = line.trim();
            try {
                if (line.matches("\\d+")) return choices.get(Integer.parseInt(line));
                if (!line.matches("[0-9.]+|[0-9a-fA-F:.%]*:[0-9a-fA-F:.%]*")) throw new IOException("not an IP literal");
                InetAddress typed = InetAddress.getByName(line); // a literal: no name lookup
                for (InetAddress a : choices) if (a.equals(typed)) return a;
                return typed.equals(InetAddress.getLoopbackAddress()) ? InetAddress.getLoopbackAddress() : typed;
            } catch (IOException | IndexOutOfBoundsException e) {
                say("Not a choice or an IP address: " + line);
            }
        }
        System.exit(1);
        return null;
    }

    static Thread start(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    // ---- listener: one line per connection, connections one after the other ----
    void listen() {
        while (!server.isClosed()) {
            try (Socket s = server.accept()) {
                s.setSoTimeout(10_000);
                BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
                String line = in.readLine();
                if (line != null) incoming.put(line);
            } catch (IOException e) {
                if (!server.isClosed()) System.err.println("listener: " + e);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    // ---- processor: handout section 1.2 ----
    void processIncoming() {
        try {
            while (true) {
                String line = incoming.take();
                Matcher m;
                try {
                    if ((m = MESSAGE.matcher(line)).matches()) onMessage(Long.parseLong(m.group(1)), m.group(2), m.group(3));
                    else if ((m = ACK.matcher(line)).matches()) onAck(Long.parseLong(m.group(1)), m.group(2));
                    else System.err.println("ignored bad line: " + line);
                } catch (NumberFormatException e) { // a clock too large for a long
                    System.err.println("ignored bad line: " + line);
                }
                deliverReady();
            }
        } catch (InterruptedException e) {
            // stopping
        }
    }

    void onMessage(long msgClock, String msgFrom, String text) throws InterruptedException {
        synchronized (lock) {
            Entry e = pending.get(new Key(msgClock, msgFrom));
            if (e != null && e.text != null) {
                System.err.println("ignored duplicate: MESSAGE-" + msgClock + "-" + msgFrom + "-" + text);
                return;
            }
            if (e == null) { // new entry; else fill in the entry a premature ACK reserved
                e = new Entry(msgClock, msgFrom);
                pending.put(new Key(msgClock, msgFrom), e);
            }
            e.text = text;
            clock = Math.max(clock, msgClock) + 1;
            outgoing.put("ACK-" + msgClock + "-" + msgFrom); // to every neighbor, this peer included
        }
    }

    /** An ACK does not touch the logical clock: it only carries the acknowledged message's stamp. */
    void onAck(long msgClock, String msgFrom) {
        synchronized (lock) {
            Key key = new Key(msgClock, msgFrom);
            Entry e = pending.get(key);
            if (e == null) { // premature ACK: reserve the entry until the MESSAGE arrives
                e = new Entry(msgClock, msgFrom);
                pending.put(key, e);
            }
            e.acks++;
        }
    }

    /** Only the head may leave; a released head lets every ready entry behind it go too. */
    void deliverReady() {
        synchronized (lock) {
            while (!pending.isEmpty()) {
                Entry head = pending.firstEntry().getValue();
                if (head.text == null || head.acks < neighbors.size()) return;
                pending.pollFirstEntry();
                String line = head.describe();
                try {
                    output.write(line + "\n");
                    output.flush();
                } catch (IOException e) {
                    System.err.println("output: " + e);
                }
                say("Delivered: " + head.message());
            }
        }
    }

    // ---- sender: every frame to every neighbor in file order, itself included ----
    void sendOutgoing() {
        try {
            while (true) {
                String frame = outgoing.take();
                if (frame == STOP) return;
                if (delay > 0) Thread.sleep(delay);
                for (InetSocketAddress n : neighbors) sendTo(n, frame);
            }
        } catch (InterruptedException e) {
            // stopping
        }
    }

    static void sendTo(InetSocketAddress n, String frame) throws InterruptedException {
        byte[] bytes = (frame + "\n").getBytes(StandardCharsets.UTF_8);
        for (int attempt = 1; attempt <= 50; attempt++) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(n.getHostString(), n.getPort()), 2000);
                OutputStream out = s.getOutputStream();
                out.write(bytes);
                out.flush();
                return;
            } catch (IOException e) {
                if (attempt == 1) System.err.println("cannot reach " + n.getHostString() + ":" + n.getPort() + " (" + e.getMessage() + "), retrying");
                Thread.sleep(200);
            }
        }
        System.err.println("gave up on " + n.getHostString() + ":" + n.getPort() + " for " + frame);
    }

    // ---- UI: the menu of figure 1 ----
    void ui(BufferedReader stdin) throws IOException, InterruptedException {
        while (true) {
            say("Choose what to do:");
            say("1. Send a new message:");
            say("2. Print status");
            say("3. Quit");
            prompt(": ");
            String choice = stdin.readLine();
            typed();
            if (choice == null || choice.trim().equals("3")) return;
            switch (choice.trim()) {
                case "1" -> {
                    prompt("Enter the message to send : ");
                    String text = stdin.readLine();
                    typed();
                    if (text == null) return;
                    String frame;
                    // Stamp and queue in one step: an ACK queued in between could overtake a
                    // message with a smaller stamp (per-link FIFO is what makes the order total).
                    synchronized (lock) {
                        clock = clock + 1;
                        frame = "MESSAGE-" + clock + "-" + from + "-" + text;
                        outgoing.put(frame); // enters the pending queue when it comes back through the listener
                    }
                    say("Ready to send: " + frame);
                }
                case "2" -> {
                    synchronized (lock) {
                        say("Logical clock time: " + clock);
                        say("Pending messages:");
                        for (Entry e : pending.values()) say(e.describe());
                    }
                }
                default -> say("Unknown choice: " + choice.trim());
            }
        }
    }
}
