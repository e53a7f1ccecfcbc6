// TOM dashboard: one page for one peer (/) or a whole group (/?peers=HOST:PORT,HOST:PORT,...), or a
// finished run (/?replay, served by `tom replay RUN_DIR`).
// Live, it reads each peer's /api/status (polled) and /api/events?frames=1&recent=1 (a Server-Sent Events
// stream read with fetch, so that the bearer token of a closed group can go in a header): the stream
// starts with the peer's ring of recent events, so a page opened late shows what already happened;
// events are numbered (n) and a reconnecting stream skips what it has. It sends with POST /api/messages.
// Replaying, it reads /api/replay once and draws the run up to the time of its slider.
// No framework, no build step; every text from the network goes in as textContent.
"use strict";

const FOLLOW_MESSAGES = 40;   // messages drawn while following the live end (zoom out for more)
const REMEMBER = 5000;        // message keys remembered (older ones are forgotten)
const DELIVERIES_KEPT = 500;  // per peer, for "Delivered, in order"
const POLL_MS = 500;
const REPLAY = new URLSearchParams(location.search).has("replay");
const NOTICES = { left: "this peer has left the group", removed: "this peer was removed from the group",
  "not-admitted": "not admitted to the group yet (see the peer's log)" };

const token = (() => {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (m) sessionStorage.setItem("tom-token", decodeURIComponent(m[1]));
  return sessionStorage.getItem("tom-token");
})();
const auth = () => (token ? { Authorization: "Bearer " + token } : {});

function baseUrls() {
  const q = new URLSearchParams(location.search).get("peers");
  if (!q) return [location.origin];
  return q.split(",").map(s => s.trim()).filter(Boolean)
    .map(s => (/^https?:\/\//.test(s) ? s : "http://" + s).replace(/\/+$/, ""));
}

// -- state -------------------------------------------------------------------------------------

let peers = REPLAY ? [] : baseUrls().map(newPeer);
function newPeer(base) {
  const peer = { base, pid: null, status: null, error: null, deliveries: [], delivered: 0, streaming: false, lastN: 0, skipUpTo: 0 };
  peer.known = new Promise(resolve => { peer.setKnown = resolve; });  // resolved by the first status
  return peer;
}
function showStreams() {  // how many event streams are open (tests wait for it before they type)
  document.body.dataset.streams = String(peers.filter(p => p.streaming).length);
}
let messages = new Map();   // "clock|pid" -> {clock, pid, text, first, last, sends, recvs, acksOut, acksIn, delivered}
let dirty = true;
let selected = null;          // the key of the message whose frames are listed under the diagram
const view = { follow: true, t0: 0, t1: 1 };  // the diagram's time window (follow: the live end)

function msgOf(clock, pid) {
  const key = clock + "|" + pid;
  let m = messages.get(key);
  if (!m) {
    m = { key, clock, pid, text: null, first: Infinity, last: -Infinity, sends: [], recvs: [], acksOut: [], acksIn: [], seqsOut: [], seqsIn: [], delivered: [] };
    messages.set(key, m);
    if (messages.size > REMEMBER) messages.delete(messages.keys().next().value);
  }
  return m;
}

function onEvent(peer, name, d) {
  const at = peer.pid;
  if (d.n != null) {  // numbered: after a reconnect the ring repeats what this page already has
    if (d.n <= peer.skipUpTo) return;
    peer.lastN = d.n;
  }
  if (name === "frame") {
    const m = msgOf(d.clock, d.pid);
    m.first = Math.min(m.first, d.t);
    m.last = Math.max(m.last, d.t);
    if (d.text != null) m.text = d.text;
    if (d.kind === "SEQ") {  // the sequencer order: the number the view's sequencer gave the message
      if (d.dir === "out") m.seqsOut.push({ from: at, to: d.to, t: d.t, seq: d.seq });
      else m.seqsIn.push({ at, from: d.from, t: d.t, seq: d.seq });
    } else if (d.kind === "MESSAGE") {
      if (d.dir === "out") m.sends.push({ from: at, to: d.to, t: d.t, lamport: d.lamport });
      else m.recvs.push({ at, from: d.from, t: d.t, lamport: d.lamport });
    } else if (d.dir === "out") {
      m.acksOut.push({ from: at, to: d.to, t: d.t });
    } else {
      // premature: this peer had not received the message itself when its ACK came
      const premature = d.pid !== at && !m.recvs.some(r => r.at === at);
      m.acksIn.push({ at, from: d.from, t: d.t, premature });
    }
  } else if (name === "deliver") {
    const m = msgOf(d.clock, d.pid);
    m.first = Math.min(m.first, d.t);
    m.last = Math.max(m.last, d.t);
    m.text = d.text;
    if (!m.delivered.some(x => x.at === at && x.index === d.index)) m.delivered.push({ at, t: d.t, index: d.index, released: d.released });
    peer.deliveries.push(d);
    peer.delivered += 1;
  } else if (name === "view") {
    peer.deliveries.push(Object.assign({ isView: true }, d));
    if (REPLAY) peer.delivered += 1;  // (live, the counter is the peer's own: views count there too)
  } else if (name === "alarm") {
    peer.deliveries.push({ notice: `seen diverging from ${d.peer} (view ${d.view}, after message ${d.position})`, t: d.t });
  } else if (name === "notice") {
    peer.deliveries.push({ notice: d.notice, t: d.t });
  }
  if (peer.deliveries.length > DELIVERIES_KEPT) peer.deliveries.splice(0, peer.deliveries.length - DELIVERIES_KEPT);
  dirty = true;
}

// -- network -----------------------------------------------------------------------------------

const sleep = ms => new Promise(r => setTimeout(r, ms));

async function poll(peer) {
  for (;;) {
    try {
      const res = await fetch(peer.base + "/api/status", { headers: auth(), cache: "no-store" });
      if (!res.ok) throw new Error((await res.json().catch(() => ({}))).error || "HTTP " + res.status);
      peer.status = await res.json();
      peer.pid = peer.status.peer;
      peer.error = null;
      peer.setKnown();
    } catch (e) {
      peer.error = String(e.message || e);
    }
    dirty = true;
    await sleep(POLL_MS);
  }
}

async function stream(peer) {
  await peer.known;
  for (;;) {
    {
      try {
        const res = await fetch(peer.base + "/api/events?frames=1&recent=1", { headers: auth(), cache: "no-store" });
        if (!res.ok) throw new Error("events: HTTP " + res.status);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        peer.streaming = true;
        showStreams();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let name = "message", data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) name = line.slice(6).trim();
              else if (line.startsWith("data:")) data += line.slice(5).trim();
            }
            if (name === "hello") {  // the feed's identity: a restarted peer numbers from 1 again
              const feed = JSON.parse(data).feed;
              if (feed !== peer.feed) { peer.feed = feed; peer.lastN = 0; }
              peer.skipUpTo = peer.lastN;
            } else if (data && name !== "lost" && name !== "recent") onEvent(peer, name, JSON.parse(data));
          }
        }
      } catch (e) {
        peer.error = String(e.message || e);
        dirty = true;
      }
      peer.streaming = false;
      showStreams();
    }
    await sleep(1000);
  }
}

