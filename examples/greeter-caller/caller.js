// A caller in plain Node.js (20+, no npm packages): it calls `greeter/hello` through
// its sidecar's local HTTP listener, which runs the Axle client pipeline (discovery,
// selection, retries, failover) on its behalf.
//
//   node caller.js --sidecar http://127.0.0.1:PORT [--seconds 5] [--concurrency 4]
//
// Prints `ok N` every 100 answers, then one JSON line: {"ok", "failed", "served_by",
// "errors"}; exits 1 if any call failed.

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => {
    if (a.startsWith("--")) pairs.push([a.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const sidecar = args.sidecar;
if (!sidecar) {
  console.error("usage: node caller.js --sidecar http://127.0.0.1:PORT [--seconds S] [--concurrency C]");
  process.exit(2);
}
const seconds = Number(args.seconds ?? 5);
const concurrency = Number(args.concurrency ?? 4);
const until = Date.now() + seconds * 1000;

const summary = { ok: 0, failed: 0, served_by: {}, errors: [] };

async function hello(name) {
  const response = await fetch(`${sidecar}/greeter/hello`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-axle-app": "node-caller" },
    body: JSON.stringify({ name }),
  });
  const body = await response.json();
  if (!response.ok) throw new Error(`${response.status} ${body.error?.class}: ${body.error?.message}`);
  return body;
}

async function worker(id) {
  for (let i = 0; Date.now() < until; i++) {
    try {
      const answer = await hello(`node-${id}-${i}`);
      summary.ok++;
      summary.served_by[answer.served_by] = (summary.served_by[answer.served_by] ?? 0) + 1;
      if (summary.ok % 100 === 0) console.log(`ok ${summary.ok}`);
    } catch (e) {
      summary.failed++;
      if (summary.errors.length < 10) summary.errors.push(String(e.message ?? e));
    }
  }
}

await Promise.all(Array.from({ length: concurrency }, (_, id) => worker(id)));
console.log(JSON.stringify(summary));
process.exit(summary.failed === 0 ? 0 : 1);
