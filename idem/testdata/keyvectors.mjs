// Computes the Node reference vectors of idem (docs/contract.md,
// Operation key).
//
//   node idem/testdata/keyvectors.mjs > idem/testdata/keyvectors.json
//
// This is the reference JavaScript implementation of the key: canonicalJson
// sorts object keys, writes every leaf with JSON.stringify and refuses a
// value more than 64 levels below the arguments object or a non-finite
// number; the key is createHash("sha256").update(JSON.stringify([...])).digest("hex").
// A JavaScript server written this way computes the keys the Go code does.
// The output is deterministic (no clock, no Math.random), so
// TestKeyVectorsNodeRerun can run this again and compare byte for byte.
import { createHash } from "node:crypto";

// --- the reference canonicalJson ---
function canonicalJson(value, depth = 0) {
  if (depth > 64 || (typeof value === "number" && !Number.isFinite(value))) {
    throw new TypeError("JSON exceeds the allowed limits.");
  }
  if (Array.isArray(value)) {
    return `[${value.map(item => canonicalJson(item, depth + 1)).join(",")}]`;
  }
  if (value !== null && typeof value === "object") {
    return `{${Object.keys(value).sort().map(
      key => `${JSON.stringify(key)}:${canonicalJson(value[key], depth + 1)}`,
    ).join(",")}}`;
  }
  return JSON.stringify(value);
}
// --- end of the reference canonicalJson ---

const sha256 = text => createHash("sha256").update(text).digest("hex");

// [name, tenant, request_id, function, arguments as JSON text]
const cases = [
  ["basic", "tenant-a", "request-example", "create_ticket", '{"title": "Cannot sign in"}'],
  ["order-a", "tenant-a", "r-1", "create_ticket", '{"title":"T","priority":"high","description":"D"}'],
  ["order-b", "tenant-a", "r-1", "create_ticket", '{"description":"D","title":"T","priority":"high"}'],
  ["order-c", "tenant-a", "r-1", "create_ticket", ' {\n "priority" : "high" ,\t"description":"D", "title":"T"}\r\n'],
  ["changed-args", "tenant-a", "r-1", "create_ticket", '{"title":"T","priority":"low","description":"D"}'],
  ["other-tenant", "tenant-b", "r-1", "create_ticket", '{"title":"T","priority":"high","description":"D"}'],
  ["unicode", "tenant-ä", "req-日本", "create_ticket", '{"title":"Ünïcødé 日本語 café","description":"A\\u030a vs \\u00c5"}'],
  ["html", "t<a>&b", "r<1>&2", "create_ticket", '{"title":"<script>alert(\'x\')&amp;</script>","description":"a > b & c < d"}'],
  ["line-separators", "tenant-\u2028", "req\u2029id", "create_ticket", '{"title":"one\u2028two\\u2029three"}'],
  ["quotes-backslashes", "ten\"ant\\", "r\\\"q", "create_ticket", '{"title":"He said \\"hi\\" \\\\ back\\\\slash \\/ slash"}'],
  ["control-chars", "tenant\u0001", "req\u007f", "create_ticket",
    '{"title":"t","description":"l1\\nl2\\tt\\u0000nul\\u001f\\b\\f\\r\\u007f\\u0080\\u009f"}'],
  ["emoji", "tenant-🎫", "req-😂", "create_ticket", '{"title":"🎫 ticket \\ud83d\\ude02","description":"👩‍💻"}'],
  ["utf16-sort", "tenant-a", "r-2", "create_ticket", '{"\\ufb33":3,"\\ud83d\\ude02":2,"\\u20ac":1,"a":4,"":0,"\\u0080":5}'],
  ["empty-strings", "", "", "", "{}"],
  ["empty-title", "tenant-a", "r-3", "create_ticket", '{"title":""}'],
  ["numbers", "tenant-a", "r-4", "create_ticket",
    '{"n":[1,2.50,1e21,1E30,-0,0.000001,1e-7,333333333.33333329,4.50,2e-3,-1.5e-7,1e-400,9007199254740993],"z":true,"y":null,"x":false}'],
  ["nested", "tenant-a", "r-5", "get_ticket", '{"a":{"c":[{"z":1,"b":[]}],"b":{}},"A":[[[]]]}'],
  ["long", "tenant-a", "r".repeat(128), "create_ticket", JSON.stringify({ title: "x".repeat(200), description: "é".repeat(4000) })],
];