async function send(ev) {
  ev.preventDefault();
  const input = document.getElementById("send-text");
  const out = document.getElementById("send-result");
  const peer = peers[Number(document.getElementById("send-peer").value) || 0];
  const text = input.value;
  try {
    const res = await fetch(peer.base + "/api/messages", {
      method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, auth()),
      body: JSON.stringify({ text }),
    });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || "HTTP " + res.status);
    out.className = "send-result ok";
    out.textContent = body.held ? "held until the next view" : `sent as (${body.clock}, ${body.pid})`;
    input.value = "";
  } catch (e) {
    out.className = "send-result err";
    out.textContent = String(e.message || e);
  }
}

// -- drawing helpers ---------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") el.className = v; else el.setAttribute(k, v);
  }
  for (const c of children) if (c != null) el.append(c);
  return el;
}
const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (text != null) el.textContent = text;
  return el;
}
const pidKey = p => { const i = p.lastIndexOf(":"); return [p.slice(0, i), Number(p.slice(i + 1))]; };
const byPid = (a, b) => { const x = pidKey(a), y = pidKey(b); return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] - y[1]; };
const short = t => (t == null ? "" : t.length > 28 ? t.slice(0, 27) + "…" : t);

// -- the group line and the send box -----------------------------------------------------------

function members() {
  const set = new Set();
  for (const p of peers) {
    if (p.pid) set.add(p.pid);
    for (const m of (p.status && p.status.view && p.status.view.members) || []) set.add(m);
  }
  return [...set].sort(byPid);
}

