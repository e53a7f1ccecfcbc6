// TOM dashboard, the Step panel (peers started with --step): what each watched peer holds at its gate,
// per link, and buttons that release a link's head (GET /api/gate, POST /api/gate/release). A link is
// FIFO: only its head can be released; what is not held (heartbeats, membership frames) passes by
// itself behind it. Kept apart from dashboard.js: it reads the same peers (?peers=) and token, nothing
// of dashboard.js's own state. Every text from the network goes in as textContent.
"use strict";

(() => {
  const POLL_MS = 500, OFF_POLL_MS = 5000, SHOWN_BEHIND = 8;

  const token = (() => {
    const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
    if (m) sessionStorage.setItem("tom-token", decodeURIComponent(m[1]));
    return sessionStorage.getItem("tom-token");
  })();
  const auth = () => (token ? { Authorization: "Bearer " + token } : {});
  const bases = (() => {
    const q = new URLSearchParams(location.search).get("peers");
    if (!q) return [location.origin];
    return q.split(",").map(x => x.trim()).filter(Boolean)
      .map(x => (/^https?:\/\//.test(x) ? x : "http://" + x).replace(/\/+$/, ""));
  })();
  // per watched peer: its gate (null: step mode off, or not read yet), whether the peer has none (its
  // status says so: then only the status is read, every OFF_POLL_MS), and the last error
  const gates = bases.map(base => ({ base, gate: null, off: true, error: null, wake: null }));
  let shown = "";

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) if (c != null) e.append(c);
    return e;
  }
  const port = pid => pid.slice(pid.lastIndexOf(":") + 1);
  const short = t => (t == null ? "" : t.length > 40 ? t.slice(0, 39) + "…" : t);

  // one arrow a held frame stands for, in words: MESSAGE (3, 5000) "hi", ACK of (3, 5000)
  function item(it, frame) {
    const key = `(${it.clock}, ${port(it.pid)})`;
    if (it.kind === "MESSAGE" || it.kind === "RELAY") {
      return el("span", { class: "step-item msg" }, `${it.kind === frame ? "" : it.kind + " "}${key} `, el("q", {}, short(it.text)));
    }
    if (it.kind === "SEQ") return el("span", { class: "step-item seq" }, `SEQ ${it.seq} for ${key}`);
    return el("span", { class: "step-item ack" + (it.ahead ? " ahead" : "") }, `ACK of ${key}`,
      it.ahead ? el("span", { class: "ahead-note", title: "this peer has not received that MESSAGE yet" }, " ahead of its MESSAGE: a premature ACK") : null);
  }

  function describe(w) {  // a queued item, in a few words
    if (w.passes) return w.frame;
    return w.shows.map(it => it.kind === "ACK" ? `ACK(${it.clock},${port(it.pid)})` : `${it.kind}(${it.clock},${port(it.pid)})`).join(" + ") || w.frame;
  }

  async function post(g, path, body) {
    const res = await fetch(g.base + path, {
      method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, auth()), body: JSON.stringify(body),
    });
    const r = await res.json();
    if (!res.ok) throw new Error(r.error || "HTTP " + res.status);
    return r;
  }

  // one action on a peer's gate: POST it, say what came of it, then read every gate again (what a
  // release makes the peer send reaches the others' gates)
  async function act(g, path, body, button, said) {
    const out = document.getElementById("step-result");
    if (button) button.disabled = true;
    try {
      const r = await post(g, path, body);
      out.className = "step-result ok";
      out.textContent = said(r, g.gate ? g.gate.peer : g.base);
    } catch (e) {
      out.className = "step-result err";
      out.textContent = String(e.message || e);
    } finally {
      if (button) button.disabled = false;
    }
    for (const other of gates) if (other.wake) other.wake();
  }

  function hold(g, on, button) {  // close a gate (hold what comes) or open it (let everything through)
    return act(g, "/api/gate/hold", { on }, button,
      (r, at) => on ? `${at} holds what comes` : `${at} lets everything through (released ${r.released})`);
  }

  function release(g, body, button) {
    return act(g, "/api/gate/release", body, button,
      (r, at) => r.frame ? `released at ${at}: ${r.frame.frame} from ${r.from} (${describe(r.frame)})`
        : `released ${r.released} frame${r.released === 1 ? "" : "s"} at ${at}`);
  }

  async function readGate(g) {
    const res = await fetch(g.base + "/api/gate", { headers: auth(), cache: "no-store" });
    return res.ok ? res.json() : null;
  }

  // every watched peer's gate, until none holds anything: what one peer lets through makes it send
  // ACKs that the others then hold (bounded: at most 30 rounds)
  async function releaseEverywhere(button) {
    button.disabled = true;
    try {
      for (let round = 0; round < 30; round++) {
        const held = [];
        for (const g of gates) {
          const gate = await readGate(g).catch(() => null);
          if (gate && gate.held) held.push(g);
        }
        if (!held.length) break;
        for (const g of held) await release(g, { all: true });
        await new Promise(r => setTimeout(r, 150));
      }
    } finally {
      button.disabled = false;
    }
  }

  async function releaseRandom(button) {  // one head among every watched peer's, drawn uniformly
    const heads = gates.flatMap(g => (g.gate ? g.gate.links.map(l => [g, l.from]) : []));
    if (!heads.length) return;
    const [g, from] = heads[Math.floor(Math.random() * heads.length)];
    await release(g, { from }, button);
  }

  function peerBox(g) {
    const gate = g.gate;
    const box = el("div", { class: "step-peer", "data-at": gate.peer });
    const all = el("button", { class: "step-all", "data-at": gate.peer, type: "button" }, "release all");
    const rnd = el("button", { class: "step-random", "data-at": gate.peer, type: "button" }, "random");
    const toggle = el("button", { class: "step-hold", "data-at": gate.peer, "data-holding": String(gate.holding), type: "button",
      title: gate.holding ? "release everything held, and let what comes pass" : "hold what comes from now on" },
      gate.holding ? "open" : "hold");
    all.disabled = rnd.disabled = !gate.held;
    all.addEventListener("click", () => release(g, { all: true }, all));
    rnd.addEventListener("click", () => release(g, { random: true }, rnd));
    toggle.addEventListener("click", () => hold(g, !gate.holding, toggle));
    box.append(el("div", { class: "step-peer-head" + (gate.holding ? "" : " open") }, el("span", { class: "pid" }, `at ${gate.peer}`),
      el("span", { class: "dim" }, gate.holding ? ` ${gate.held} held · ${gate.released} released by hand` : " open: frames pass"),
      el("span", { class: "step-buttons" }, all, rnd, toggle)));
    if (g.error) box.append(el("div", { class: "error" }, g.error));
    if (!gate.links.length) {
      box.append(el("div", { class: "none" }, gate.holding ? "nothing held yet" : "the gate is open: nothing is held"));
      return box;
    }
    for (const link of gate.links) {
      const head = link.head;
      const row = el("div", { class: "step-link", "data-at": gate.peer, "data-from": link.from });
      const button = el("button", { class: "step-release", "data-at": gate.peer, "data-from": link.from, type: "button" }, "release");
      button.addEventListener("click", () => release(g, { from: link.from }, button));
      const headEl = el("div", { class: "step-head", "data-frame": head.frame }, el("span", { class: "frame-kind" }, head.frame), " ");
      for (const it of head.shows) headEl.append(item(it, head.frame), " ");
      headEl.firstChild.title = head.line || "";
      row.append(el("div", { class: "step-from" }, `from ${link.from}`,
        el("div", { class: "dim" }, `${link.held} held${link.waiting > link.held ? `, ${link.waiting - link.held} behind them pass by themselves` : ""}`)),
        headEl, button);
      const behind = link.queue.slice(1, 1 + SHOWN_BEHIND).map(describe);
      if (behind.length) {
        row.append(el("div", { class: "step-behind dim" }, "then: " + behind.join(" · ") +
          (link.waiting > 1 + SHOWN_BEHIND ? ` · … ${link.waiting - 1 - SHOWN_BEHIND} more` : "")));
      }
      box.append(row);
    }
    return box;
  }

  function render() {
    const panel = document.getElementById("step");
    if (!panel) return;
    const on = gates.filter(g => g.gate);
    const picture = JSON.stringify(on.map(g => [g.gate, g.error]));
    if (picture === shown) return;  // unchanged: keep the buttons (a click may be under way)
    shown = picture;
    panel.hidden = !on.length;
    document.body.dataset.stepHeld = String(on.reduce((n, g) => n + g.gate.held, 0));
    const box = document.getElementById("step-peers");
    box.replaceChildren(...on.map(peerBox));
    const any = on.some(g => g.gate.held);
    document.getElementById("step-all-everywhere").disabled = !any;
    document.getElementById("step-random-everywhere").disabled = !any;
  }

  async function poll(g) {
    for (;;) {
      try {
        if (g.off) {  // step mode off (or not known yet): the status says whether the peer has a gate
          const res = await fetch(g.base + "/api/status", { headers: auth(), cache: "no-store" });
          const status = await res.json();
          if (!res.ok) throw new Error(status.error || "HTTP " + res.status);
          g.off = !status.gate;
        }
        if (!g.off) {
          const res = await fetch(g.base + "/api/gate", { headers: auth(), cache: "no-store" });
          const body = await res.json();
          if (res.status === 404) g.off = true;  // (restarted without --step)
          else if (!res.ok) throw new Error(body.error || "HTTP " + res.status);
          else g.gate = body;
        }
        if (g.off) g.gate = null;
        g.error = null;
      } catch (e) {
        g.error = String(e.message || e);
      }
      render();
      await new Promise(resolve => {
        const timer = setTimeout(resolve, g.off ? OFF_POLL_MS : POLL_MS);
        g.wake = () => { clearTimeout(timer); g.wake = null; resolve(); };
      });
    }
  }

  function start() {
    const all = document.getElementById("step-all-everywhere"), rnd = document.getElementById("step-random-everywhere");
    if (!all || new URLSearchParams(location.search).has("replay")) return;  // (a replay has no gates)
    all.addEventListener("click", () => releaseEverywhere(all));
    rnd.addEventListener("click", () => releaseRandom(rnd));
    for (const g of gates) poll(g);
  }
  start();
})();
