// normsim's counter example job in JavaScript for Node: the same job as
// examples/jobs/counter (Go), speaking the job socket by hand with Node's
// built-in WebSocket (Node 22+, or Node 20.10+ with --experimental-websocket;
// scripts/run-node-job adds the flag where it is needed). No npm packages.
//
// It sends a sequence number to its output at a steady rate and hands over
// at an exact position:
//
//  - output: one UDP datagram {"job","instance","seq"} per packet to
//    NORMSIM_OUTPUT_ADDR (none when unset), COUNTER_RATE packets per second
//    (default 50). A fresh counter starts at the number of ticks since the
//    Unix epoch, so two counters started independently agree on "now" and a
//    gap or overlap between them shows up as lost or repeated numbers.
//  - job socket: NORSK_WORKER_WS_URL and NORSK_WORKER_TOKEN (both unset: no
//    socket, the counter just produces). It says hello, waits for hello-ack,
//    and then answers the worker:
//      get-state      -> state {"rate": n}
//      initial-state  -> target-ready {"ready": true}          (target)
//      cutover-ready  -> stops output, source-stopped-output {"last": n}
//      cutover-apply  -> continues from last+1, target-applied (target)
//      abort          -> a source that had stopped resumes; a target stays idle
//    A connection lost before the source said source-stopped-output rolls
//    back like an abort; one lost after it does not (the point of no return).
//
// Runs until SIGTERM or SIGINT.

import dgram from "node:dgram";
import os from "node:os";

// Close codes of the contract (docs/contract.md section 1).
const CLOSE_PROTOCOL_ERROR = 4400;
const CLOSE_UNAUTHORIZED = 4401;
const CLOSE_REPLACED = 4409;
const HELLO_TIMEOUT_REASON = "no hello within"; // a 4401 that only means "late"
const MAX_FRAME = 64 * 1024;
const WORKER_FRAMES = new Set(["hello-ack", "get-state", "initial-state", "cutover-ready", "cutover-apply", "abort"]);

function log(level, msg, fields = {}) {
  const kv = Object.entries(fields).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  console.log([new Date().toISOString(), level, msg, ...kv].join(" "));
}

if (typeof WebSocket !== "function") {
  console.error("node-counter: this Node has no global WebSocket; use Node 22+, or Node 20.10+ with --experimental-websocket (scripts/run-node-job does this)");
  process.exit(2);
}

function rateFromEnv() {
  const v = process.env.COUNTER_RATE ?? "";
  if (v === "") return 50;
  const n = /^[0-9]+$/.test(v) ? Number(v) : 0;
  if (n < 1 || n > 100000) {
    console.error(`COUNTER_RATE must be a whole number from 1 to 100000; got ${JSON.stringify(v)}`);
    process.exit(1);
  }
  return n;
}

// identity is the job and instance names for attribution: normsim passes
// them, and the socket URL (/instances/<jobId>/<role>) carries them too.
function identity() {
  let job = process.env.NORMSIM_JOB ?? "";
  let inst = process.env.NORMSIM_INSTANCE ?? "";
  try {
    const parts = new URL(process.env.NORSK_WORKER_WS_URL ?? "").pathname.replace(/\/$/, "").split("/");
    if (parts.length === 4 && parts[1] === "instances" && parts[2] && parts[3]) {
      job ||= decodeURIComponent(parts[2]);
      inst ||= decodeURIComponent(parts[3]);
    }
  } catch {
    // no URL, or not one: the env names are all there is
  }
  return { job, inst: inst || os.hostname() };
}

// The output: producing or not, the next number, the last one sent. Node
// runs the timer and the socket handlers on one thread, so a stop cannot
// race a packet going out.
class Counter {
  constructor(rate, job, inst, out) {
    Object.assign(this, { rate, job, inst, out, producing: false, next: 0, sent: -1 });
  }
  clockTick() {
    return Math.floor((Date.now() * this.rate) / 1000);
  }
  startAt(n) {
    this.next = n;
    this.producing = true;
    log("INFO", "output started", { from: n });
  }
  stop() {
    this.producing = false;
    return this.sent;
  }
  run() {
    const period = 1000 / this.rate;
    let due = performance.now();
    let report = due + 1000;
    const tick = () => {
      if (this.producing) {
        const seq = this.next++;
        this.sent = seq;
        this.emit(seq);
      }
      const now = performance.now();
      if (now >= report) {
        report += 1000;
        log("INFO", "counter", { producing: this.producing, last: this.sent });
      }
      due += period;
      this.timer = setTimeout(tick, Math.max(0, due - performance.now()));
    };
    due += period;
    this.timer = setTimeout(tick, period);
  }
  emit(seq) {
    if (!this.out) return;
    this.out.send(JSON.stringify({ job: this.job, instance: this.inst, seq }), (err) => {
      if (err) log("WARN", "output", { err: err.message });
    });
  }
}