function renderHeader() {
  const line = document.getElementById("group-line");
  const st = peers.map(p => p.status).filter(Boolean);
  line.textContent = "";
  if (!st.length) { line.textContent = "connecting…"; return; }
  const view = st.map(s => s.view).filter(Boolean).sort((a, b) => b.id - a.id)[0];
  line.append(h("span", {}, "order: ", h("b", {}, st[0].order)), "   ·   ");
  line.append(h("span", {}, `${peers.length} peer${peers.length > 1 ? "s" : ""} watched`), "   ·   ");
  if (view) {
    line.append(h("span", {}, "view ", h("b", {}, String(view.id)), `: ${view.members.length} members`,
      view.coordinator ? `, coordinator ${view.coordinator}` : ""));
  } else line.append("no view yet");
  const sel = document.getElementById("send-peer");
  if (sel.options.length !== peers.length || [...sel.options].some((o, i) => o.textContent !== (peers[i].pid || peers[i].base))) {
    const keep = sel.value;
    sel.textContent = "";
    peers.forEach((p, i) => sel.append(h("option", { value: String(i) }, p.pid || p.base)));
    if (keep) sel.value = keep;
  }
}

// -- the peer cards ----------------------------------------------------------------------------

function card(peer) {
  const st = peer.status;
  const el = h("div", { class: "peer-card" + (peer.error ? " down" : ""), "data-pid": peer.pid || "" });
  if (!st) {
    el.append(h("div", { class: "pid" }, peer.base), h("div", { class: "error" }, peer.error || "connecting…"));
    return el;
  }
  const modeClass = st.mode === "normal" ? "" : st.mode === "left" || st.mode === "removed" ? " gone" : " other";
  el.append(h("div", { class: "card-head" },
    h("div", {}, h("span", { class: "pid" }, st.peer), h("span", { class: "badge" + modeClass }, st.mode),
      h("div", { class: "dim" }, st.view ? `view ${st.view.id} · ${st.view.members.length} members` : "no view yet")),
    h("div", { class: "clock" }, h("div", { class: "num lamport" }, String(st.clock)), h("div", { class: "cap" }, "Lamport clock"))));
  const c = st.counters;
  el.append(h("div", { class: "counters" },
    h("span", {}, "delivered ", h("b", { class: "delivered" }, String(c.delivered))),
    h("span", {}, "pending ", h("b", {}, String(st.pending_count))),
    h("span", {}, "premature ACKs ", h("b", {}, String(c.premature_acks))),
    h("span", {}, "released behind head ", h("b", {}, String(c.released_behind_head))),
    h("span", { class: c.divergence_alarms ? "alarm" : "" }, "divergence alarms ", h("b", {}, String(c.divergence_alarms)))));
  if (peer.error) el.append(h("div", { class: "error" }, peer.error));
  if (st.catching_up) el.append(h("div", { class: "catching-up" }, st.catching_up));  // a durable peer, restarted
  for (const a of st.alarms || []) {
    el.append(h("div", { class: "alarm-box" }, `DIVERGENCE: ${a.peer} delivered other messages than this peer in view ` +
      `${a.view} (digests differ after message ${a.position}: ours ${a.mine}, theirs ${a.theirs})`));
  }

  el.append(h("div", { class: "sub" }, "Links"));
  const links = h("ul", { class: "links" });
  for (const p of st.peers) {
    if (p.connection === "self") continue;
    const age = p.last_heard_age == null ? "never heard" : `heard ${p.last_heard_age.toFixed(1)} s ago`;
    links.append(h("li", {}, h("span", { class: "dotc " + p.connection }), h("span", { class: "state" }, p.pid),
      h("span", { class: "dim" }, `${p.connection}${p.member ? "" : " · not a member"}${p.suspected ? " · SUSPECTED" : ""} · ${age}`)));
  }
  if (!links.children.length) links.append(h("li", { class: "none" }, "no neighbors"));
  el.append(links);

  el.append(h("div", { class: "sub" }, `Pending queue (${st.pending_count})`));
  if (!st.pending.length) el.append(h("div", { class: "none" }, "empty — everything delivered"));
  else {
    // Lamport: the ACKs each message has and lacks; the other orders: what it waits for, in words
    const lamport = st.order === "lamport";
    const table = h("table", { class: "pending" }, h("tr", {}, h("th", {}, "(clock, pid)"), h("th", {}, "text"),
      h("th", {}, lamport ? "ACKs" : "waits for")));
    st.pending.slice(0, 12).forEach((p, i) => {
      const chips = h("td", { class: lamport ? "" : "waits" });
      if (lamport) {
        for (const a of p.acks) chips.append(h("span", { class: "chip" }, String(pidKey(a)[1])));
        for (const m of p.missing) chips.append(h("span", { class: "chip missing", title: "ACK missing from " + m }, String(pidKey(m)[1])));
      } else chips.append((p.seq != null ? `seq ${p.seq} · ` : "") + p.waits);
      table.append(h("tr", { class: i === 0 ? "head-row" : "" }, h("td", { class: "key" }, `(${p.clock}, ${pidKey(p.pid)[1]})`),
        h("td", { class: "text" + (p.reserved ? " reserved" : "") }, p.reserved ? "reserved by an early ACK" : short(p.text)), chips));
    });
    el.append(table);
    if (st.pending_count > 12) el.append(h("div", { class: "none" }, `… and ${st.pending_count - 12} more`));
  }

  el.append(h("div", { class: "sub" }, "Delivered, in order"));
  const list = h("ul", { class: "deliveries" });
  for (const d of peer.deliveries.slice().reverse()) {
    if (d.notice) list.append(h("li", { class: "view" }, NOTICES[d.notice] || d.notice));
    else if (d.isView) list.append(h("li", { class: "view" }, h("span", { class: "idx" }, `#${d.index} `),
      `view ${d.view}: ${d.members.length} members` + (d.joined.length ? `, joined ${d.joined.join(", ")}` : "") +
      (d.left.length ? `, left ${d.left.join(", ")}` : "") + (d.removed.length ? `, removed ${d.removed.join(", ")}` : "")));
    else list.append(h("li", { class: "delivery", "data-text": d.text }, h("span", { class: "idx" }, `#${d.index} (${d.clock}, ${pidKey(d.pid)[1]}) `),
      d.text, d.released ? h("span", { class: "released" }, "  ◆ released behind head") : null));
  }
  if (!list.children.length) list.append(h("li", { class: "none" }, "nothing yet"));
  const shown = peer.deliveries.filter(d => !d.notice).length;
  if (c.delivered > shown && list.children.length) {
    list.append(h("li", { class: "none" }, `… and ${c.delivered - shown} earlier, before the recent past this page was given`));
  }
  el.append(list);
  return el;
}

