/**
 * What listener sessions cost an event's writer (shared/records/listeners.ts `forwardToListeners`, called
 * after every stored event), per event, against building the event's document (`eventDoc`, the
 * least work any stored event takes) in the same run:
 *   none      — no gateway announced a listener (the usual case)
 *   others    — 1000 other tenants are listened to
 *   listened  — the event's tenant is listened to: the event is broadcast (on a broker without a
 *               transporter here, so the NATS message itself is not in the figure)
 *
 *   npm run build && node dist/bench/listeners.js        (BENCH_EVENTS=200000)
 */
import { ServiceBroker } from "moleculer";
import { eventDoc } from "../shared/records/events";
import { forwardToListeners, noteAnnouncement } from "../shared/records/listeners";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 200_000);

/** The better of two timed runs, after a warm-up (the first run also pays for compiling). */
function nsPerEvent(run: (i: number) => void): number {
  for (let i = 0; i < 10_000; i++) run(i);
  const timed = () => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < EVENTS; i++) run(i);
    return Number(process.hrtime.bigint() - start) / EVENTS;
  };
  return Math.min(timed(), timed());
}

async function main(): Promise<void> {
  const broker = new ServiceBroker({ logger: false });
  await broker.start();
  const input = { org_id: "org_bench", environment: "live" as const, type: "order.created", data: { n: 1 }, source: "api" };
  const doc = eventDoc(input, Date.now());
  const base = nsPerEvent(() => eventDoc(input, Date.now()));
  const none = nsPerEvent(() => forwardToListeners(broker, doc));
  const others = Array.from({ length: 1000 }, (_, i) => ({ org_id: `org_${i}`, environment: "live" as const }));
  noteAnnouncement(broker, { node_id: "gw-1", tenants: others });
  const many = nsPerEvent(() => forwardToListeners(broker, doc));
  noteAnnouncement(broker, { node_id: "gw-1", tenants: [...others, { org_id: "org_bench", environment: "live" }] });
  const listened = nsPerEvent(() => forwardToListeners(broker, doc));
  await broker.stop();
  const row = (name: string, ns: number) => `${name.padEnd(9)} ${ns.toFixed(0).padStart(6)} ns/event  ${(ns / base).toFixed(3)}x eventDoc`;
  console.log(`${EVENTS} events\n${row("eventDoc", base)}\n${row("none", none)}\n${row("others", many)}\n${row("listened", listened)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
