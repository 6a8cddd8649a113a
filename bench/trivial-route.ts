/**
 * The reference the cluster figure of bench/core.ts is held against: a trivial moleculer-web alias
 * on one node that calls an action on another node over NATS (msgpackr, Moleculer's own NATS
 * transporter, default broker options) and answers the bare server's JSON. No key, no store, no
 * platform code besides the serializer. Two processes:
 *
 *   node dist/bench/trivial-route.js service <nats-url>
 *   node dist/bench/trivial-route.js gateway <nats-url> <port>       (GET /v1/api-keys/:id)
 */
import { ServiceBroker, type Context } from "moleculer";
import ApiGateway from "moleculer-web";
import { MsgpackrSerializer } from "../shared/runtime/serializer";
import { API_KEY_BODY } from "./lib";

const [role, natsUrl, port] = process.argv.slice(2);

async function main(): Promise<void> {
  const broker = new ServiceBroker({
    nodeID: `trivial-${role}`,
    namespace: "trivial",
    transporter: { type: "NATS", options: { url: natsUrl } },
    serializer: new MsgpackrSerializer(),
    logger: false,
  });
  if (role === "service") {
    broker.createService({
      name: "trivial",
      actions: { get: (ctx: Context<{ id: string }>) => ({ data: { ...API_KEY_BODY, id: ctx.params.id } }) },
    });
  } else {
    broker.createService({
      name: "api",
      mixins: [ApiGateway],
      settings: {
        port: Number(port),
        ip: "127.0.0.1",
        routes: [{ path: "/v1", aliases: { "GET api-keys/:id": "trivial.get" } }],
        logRequest: null,
        logResponse: null,
      },
    });
  }
  await broker.start();
  if (role === "gateway") await broker.waitForServices(["trivial"]);
  process.on("SIGTERM", () => void broker.stop().then(() => process.exit(0)));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