function renderCards() {
  const box = document.getElementById("peers");
  box.replaceChildren(...peers.map(card));
}

// -- the space-time diagram ----------------------------------------------------------------------
// Time runs to the right over the window [view.t0, view.t1]: following the live end it holds the last
// FOLLOW_MESSAGES messages; the wheel zooms around the pointer, a drag pans, the buttons fit or follow.
// Labels never overlap: each goes to the first free row above (clocks, texts) or below (delivery
// positions) its lane, and one that finds no free row is left out (its message's details still list it).

function eventTimes(m) {
  const out = [];
  for (const list of [m.sends, m.recvs, m.acksOut, m.acksIn, m.seqsOut, m.seqsIn, m.delivered]) for (const e of list) out.push(e.t);
  return out;
}

function drawable() {
  return [...messages.values()].filter(m => isFinite(m.first) && (m.text != null || m.sends.length || m.recvs.length))
    .sort((a, b) => a.first - b.first);
}

function followWindow(all) {
  const recent = all.slice(-FOLLOW_MESSAGES);
  if (!recent.length) return null;
  let t0 = Infinity, t1 = -Infinity;
  for (const m of recent) for (const t of eventTimes(m)) { t0 = Math.min(t0, t); t1 = Math.max(t1, t); }
  const pad = Math.max(0.05, (t1 - t0) * 0.06);
  return [t0 - pad, t1 + pad];
}

function fitAll() {
  let t0 = Infinity, t1 = -Infinity;
  for (const m of drawable()) for (const t of eventTimes(m)) { t0 = Math.min(t0, t); t1 = Math.max(t1, t); }
  if (!isFinite(t0)) return;
  const pad = Math.max(0.05, (t1 - t0) * 0.04);
  view.follow = false;
  view.t0 = t0 - pad; view.t1 = t1 + pad;
  dirty = true;
}

class Rows {  // occupied x-intervals of label rows, per lane and side
  constructor() { this.rows = new Map(); }
  place(lane, side, x1, x2, maxRows) {
    const key = lane + "|" + side;
    const rows = this.rows.get(key) || [];
    this.rows.set(key, rows);
    for (let r = 0; r < maxRows; r++) {
      rows[r] = rows[r] || [];
      if (rows[r].every(([a, b]) => x2 < a - 2 || x1 > b + 2)) { rows[r].push([x1, x2]); return r; }
    }
    return -1;
  }
}
const textWidth = (text, px) => text.length * px;