// The job's side of the job socket, reconnecting until stopped.
class JobSocket {
  constructor(counter, url, token) {
    Object.assign(this, { c: counter, url, token });
    this.targetOf = null; // migration id when launched as a migration target
    this.migration = null; // the source's migration in progress
    this.committed = false; // this side sent source-stopped-output: no rollback
    // The migration whose get-state this connection answered: a get-state
    // delivered twice is one question, and a second state would be out of
    // phase (the worker closes the socket with 4400).
    this.asked = null;
    this.backoff = 250;
    this.stopped = false;
    this.acked = new Promise((resolve) => (this.onAck = resolve));
  }

  connect() {
    if (this.stopped) return;
    const ws = new WebSocket(this.url);
    this.ws = ws;
    let acked = false;
    ws.onopen = () => {
      this.asked = null; // a new connection may be asked anew
      ws.send(JSON.stringify({ type: "hello", token: this.token }));
    };
    ws.onmessage = (ev) => {
      const f = this.parse(ev.data);
      if (!f || (acked ? f.type === "hello-ack" : f.type !== "hello-ack")) {
        ws.close(CLOSE_PROTOCOL_ERROR, acked ? "unexpected frame" : "expected hello-ack first");
        return;
      }
      if (!acked) {
        acked = true;
        this.backoff = 250;
        const m = f.migration;
        if (m && typeof m === "object" && m.side === "target") {
          this.targetOf = m.id;
          log("INFO", "job socket connected as a migration target", { migration: m.id });
        } else {
          log("INFO", "job socket connected");
        }
        this.onAck();
        return;
      }
      const reply = this.handle(f);
      if (reply) {
        const b = JSON.stringify(reply);
        if (Buffer.byteLength(b) > MAX_FRAME) throw new Error(`${reply.type} frame over the 64 KiB cap`);
        // Commit before the bytes go out: the worker may act on them at once.
        if (reply.type === "source-stopped-output") this.committed = true;
        ws.send(b);
      }
    };
    ws.onerror = () => {}; // onclose follows with the code; the error event carries nothing more
    ws.onclose = (ev) => {
      if (this.stopped) return;
      log("WARN", "job socket closed", { code: ev.code, reason: ev.reason });
      if (ev.code === CLOSE_REPLACED) {
        log("ERROR", "replaced by a newer connection for this instance (4409); not reconnecting");
        return;
      }
      if (ev.code === CLOSE_UNAUTHORIZED && !ev.reason.startsWith(HELLO_TIMEOUT_REASON)) {
        log("ERROR", "the worker refused the token or the instance (4401); not reconnecting", { reason: ev.reason });
        return;
      }
      this.lost();
      // Jittered, so jobs dropped together do not return together.
      const delay = this.backoff * (0.5 + Math.random());
      this.backoff = Math.min(this.backoff * 2, 10000);
      this.retry = setTimeout(() => this.connect(), delay);
    };
  }

  close() {
    this.stopped = true;
    clearTimeout(this.retry);
    this.ws?.close(1000);
  }

  parse(data) {
    if (typeof data !== "string") {
      log("WARN", "job socket: binary frame; the protocol has text frames only");
      return null;
    }
    let f;
    try {
      f = JSON.parse(data);
    } catch (e) {
      log("WARN", "job socket: frame is not JSON", { err: e.message });
      return null;
    }
    if (!f || typeof f !== "object" || Array.isArray(f) || !WORKER_FRAMES.has(f.type)) {
      log("WARN", "job socket: not a worker frame", { frame: data.slice(0, 200) });
      return null;
    }
    return f;
  }

