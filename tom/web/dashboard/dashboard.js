// TOM dashboard: one page for one peer (/) or a whole group (/?peers=HOST:PORT,HOST:PORT,...).
// Reads each peer's /api/status (polled) and /api/events?frames=1 (a Server-Sent Events stream read
// with fetch, so that the bearer token of a closed group can go in a header); sends with POST
// /api/messages. No framework, no build step; every text from the network goes in as textContent.
"use strict";

const KEEP_MESSAGES = 8;      // messages drawn in the diagram
const REMEMBER = 200;         // message keys remembered (older ones are forgotten)
const POLL_MS = 500;
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

const peers = baseUrls().map(base => {
  const peer = { base, pid: null, status: null, error: null, deliveries: [], streaming: false };
  peer.known = new Promise(resolve => { peer.setKnown = resolve; });  // resolved by the first status
  return peer;
});
function showStreams() {  // how many event streams are open (tests wait for it before they type)
  document.body.dataset.streams = String(peers.filter(p => p.streaming).length);
}
const messages = new Map();   // "clock|pid" -> {clock, pid, text, first, sends, recvs, acksOut, acksIn, delivered}
let dirty = true;

function msgOf(clock, pid) {
  const key = clock + "|" + pid;
  let m = messages.get(key);
  if (!m) {
    m = { key, clock, pid, text: null, first: Infinity, sends: [], recvs: [], acksOut: [], acksIn: [], seqsOut: [], seqsIn: [], delivered: [] };
    messages.set(key, m);
    if (messages.size > REMEMBER) messages.delete(messages.keys().next().value);
  }
  return m;
}

function onEvent(peer, name, d) {
  const at = peer.pid;
  if (name === "frame") {
    const m = msgOf(d.clock, d.pid);
    m.first = Math.min(m.first, d.t);
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
    m.text = d.text;
    m.delivered.push({ at, t: d.t, index: d.index, released: d.released });
    peer.deliveries.push(d);
  } else if (name === "view") {
    peer.deliveries.push(Object.assign({ isView: true }, d));
  } else if (name === "alarm") {
    peer.deliveries.push({ notice: `seen diverging from ${d.peer} (view ${d.view}, after message ${d.position})`, t: d.t });
  } else if (name === "notice") {
    peer.deliveries.push({ notice: d.notice, t: d.t });
  }
  if (peer.deliveries.length > 50) peer.deliveries.splice(0, peer.deliveries.length - 50);
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
        const res = await fetch(peer.base + "/api/events?frames=1", { headers: auth(), cache: "no-store" });
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
            if (data && name !== "lost") onEvent(peer, name, JSON.parse(data));
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
  for (const d of peer.deliveries.slice(-8).reverse()) {
    if (d.notice) list.append(h("li", { class: "view" }, NOTICES[d.notice] || d.notice));
    else if (d.isView) list.append(h("li", { class: "view" }, h("span", { class: "idx" }, `#${d.index} `),
      `view ${d.view}: ${d.members.length} members` + (d.joined.length ? `, joined ${d.joined.join(", ")}` : "") +
      (d.left.length ? `, left ${d.left.join(", ")}` : "") + (d.removed.length ? `, removed ${d.removed.join(", ")}` : "")));
    else list.append(h("li", { class: "delivery", "data-text": d.text }, h("span", { class: "idx" }, `#${d.index} (${d.clock}, ${pidKey(d.pid)[1]}) `),
      d.text, d.released ? h("span", { class: "released" }, "  ◆ released behind head") : null));
  }
  if (!list.children.length) list.append(h("li", { class: "none" }, "nothing yet"));
  el.append(list);
  return el;
}

function renderCards() {
  const box = document.getElementById("peers");
  box.replaceChildren(...peers.map(card));
}

// -- the space-time diagram ----------------------------------------------------------------------