function renderDiagram() {
  const svg = document.getElementById("diagram");
  const lanes = members();
  const W = svg.clientWidth || 900;
  const left = 150, right = 20, top = 40, gap = Math.max(64, Math.min(90, 220 / Math.max(1, lanes.length - 1)));
  const H = top + Math.max(1, lanes.length - 1) * gap + 48;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.style.height = H + "px";
  svg.replaceChildren();
  const y = pid => top + lanes.indexOf(pid) * gap;
  const all = drawable();
  if (view.follow) {
    const w = followWindow(all);
    if (w) [view.t0, view.t1] = w;
  }
  const t0 = view.t0, t1 = view.t1 > view.t0 ? view.t1 : view.t0 + 1;
  const inWindow = all.filter(m => m.last >= t0 && m.first <= t1);
  svg.dataset.messages = String(inWindow.filter(m => m.text != null).length);
  const clocks = new Map(peers.filter(p => p.status).map(p => [p.pid, p.status.clock]));
  for (const pid of lanes) {
    svg.append(s("line", { class: "lane", x1: left, x2: W - right, y1: y(pid), y2: y(pid) }));
    svg.append(s("text", { class: "lane-label", x: 8, y: y(pid) + 4 }, pid));
    if (clocks.has(pid)) svg.append(s("text", { class: "lane-clock", x: 8, y: y(pid) + 18 }, `clock ${clocks.get(pid)}`));
  }
  const zoomLine = document.getElementById("zoom-line");
  if (zoomLine) zoomLine.textContent = all.length ? `${inWindow.length} of ${all.length} messages in view` +
    (view.follow ? " (following the newest)" : "") : "";
  if (!all.length) {
    svg.append(s("text", { class: "empty", x: left + 20, y: top + gap / 2 }, REPLAY ? "no message before this time" : "no message yet: send one above"));
    return;
  }
  const x = t => left + 10 + (t - t0) / (t1 - t0) * (W - left - right - 20);
  const defs = s("defs");
  for (const [id, color] of [["a-msg", "var(--msg)"], ["a-ack", "var(--ack)"], ["a-pre", "var(--premature)"], ["a-seq", "var(--seq)"]]) {
    const mk = s("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    mk.append(s("path", { d: "M0,0 L10,5 L0,10 z", style: `fill:${color}` }));
    defs.append(mk);
  }
  const clip = s("clipPath", { id: "plot" });
  clip.append(s("rect", { x: left, y: 0, width: W - left - right, height: H }));
  defs.append(clip);
  svg.append(defs);
  const plot = s("g", { "clip-path": "url(#plot)" });
  svg.append(plot);
  const stub = 26;
  const rows = new Rows();
  const arrow = (cls, marker, x1, y1, x2, y2, extra) =>
    plot.append(s("line", Object.assign({ class: cls, x1, y1, x2, y2, "marker-end": `url(#${marker})` }, extra || {})));
  const label = (lane, side, xAnchor, text, cls, anchorEnd, key) => {
    const w = textWidth(text, cls === "text-label" ? 6 : 6.6);
    const x1 = anchorEnd ? xAnchor - w : xAnchor, x2 = anchorEnd ? xAnchor : xAnchor + w;
    const r = rows.place(lane, side, x1, x2, side === "up" ? 2 : 3);
    if (r < 0) return;
    const yy = side === "up" ? y(lane) - 8 - 12 * r : y(lane) + 17 + 11 * r;
    plot.append(s("text", { class: cls, x: xAnchor, y: yy, "text-anchor": anchorEnd ? "end" : "start", "data-key": key }, text));
  };
  for (const m of inWindow) {
    const sel = m.key === selected ? " selected" : "";
    const data = { "data-key": m.key, "data-text": m.text == null ? "" : m.text };
    for (const a of m.acksIn) {  // ACKs first, so that messages are drawn over them
      if (!lanes.includes(a.from) || !lanes.includes(a.at)) continue;
      const out = m.acksOut.find(o => o.from === a.from && o.to.includes(a.at));
      const x1 = out ? x(out.t) : x(a.t) - stub;
      arrow("ack-arrow" + (a.premature ? " premature" : "") + (out ? "" : " partial") + sel, a.premature ? "a-pre" : "a-ack",
        x1, y(a.from), x(a.t), y(a.at), data);
      if (a.premature) plot.append(s("text", { class: "premature-mark", x: x(a.t) + 4, y: y(a.at) - 6 }, "!"));
    }
    for (const o of m.acksOut) for (const to of o.to) {
      if (!lanes.includes(to) || m.acksIn.some(a => a.from === o.from && a.at === to)) continue;
      if (peers.some(p => p.pid === to)) continue; // watched: its receipt will come
      arrow("ack-arrow partial" + sel, "a-ack", x(o.t), y(o.from), x(o.t) + stub, y(o.from) + Math.sign(y(to) - y(o.from)) * stub, data);
    }
    for (const q of m.seqsIn) {  // sequence numbers (sequencer order): from the sequencer to each member
      if (!lanes.includes(q.from) || !lanes.includes(q.at)) continue;
      const out = m.seqsOut.find(o => o.from === q.from && o.to.includes(q.at));
      arrow("seq-arrow" + (out ? "" : " partial") + sel, "a-seq", out ? x(out.t) : x(q.t) - stub, y(q.from), x(q.t), y(q.at), data);
    }
    const seqShown = new Set();
    for (const o of m.seqsOut) {
      if (!lanes.includes(o.from)) continue;
      if (!seqShown.has(o.seq)) { seqShown.add(o.seq); label(o.from, "up", x(o.t) + 6, "seq " + o.seq, "seq-label", false, m.key); }
      for (const to of o.to) {
        if (!lanes.includes(to) || m.seqsIn.some(q => q.from === o.from && q.at === to) || peers.some(p => p.pid === to)) continue;
        arrow("seq-arrow partial" + sel, "a-seq", x(o.t), y(o.from), x(o.t) + stub, y(o.from) + Math.sign(y(to) - y(o.from)) * stub, data);
      }
    }
    const send = m.sends[0];
    for (const r of m.recvs) {
      if (!lanes.includes(r.from) || !lanes.includes(r.at)) continue;
      const sent = m.sends.find(o => o.from === r.from && o.to.includes(r.at)) || send;
      const x1 = sent ? x(sent.t) : x(r.t) - stub;
      arrow("msg-arrow" + (sent ? "" : " partial") + sel, "a-msg", x1, y(r.from), x(r.t), y(r.at), data);
    }
    if (send) {
      const to = new Set(m.sends.flatMap(o => o.to));
      for (const dest of to) {
        if (m.recvs.some(r => r.at === dest) || peers.some(p => p.pid === dest) || !lanes.includes(dest)) continue;
        arrow("msg-arrow partial" + sel, "a-msg", x(send.t), y(send.from), x(send.t) + stub, y(send.from) + Math.sign(y(dest) - y(send.from)) * stub, data);
      }
      plot.append(s("circle", { class: "send-dot" + sel, cx: x(send.t), cy: y(send.from), r: 3.5, "data-key": m.key }));
      label(send.from, "up", x(send.t) - 4, String(m.clock), "clock-label", true, m.key);
      if (m.text != null) label(send.from, "up", x(send.t) + 4, short(m.text), "text-label", false, m.key);
    } else if (lanes.includes(m.pid) && m.recvs.length) {
      label(m.pid, "up", x(Math.min(...m.recvs.map(r => r.t))) - stub, String(m.clock), "clock-label", true, m.key);
    }
    for (const d of m.delivered) {
      if (!lanes.includes(d.at)) continue;
      const cx = x(d.t), cy = y(d.at);
      if (d.released) plot.append(s("rect", { class: "deliver released" + sel, x: cx - 5, y: cy - 5, width: 10, height: 10, transform: `rotate(45 ${cx} ${cy})`, "data-key": m.key }));
      else plot.append(s("circle", { class: "deliver" + sel, cx, cy, r: 5, "data-key": m.key }));
      label(d.at, "down", cx - 6, "#" + d.index, "deliver-label", false, m.key);
    }
  }
  renderDetails();
}

// zoom (wheel), pan (drag), select (click on anything of a message)
function setupDiagram() {
  const svg = document.getElementById("diagram");
  const plotX = ev => {
    const r = svg.getBoundingClientRect();
    const W = svg.clientWidth || 900;
    return view.t0 + ((ev.clientX - r.left) - 160) / (W - 190) * (view.t1 - view.t0);
  };
  svg.addEventListener("wheel", ev => {
    ev.preventDefault();
    const at = plotX(ev), k = ev.deltaY > 0 ? 1.25 : 0.8;
    view.follow = false;
    view.t0 = at - (at - view.t0) * k;
    view.t1 = at + (view.t1 - at) * k;
    dirty = true;
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", ev => { drag = { x: ev.clientX, t0: view.t0, t1: view.t1, moved: false }; });
  window.addEventListener("mousemove", ev => {
    if (!drag) return;
    const dx = ev.clientX - drag.x;
    if (Math.abs(dx) < 3 && !drag.moved) return;
    drag.moved = true;
    const W = svg.clientWidth || 900;
    const dt = -dx / (W - 190) * (drag.t1 - drag.t0);
    view.follow = false;
    view.t0 = drag.t0 + dt; view.t1 = drag.t1 + dt;
    dirty = true;
  });
  window.addEventListener("mouseup", ev => {
    if (drag && !drag.moved) {
      const key = ev.target && ev.target.getAttribute && ev.target.getAttribute("data-key");
      selected = key || null;
      dirty = true;
    }
    drag = null;
  });
  const zoom = k => {
    const mid = (view.t0 + view.t1) / 2;
    view.follow = false;
    view.t0 = mid - (mid - view.t0) * k; view.t1 = mid + (view.t1 - mid) * k;
    dirty = true;
  };
  document.getElementById("zoom-in").addEventListener("click", () => zoom(0.6));
  document.getElementById("zoom-out").addEventListener("click", () => zoom(1.6));
  document.getElementById("zoom-fit").addEventListener("click", fitAll);
  document.getElementById("zoom-follow").addEventListener("click", () => { view.follow = true; dirty = true; });
}

// the frames of the selected message: its send, its receipt at each peer, each ACK (premature or
// not), its sequence number, and its delivery position everywhere
function renderDetails() {
  const box = document.getElementById("details");
  if (!box) return;
  const m = selected && messages.get(selected);
  box.textContent = "";
  if (!m) { box.append(h("div", { class: "none" }, "click a message in the diagram to see its frames")); return; }
  const t0 = Math.min(...eventTimes(m));
  const at = t => `+${((t - t0) * 1000).toFixed(1)} ms`;
  box.append(h("div", { class: "details-head" }, h("b", {}, `(${m.clock}, ${m.pid})`), "  ", m.text == null ? "" : m.text));
  const rows = [];
  for (const o of m.sends) rows.push([o.t, `MESSAGE sent by ${o.from} to ${o.to.join(", ")}`]);
  for (const r of m.recvs) rows.push([r.t, `MESSAGE received at ${r.at} from ${r.from}`]);
  for (const o of m.acksOut) rows.push([o.t, `ACK sent by ${o.from} to ${o.to.join(", ")}`]);
  for (const a of m.acksIn) rows.push([a.t, `ACK from ${a.from} received at ${a.at}` + (a.premature ? " — premature (before the message itself)" : "")]);
  for (const q of m.seqsOut) rows.push([q.t, `SEQ ${q.seq} sent by ${q.from} to ${q.to.join(", ")}`]);
  for (const q of m.seqsIn) rows.push([q.t, `SEQ ${q.seq} received at ${q.at} from ${q.from}`]);
  for (const d of m.delivered) rows.push([d.t, `delivered at ${d.at} as #${d.index}` + (d.released ? " (released behind a late head)" : "")]);
  rows.sort((a, b) => a[0] - b[0]);
  const table = h("table", { class: "frames" });
  for (const [t, what] of rows) table.append(h("tr", {}, h("td", { class: "key" }, at(t)), h("td", {}, what)));
  box.append(table);
}

// -- main loop -----------------------------------------------------------------------------------

let lastRender = 0;
function render(now) {
  if (dirty && now - lastRender >= 150) {
    dirty = false;
    lastRender = now;
    renderHeader();
    renderCards();
    renderDiagram();
  }
  requestAnimationFrame(render);
}

// -- replay: a finished run (tom replay RUN_DIR), drawn up to the slider's time ---------------------

let run = null;

function replayTo(T) {
  messages = new Map();
  const stats = new Map();
  for (const p of peers) {
    Object.assign(p, { deliveries: [], delivered: 0, lastN: 0, skipUpTo: 0 });
    stats.set(p.pid, { clock: 0, premature: 0, view: null, heard: new Map() });
  }
  const byPid = new Map(peers.map(p => [p.pid, p]));
  for (const e of run.events) {
    if (e.data.t > T) break;
    const peer = byPid.get(e.peer), st = stats.get(e.peer);
    if (!peer) continue;
    const before = e.name === "frame" ? messages.get(e.data.clock + "|" + e.data.pid) : null;
    const acksBefore = before ? before.acksIn.length : 0;
    onEvent(peer, e.name, e.data);
    const d = e.data;
    if (e.name === "frame") {
      if (d.kind === "MESSAGE") st.clock = Math.max(st.clock, d.clock);
      if (d.dir === "in") st.heard.set(d.from, d.t);
      const m = messages.get(d.clock + "|" + d.pid);
      if (d.kind === "ACK" && d.dir === "in" && m.acksIn.length > acksBefore && m.acksIn[m.acksIn.length - 1].premature) st.premature += 1;
    } else if (e.name === "view") {
      st.view = { id: d.view, members: d.members, coordinator: null };
    } else if (e.name === "deliver") st.clock = Math.max(st.clock, d.clock);
  }
  for (const p of peers) {
    const st = stats.get(p.pid);
    const members = st.view ? st.view.members : run.peers;
    const pending = [];
    for (const m of messages.values()) {
      const seen = m.pid === p.pid ? m.sends.length || m.delivered.some(x => x.at === p.pid) : m.recvs.some(r => r.at === p.pid);
      const acked = m.acksIn.filter(a => a.at === p.pid).map(a => a.from);
      if (!seen && !acked.length) continue;
      if (m.delivered.some(x => x.at === p.pid)) continue;
      const acks = [...new Set([m.pid, ...acked])].filter(q => members.includes(q));
      pending.push({ clock: m.clock, pid: m.pid, text: m.text, reserved: !seen, acks,
        missing: members.filter(q => !acks.includes(q) && q !== p.pid), waits: "its turn" });
    }
    pending.sort((a, b) => a.clock - b.clock || (a.pid < b.pid ? -1 : a.pid > b.pid ? 1 : 0));
    p.status = { peer: p.pid, mode: "replay", order: run.order, view: st.view, clock: st.clock, alarms: [],
      counters: { delivered: p.delivered, premature_acks: st.premature, released_behind_head: 0, divergence_alarms: 0 },
      peers: [...st.heard.entries()].map(([pid, t]) => ({ pid, connection: "up", member: members.includes(pid), suspected: false, last_heard_age: T - t })),
      pending, pending_count: pending.length };
  }
  const at = document.getElementById("replay-at");
  at.textContent = `${(T - run.start).toFixed(3)} s of ${(run.end - run.start).toFixed(3)} s`;
  dirty = true;
}

async function startReplay() {
  document.querySelector("section.send").hidden = true;
  document.getElementById("replay-bar").hidden = false;
  document.querySelector(".brand .dim").textContent = "· replay";
  document.title = "TOM — replay";
  const res = await fetch("/api/replay", { cache: "no-store" });
  run = await res.json();
  peers = run.peers.map(pid => Object.assign(newPeer(null), { pid }));
  for (const p of peers) p.setKnown();
  const slider = document.getElementById("replay-time");
  const steps = 2000;
  slider.max = String(steps);
  slider.value = String(steps);
  const timeOf = () => run.start + (run.end - run.start) * Number(slider.value) / steps;
  slider.addEventListener("input", () => { view.follow = true; replayTo(timeOf()); });
  let playing = null;
  const play = document.getElementById("replay-play");
  play.addEventListener("click", () => {
    if (playing) { clearInterval(playing); playing = null; play.textContent = "Play"; return; }
    if (Number(slider.value) >= steps) slider.value = "0";
    play.textContent = "Pause";
    playing = setInterval(() => {
      slider.value = String(Math.min(steps, Number(slider.value) + 4));
      view.follow = true;
      replayTo(timeOf());
      if (Number(slider.value) >= steps) { clearInterval(playing); playing = null; play.textContent = "Play"; }
    }, 50);
  });
  const info = document.getElementById("replay-info");
  info.textContent = `${run.run}: ${run.peers.length} peers, ${run.order} order, ${run.traces} traces, ${run.outputs} outputs` +
    (run.left_out ? `; the last ${run.left_out} events are left out (too many for a page)` : "");
  replayTo(run.end);
  fitAll();
  document.body.dataset.replay = "loaded";
}

document.getElementById("send-form").addEventListener("submit", send);
window.addEventListener("resize", () => { dirty = true; });
setupDiagram();
showStreams();
if (REPLAY) startReplay();
else for (const p of peers) { poll(p); stream(p); }
requestAnimationFrame(render);