  handle(f) {
    const mid = f.migrationId;
    switch (f.type) {
      case "get-state":
        if (mid !== undefined && mid === this.asked) {
          log("WARN", "get-state repeated for a migration already asked; ignored", { migration: mid });
          return null;
        }
        this.asked = mid;
        log("INFO", "get-state", { migration: mid });
        this.migration = mid;
        this.committed = false;
        return { type: "state", payload: { rate: this.c.rate } };
      case "initial-state":
        log("INFO", "initial-state", { migration: mid, state: f.payload });
        return { type: "target-ready", payload: { ready: true } };
      case "cutover-ready": {
        this.migration = mid;
        const last = this.c.stop();
        log("INFO", "cutover-ready: output stopped", { migration: mid, last });
        return { type: "source-stopped-output", payload: { last } };
      }
      case "cutover-apply": {
        const pos = f.payload;
        if (!pos || typeof pos !== "object" || !Number.isInteger(pos.last)) {
          const reason = `cutover-apply position is not {"last": n}: ${JSON.stringify(pos)}`;
          log("ERROR", reason);
          return { type: "target-applied", failed: [{ id: "cutover-apply", reason }] };
        }
        this.c.startAt(pos.last + 1);
        this.targetOf = null; // the producer now; a later migration moves it as a source
        log("INFO", "cutover-apply: output continues", { migration: mid, from: pos.last + 1 });
        return { type: "target-applied", applied: ["counter"] };
      }
      case "abort":
        this.abort(mid, f.reason ?? "");
        return null;
    }
    return null;
  }

  abort(mid, reason) {
    if (this.targetOf !== null && mid === this.targetOf) {
      // A target rolled back produces nothing; the worker removes it.
      log("WARN", "migration aborted (target)", { migration: mid, reason });
      return;
    }
    // The worker decides where the point of no return fell: an abort that
    // crossed our source-stopped-output on the wire means it rolled back,
    // so the source resumes even after it said it stopped.
    this.resume(mid, reason);
  }

  // A connection lost before the point of no return rolls back, as the
  // worker does on its side.
  lost() {
    if (this.migration !== null && !this.committed) this.resume(this.migration, "connection to the worker was lost");
  }

  resume(mid, reason) {
    let resumed = false;
    if (!this.c.producing && this.c.sent >= 0 && this.targetOf === null) {
      this.c.next = this.c.sent + 1;
      this.c.producing = true;
      resumed = true;
    }
    this.migration = null;
    log("WARN", "migration aborted", { migration: mid, reason, resumed });
  }
}

async function main() {
  const rate = rateFromEnv();
  const { job, inst } = identity();
  let out = null;
  const addr = process.env.NORMSIM_OUTPUT_ADDR ?? "";
  if (addr) {
    const i = addr.lastIndexOf(":");
    const host = addr.slice(0, i).replace(/^\[|\]$/g, "");
    out = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
    await new Promise((resolve, reject) => {
      out.once("error", reject);
      out.connect(Number(addr.slice(i + 1)), host, resolve);
    });
  }
  const c = new Counter(rate, job, inst, out);
  log("INFO", "counter starting", { job, instance: inst, rate, output: addr });
  c.run();

  const url = process.env.NORSK_WORKER_WS_URL ?? "";
  const token = process.env.NORSK_WORKER_TOKEN ?? "";
  let sock = null;
  const quit = () => {
    log("INFO", "counter stopping", { last: c.sent });
    clearTimeout(c.timer);
    sock?.close();
    out?.close();
    process.exit(0);
  };
  process.on("SIGTERM", quit);
  process.on("SIGINT", quit);

  if (url && token) {
    sock = new JobSocket(c, url, token);
    sock.connect();
    // A migration target learns it is one from its hello-ack: wait for it
    // before producing, so a target never writes before its cutover.
    let timer;
    const acked = await Promise.race([sock.acked.then(() => true), new Promise((r) => (timer = setTimeout(() => r(false), 10000)))]);
    clearTimeout(timer);
    if (!acked) log("WARN", "job socket not reachable; producing anyway");
    if (sock.targetOf !== null) {
      log("INFO", "started as a migration target; waiting for cutover-apply", { migration: sock.targetOf });
    } else {
      c.startAt(c.clockTick());
    }
  } else {
    if (url || token) log("WARN", "job socket disabled: both NORSK_WORKER_WS_URL and NORSK_WORKER_TOKEN are needed");
    c.startAt(c.clockTick());
  }
}

main().catch((e) => {
  log("ERROR", "counter failed", { err: e.message });
  process.exit(1);
});
