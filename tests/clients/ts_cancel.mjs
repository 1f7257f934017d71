// The TypeScript client (@modelcontextprotocol/client, pinned in package.json) cancels a
// running bash over Streamable HTTP, in the 2025-11-25 era (legacy initialize, stateless
// POSTs) and the 2026-07-28 era: the command's whole tree must be gone soon after, and
// the client's promise rejects with its abort. Prints the latency from abort to no process.
//
//   node ts_cancel.mjs --url http://127.0.0.1:PORT/mcp --token-file FILE   (run by run.sh)
import { readFileSync, readdirSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
const url = new URL(arg("--url"));
const token = readFileSync(arg("--token-file"), "utf8").trim();

/** Pids whose command line holds `needle`. */
function pidsWith(needle) {
  const pids = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(needle)) pids.push(Number(entry));
    } catch {}
  }
  return pids;
}

async function until(predicate, what, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function cancelIn(era, versionNegotiation) {
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "serverfs-ts-cancel", version: "1" }, { versionNegotiation });
  await client.connect(transport);
  const tag = `300.${process.pid}${Date.now() % 1_000_000}`;
  const abort = new AbortController();
  const call = client.callTool(
    { name: "bash", arguments: { command: `sleep ${tag} & sleep ${tag}`, timeout_seconds: 600 } },
    { signal: abort.signal },
  );
  const settled = call.then(() => "answered", (e) => `rejected: ${e?.name ?? e}`);
  await until(() => pidsWith(tag).length > 0, `${era}: the command starts`);
  const t0 = performance.now();
  abort.abort("user stopped it");
  await until(() => pidsWith(tag).length === 0, `${era}: the command's tree is gone`, 15_000);
  const ms = (performance.now() - t0).toFixed(0);
  const outcome = await settled;
  if (!outcome.startsWith("rejected")) throw new Error(`${era}: a cancelled call was ${outcome}`);
  console.log(`ts-cancel ${era}: tree gone ${ms} ms after abort; call ${outcome}`);
  await client.close();
}

await cancelIn("2025-11-25", undefined);
await cancelIn("2026-07-28", { mode: { pin: "2026-07-28" } });
console.log("ts-cancel: ok");