function renderDiagram() {
  const svg = document.getElementById("diagram");
  const lanes = members();
  const W = svg.clientWidth || 900;
  const left = 150, right = 20, top = 26, gap = Math.max(54, Math.min(80, 200 / Math.max(1, lanes.length - 1)));
  const H = top + Math.max(1, lanes.length - 1) * gap + 40;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.style.height = H + "px";
  svg.replaceChildren();
  const y = pid => top + lanes.indexOf(pid) * gap;
  const recent = [...messages.values()].filter(m => isFinite(m.first) && m.text != null)
    .sort((a, b) => a.first - b.first).slice(-KEEP_MESSAGES);
  const clocks = new Map(peers.filter(p => p.status).map(p => [p.pid, p.status.clock]));
  for (const pid of lanes) {
    svg.append(s("line", { class: "lane", x1: left, x2: W - right, y1: y(pid), y2: y(pid) }));
    svg.append(s("text", { class: "lane-label", x: 8, y: y(pid) + 4 }, pid));
    if (clocks.has(pid)) svg.append(s("text", { class: "lane-clock", x: 8, y: y(pid) + 18 }, `clock ${clocks.get(pid)}`));
  }
  if (!recent.length) {
    svg.append(s("text", { class: "empty", x: left + 20, y: top + gap / 2 }, "no message yet: send one above"));
    return;
  }
  const times = [];
  for (const m of recent) for (const list of [m.sends, m.recvs, m.acksOut, m.acksIn, m.seqsOut, m.seqsIn, m.delivered]) for (const e of list) times.push(e.t);
  let t0 = Math.min(...times), t1 = Math.max(...times);
  const pad = Math.max(0.05, (t1 - t0) * 0.06);
  t0 -= pad; t1 += pad;
  const x = t => left + 10 + (t - t0) / (t1 - t0) * (W - left - right - 20);
  const defs = s("defs");
  for (const [id, color] of [["a-msg", "var(--msg)"], ["a-ack", "var(--ack)"], ["a-pre", "var(--premature)"], ["a-seq", "var(--seq)"]]) {
    const mk = s("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    mk.append(s("path", { d: "M0,0 L10,5 L0,10 z", style: `fill:${color}` }));
    defs.append(mk);
  }
  svg.append(defs);
  const stub = 26;
  const labelled = new Map();  // lane -> x of the delivery labels drawn on it
  const arrow = (cls, marker, x1, y1, x2, y2, extra) =>
    svg.append(s("line", Object.assign({ class: cls, x1, y1, x2, y2, "marker-end": `url(#${marker})` }, extra || {})));
  for (const m of recent) {
    const data = { "data-key": m.key, "data-text": m.text };
    // ACKs first, so that messages are drawn over them
    for (const a of m.acksIn) {
      if (!lanes.includes(a.from) || !lanes.includes(a.at)) continue;
      const out = m.acksOut.find(o => o.from === a.from && o.to.includes(a.at));
      const x1 = out ? x(out.t) : x(a.t) - stub;
      arrow("ack-arrow" + (a.premature ? " premature" : "") + (out ? "" : " partial"), a.premature ? "a-pre" : "a-ack",
        x1, y(a.from), x(a.t), y(a.at), data);
      if (a.premature) svg.append(s("text", { class: "premature-mark", x: x(a.t) + 4, y: y(a.at) - 6 }, "!"));
    }
    for (const o of m.acksOut) for (const to of o.to) {
      if (!lanes.includes(to) || m.acksIn.some(a => a.from === o.from && a.at === to)) continue;
      if (peers.some(p => p.pid === to)) continue; // watched: its receipt will come
      arrow("ack-arrow partial", "a-ack", x(o.t), y(o.from), x(o.t) + stub, y(o.from) + Math.sign(y(to) - y(o.from)) * stub, data);
    }
    // sequence numbers (sequencer order): from the sequencer to each member, labelled with the number
    for (const q of m.seqsIn) {
      if (!lanes.includes(q.from) || !lanes.includes(q.at)) continue;
      const out = m.seqsOut.find(o => o.from === q.from && o.to.includes(q.at));
      arrow("seq-arrow" + (out ? "" : " partial"), "a-seq", out ? x(out.t) : x(q.t) - stub, y(q.from), x(q.t), y(q.at), data);
    }
    for (const o of m.seqsOut) {
      if (!lanes.includes(o.from)) continue;
      svg.append(s("text", { class: "seq-label", x: x(o.t) + 6, y: y(o.from) - 8, "data-key": m.key }, "seq " + o.seq));
      for (const to of o.to) {
        if (!lanes.includes(to) || m.seqsIn.some(q => q.from === o.from && q.at === to) || peers.some(p => p.pid === to)) continue;
        arrow("seq-arrow partial", "a-seq", x(o.t), y(o.from), x(o.t) + stub, y(o.from) + Math.sign(y(to) - y(o.from)) * stub, data);
      }
    }
    const send = m.sends[0];
    for (const r of m.recvs) {
      if (!lanes.includes(r.from) || !lanes.includes(r.at)) continue;
      const x1 = send ? x(send.t) : x(r.t) - stub;
      arrow("msg-arrow" + (send ? "" : " partial"), "a-msg", x1, y(r.from), x(r.t), y(r.at), data);
    }
    if (send) {
      for (const to of send.to) {
        if (m.recvs.some(r => r.at === to) || peers.some(p => p.pid === to) || !lanes.includes(to)) continue;
        arrow("msg-arrow partial", "a-msg", x(send.t), y(send.from), x(send.t) + stub, y(send.from) + Math.sign(y(to) - y(send.from)) * stub, data);
      }
      svg.append(s("circle", { cx: x(send.t), cy: y(send.from), r: 3.5, style: "fill:var(--msg)" }));
      svg.append(s("text", { class: "clock-label", x: x(send.t) - 4, y: y(send.from) - 8, "text-anchor": "end" }, String(m.clock)));
      svg.append(s("text", { class: "text-label", x: x(send.t) + 4, y: y(send.from) - 8 }, short(m.text)));
    } else if (lanes.includes(m.pid) && m.recvs.length) {
      svg.append(s("text", { class: "clock-label", x: x(Math.min(...m.recvs.map(r => r.t))) - stub, y: y(m.pid) - 8, "text-anchor": "end" }, String(m.clock)));
    }
    for (const d of m.delivered) {
      if (!lanes.includes(d.at)) continue;
      const cx = x(d.t), cy = y(d.at);
      const near = (labelled.get(d.at) || []).filter(lx => Math.abs(lx - cx) < 18).length;  // released together
      labelled.set(d.at, [...(labelled.get(d.at) || []), cx]);
      if (d.released) svg.append(s("rect", { class: "deliver released", x: cx - 5, y: cy - 5, width: 10, height: 10, transform: `rotate(45 ${cx} ${cy})`, "data-key": m.key }));
      else svg.append(s("circle", { class: "deliver", cx, cy, r: 5, "data-key": m.key }));
      svg.append(s("text", { class: "deliver-label", x: cx - 6, y: cy + 17 + 11 * near }, "#" + d.index));
    }
  }
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

document.getElementById("send-form").addEventListener("submit", send);
window.addEventListener("resize", () => { dirty = true; });
showStreams();
for (const p of peers) { poll(p); stream(p); }
requestAnimationFrame(render);
