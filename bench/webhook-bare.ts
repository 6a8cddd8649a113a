import { Agent, request } from "undici";
import { deliveryHeaders } from "../shared/net/signing";

/**
 * The bare loop the dispatcher is measured against: signs (both signatures, as the dispatcher does)
 * and POSTs event bodies of the same shape to the receiver over keep-alive connections, with as
 * many in flight as one webhook gets from a dispatcher, for a fixed time. Nothing is stored.
 *
 *   node dist/bench/webhook-bare.js <url> <seconds> <in-flight>
 */
async function main(): Promise<void> {
  const [url, seconds, inFlight] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
  const agent = new Agent({ connections: inFlight, keepAliveTimeout: 30_000 });
  const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
  const until = Date.now() + seconds * 1000;
  let sent = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (Date.now() < until) {
        const n = sent++;
        const id = `evt_bare${String(n).padStart(18, "0")}`;
        const body = JSON.stringify({ id, type: "bench.test", created_at: new Date().toISOString(), data: { i: n } });
        const res = await request(url, {
          dispatcher: agent,
          method: "POST",
          headers: deliveryHeaders({ id: `del_bare${String(n).padStart(18, "0")}`, event_type: "bench.test" }, body, [secret]),
          body,
        });
        await res.body.dump();
        if (res.statusCode !== 200) failed += 1;
      }
    }),
  );
  await agent.close();
  process.stdout.write(JSON.stringify({ sent, failed }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
