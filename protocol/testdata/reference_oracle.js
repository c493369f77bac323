// An oracle for reference_test.go: judges frames and paths the way the
// reference (@norskvideo/ctl-product-template-schema migration-socket.js)
// does, with the real JavaScript JSON.parse, RegExp, decodeURIComponent and
// encodeURIComponent. zod is not installable here, so its schemas are
// transcribed below with zod 4's semantics: z.object strips unknown keys,
// z.string/z.array/z.literal are typeof/Array.isArray/=== checks, z.number
// refuses NaN and ±Infinity, and z.json() is a union of string, finite number,
// boolean, null, array of json and record of json, where z.record skips a
// "__proto__" key.
//
// stdin: one JSON object per line, {kind, input (base64), go: Go's verdict}.
// stdout: one line per mismatch, then "checked N".
"use strict";
const readline = require("readline");

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v) => typeof v === "string";
const num = (v) => typeof v === "number" && Number.isFinite(v);
function json(v) {
  if (v === null || typeof v === "string" || typeof v === "boolean") return true;
  if (typeof v === "number") return Number.isFinite(v);
  if (Array.isArray(v)) return v.every(json);
  if (isObject(v)) {
    for (const k of Reflect.ownKeys(v)) {
      if (k === "__proto__") continue;
      if (!json(v[k])) return false;
    }
    return true;
  }
  return false; // undefined: the member is absent
}
const optional = (check) => (v) => v === undefined || check(v);
const arrayOf = (check) => (v) => Array.isArray(v) && v.every(check);
const shape = (fields) => (v) => isObject(v) && Object.entries(fields).every(([k, check]) => check(v[k]));

const jobSchemas = {
  hello: { token: str },
  state: { payload: json },
  "state-refused": { reason: str },
  "target-ready": { payload: json },
  "source-stopped-output": { payload: json },
  "target-applied": {
    applied: optional(arrayOf(str)),
    failed: optional(arrayOf(shape({ id: str, reason: str }))),
    skewMs: optional(num),
  },
  abort: { reason: str },
};
const workerSchemas = {
  "hello-ack": { migration: optional(shape({ id: str, side: (v) => v === "target" })) },
  "get-state": { migrationId: str },
  "initial-state": { migrationId: str, payload: json },
  "cutover-ready": { migrationId: str, payload: json },
  "cutover-apply": { migrationId: str, payload: json },
  abort: { migrationId: str, reason: str },
};

function parseFrame(schemas, text) {
  let raw;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(raw)) return undefined;
  // The discriminated union looks the tag up in a Map, so only a string
  // equal to a literal matches (Object.hasOwn alone would let ["hello"] in).
  const fields = typeof raw.type === "string" && Object.hasOwn(schemas, raw.type) ? schemas[raw.type] : undefined;
  if (!fields) return undefined;
  const out = { type: raw.type };
  for (const [k, check] of Object.entries(fields)) {
    if (!check(raw[k])) return undefined;
    if (raw[k] !== undefined) out[k] = raw[k];
  }
  return out;
}

function parseJobSocketPath(path) {
  const m = /^\/instances\/([^/?#]+)\/([^/?#]+)\/?(?:[?#].*)?$/.exec(path);
  if (!m?.[1] || !m[2]) return undefined;
  try {
    return { jobId: decodeURIComponent(m[1]), role: decodeURIComponent(m[2]) };
  } catch {
    return undefined;
  }
}

// Go strings cannot hold lone surrogates; its parser turns them into U+FFFD.
const wellFormed = (v) => (typeof v === "string" ? v.toWellFormed() : v);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function compareFrame(js, go) {
  if (!js || !go.ok) return !js === !go.ok;
  const g = go.frame;
  for (const k of Object.keys(js)) {
    if (k === "type" || k === "token" || k === "reason" || k === "migrationId") {
      if (wellFormed(js[k]) !== g[k]) return false;
    } else if (k === "payload") {
      if (!same(js.payload, JSON.parse(g.payload))) return false;
    } else if (k === "applied") {
      if (!same(js.applied.map(wellFormed), g.applied)) return false;
    } else if (k === "failed") {
      const f = js.failed.map((x) => ({ id: wellFormed(x.id), reason: wellFormed(x.reason) }));
      if (!same(f, g.failed)) return false;
    } else if (k === "skewMs") {
      if (js.skewMs !== g.skewMs) return false;
    } else if (k === "migration") {
      if (!same({ id: wellFormed(js.migration.id), side: js.migration.side }, g.migration)) return false;
    }
  }
  // Go must not report a field the reference dropped.
  for (const k of ["applied", "failed", "skewMs", "migration"]) {
    if ((g[k] !== undefined && g[k] !== null) !== (js[k] !== undefined)) return false;
  }
  return true;
}

const fatalUTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
let checked = 0;
const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const c = JSON.parse(line);
  const bytes = Buffer.from(c.input, "base64");
  let text;
  try {
    text = fatalUTF8.decode(bytes);
  } catch {
    text = undefined; // a text frame cannot carry it
  }
  let ok;
  if (c.kind === "job" || c.kind === "worker") {
    const js = text === undefined ? undefined : parseFrame(c.kind === "job" ? jobSchemas : workerSchemas, text);
    ok = compareFrame(js, c.go);
    if (!ok) console.log(JSON.stringify({ mismatch: c.kind, text, js: js ?? null, go: c.go }));
  } else if (c.kind === "path") {
    const js = text === undefined ? undefined : parseJobSocketPath(text);
    ok = js ? c.go.ok && js.jobId === c.go.jobId && js.role === c.go.role : !c.go.ok;
    if (!ok) console.log(JSON.stringify({ mismatch: "path", text, js: js ?? null, go: c.go }));
  } else if (c.kind === "encode") {
    const [jobId, role] = JSON.parse(text);
    const js = `/instances/${encodeURIComponent(jobId)}/${encodeURIComponent(role)}`;
    ok = js === c.go.path;
    if (!ok) console.log(JSON.stringify({ mismatch: "encode", jobId, role, js, go: c.go }));
  }
  checked++;
});
rl.on("close", () => console.log(`checked ${checked}`));
