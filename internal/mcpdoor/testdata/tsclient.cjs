// The official TypeScript SDK's MCP client against the door, for the Go
// tests: node tsclient.cjs URL TOKEN REVISION PACKAGE REQUEST_ID, with
// MCP_TS_MODULES the folder holding node_modules (scripts/tools.sh
// installs it into .cache/mcp-ts). PACKAGE is "client" (the SDK's v2
// client package, both revisions) or "sdk" (the v1 package, 2025-11-25).
// It prints one JSON object: the negotiated revision, the tools, and the
// answers of two identical create_ticket calls, a call without a
// request_id, and get_ticket.
'use strict';
const { createRequire } = require('node:module');
const path = require('node:path');

async function main() {
  const [url, token, revision, pkg, requestID] = process.argv.slice(2);
  const req = createRequire(path.join(process.env.MCP_TS_MODULES, 'package.json'));
  let client, transport;
  const requestInit = { headers: { Authorization: 'Bearer ' + token } };
  if (pkg === 'sdk') {
    const { Client } = req('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = req('@modelcontextprotocol/sdk/client/streamableHttp.js');
    client = new Client({ name: 'ts-sdk-test', version: '1' });
    transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });
  } else {
    const { Client, StreamableHTTPClientTransport } = req('@modelcontextprotocol/client');
    const mode = revision >= '2026-07-28' ? { pin: revision } : 'legacy';
    client = new Client({ name: 'ts-client-test', version: '1' }, { versionNegotiation: { mode } });
    transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });
  }
  await client.connect(transport);
  const negotiated = typeof client.getNegotiatedProtocolVersion === 'function'
    ? client.getNegotiatedProtocolVersion() : transport.protocolVersion;
  const { tools } = await client.listTools();
  const meta = { 'io.github.aivax-examples/request_id': requestID };
  const args = { title: 'From TypeScript', priority: 'urgent' };
  const answer = (r) => ({ structured: r.structuredContent, isError: r.isError === true, text: r.content.map((c) => c.text) });
  const first = answer(await client.callTool({ name: 'create_ticket', arguments: args, _meta: meta }));
  const second = answer(await client.callTool({ name: 'create_ticket', arguments: args, _meta: meta }));
  const noKey = answer(await client.callTool({ name: 'create_ticket', arguments: args }));
  const found = answer(await client.callTool({ name: 'get_ticket', arguments: { ticket_id: first.structured.ticket_id } }));
  let unknownTool = null;
  try {
    await client.callTool({ name: 'delete_everything', arguments: {} });
  } catch (e) {
    unknownTool = String(e.code ?? e.message);
  }
  await client.close();
  process.stdout.write(JSON.stringify({ negotiated, tools, first, second, noKey, found, unknownTool }) + '\n');
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