const keyVectors = cases.map(([name, tenant, requestId, fn, args]) => {
  const canonical = canonicalJson(JSON.parse(args));
  return {
    name, tenant, request_id: requestId, function: fn, arguments: args, canonical,
    fingerprint: sha256(canonical),
    key_arguments: sha256(JSON.stringify([tenant, requestId, fn, canonical])),
    key_request: sha256(JSON.stringify([tenant, requestId, fn])),
  };
});

// Strings for AppendString: a fixed list, then pseudo-random ones from a
// fixed-seed generator (no lone surrogates: a Go string cannot hold one).
const fixed = [
  "", "plain", "\"", "\\", "/", "\\\"", "<>&", "<script>&amp;</script>", "\u2028", "\u2029",
  "a\u2028b\u2029c", "\u007f", "\u0080", "\u009f", "\u00a0", "\ufeff", "\uffff", "\ufffd",
  "é", "日本語", "🎫", "😂👩‍💻", "\ud83d\ude02", "\u{10ffff}",
];
for (let c = 0; c < 0x20; c++) fixed.push(String.fromCharCode(c), `x${String.fromCharCode(c)}y`);
const pool = [
  ..."abcXYZ019 -_.,:;'`~!@#$%^*()[]{}=+?|", "\"", "\\", "/", "<", ">", "&",
  "\u0000", "\u0001", "\b", "\t", "\n", "\u000b", "\f", "\r", "\u001b", "\u001f", "\u007f",
  "\u0080", "\u0085", "\u009f", "\u00a0", "\u00e9", "\u0301", "\u2028", "\u2029", "\u200b",
  "\u3000", "\ufeff", "\uffff", "\ud7ff", "\ue000", "日", "€", "🎫", "😂", "\u{10ffff}", "\u{1d11e}",
];
let state = 20261110;
const next = n => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return (state >>> 8) % n;
};
const random = [];
for (let i = 0; i < 300; i++) {
  let s = "";
  const len = next(24);
  for (let j = 0; j < len; j++) s += pool[next(pool.length)];
  random.push(s);
}
const strings = [...fixed, ...random].map(s => ({ s, json: JSON.stringify(s) }));

// Depth: canonicalJson refuses a value more than 64 levels below the
// arguments object (the object itself is level 0).
// nest puts leaf at the given level: level - 1 containers inside the
// arguments object's member "v", taken in turn from opens and closes.
const nest = (level, opens, closes, leaf) => {
  let open = "", close = "";
  for (let i = 0; i < level - 1; i++) {
    open += opens[i % opens.length];
    close = closes[i % closes.length] + close;
  }
  return '{"v":' + open + leaf + close + "}";
};
const depthCases = [];
for (const level of [1, 2, 63, 64, 65, 66]) {
  depthCases.push(
    ["arrays", nest(level, ["["], ["]"], "1")],
    ["objects", nest(level, ['{"k":'], ["}"], '"s"')],
    ["mixed", nest(level, ["[", '{"k":'], ["]", "}"], "null")],
    ["empty-array", nest(level, ["["], ["]"], "[]")],
    ["empty-object", nest(level, ['{"k":'], ["}"], "{}")],
  );
}
const depth = depthCases.map(([shape, json]) => {
  try {
    return { shape, json, ok: true, canonical: canonicalJson(JSON.parse(json)) };
  } catch {
    return { shape, json, ok: false };
  }
});

// Numbers: what JSON.stringify writes for each double (RFC 8785 section
// 3.2.2.3 and appendix B), given as IEEE-754 bits in hex.
const hexes = [
  "0000000000000000", "8000000000000000", "0000000000000001", "8000000000000001",
  "7fefffffffffffff", "ffefffffffffffff", "4340000000000000", "c340000000000000",
  "4430000000000000", "44b52d02c7e14af5", "44b52d02c7e14af6", "44b52d02c7e14af7",
  "444b1ae4d6e2ef4e", "444b1ae4d6e2ef4f", "444b1ae4d6e2ef50", "3eb0c6f7a0b5ed8c",
  "3eb0c6f7a0b5ed8d", "41b3de4355555553", "41b3de4355555554", "41b3de4355555555",
  "41b3de4355555556", "41b3de4355555557", "becbf647612f3696", "43143ff3c1cb0959",
];
const numbers = hexes.map(hex => {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt("0x" + hex));
  return { hex, json: JSON.stringify(view.getFloat64(0)) };
});

process.stdout.write(JSON.stringify({ keys: keyVectors, strings, depth, numbers }, null, 1) + "\n");
