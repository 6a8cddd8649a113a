import { isErrorCode } from "../../shared/errors";
import { SERVICE_NAMES } from "../../shared/config";
import type { GatewayPart } from "./gateway.types";

const READY_STORE_TIMEOUT_MS = 1_000;

/** `GET /ready`, and the count of live gateway nodes that the cluster-wide budgets are split between. */
export const ReadinessMixin: GatewayPart = {
  methods: {
    countGateways() {
      const nodes = new Set(
        this.broker.registry
          .getServiceList({ onlyAvailable: true, skipInternal: true })
          .filter((svc) => svc.name === "gateway")
          .map((svc) => svc.nodeID),
      );
      this.gatewayNodes = Math.max(1, nodes.size);
    },

    async readiness() {
      const available = new Set(
        this.broker.registry.getServiceList({ onlyAvailable: true, skipInternal: true }).map((svc: { name: string }) => svc.name),
      );
      const services = Object.fromEntries(SERVICE_NAMES.map((name) => [name, available.has(name)]));
      const started = Date.now();
      const store = await this.probeStore();
      const broker = (this.broker.transit ? this.broker.transit.connected : true) && this.bus.reachable();
      // What every request needs decides readiness (a load balancer then stops sending here); a
      // missing service only fails its own routes (503), so it is reported, not fatal.
      const ready = broker && store === "ok" && services.auth;
      const missing = SERVICE_NAMES.filter((name) => !services[name]);
      return {
        status: ready ? 200 : 503,
        body: {
          status: ready ? (missing.length > 0 ? "degraded" : "ready") : "not_ready",
          broker,
          store,
          store_ms: Date.now() - started,
          services,
          missing,
        },
      };
    },

    async probeStore() {
      // A real write through the store every service uses: a store that still reads but cannot
      // write (a full disk) must not be reported ready.
      let timer: NodeJS.Timeout | undefined;
      const verdict = await Promise.race([
        this.store.probe().then(
          () => "ok",
          (err: unknown) => {
            this.storeProbe.failed("store probe", err, "GET /ready answers 503");
            const e = err as { type?: unknown; data?: { reason?: unknown } } | null;
            const reason =
              typeof e?.data?.reason === "string"
                ? e.data.reason
                : isErrorCode(e?.type)
                  ? e.type
                  : "an unexpected error (see the gateway's log)";
            return `unavailable: ${reason}`;
          },
        ),
        new Promise<string>((ok) => {
          timer = setTimeout(() => ok(`unavailable: no answer within ${READY_STORE_TIMEOUT_MS} ms`), READY_STORE_TIMEOUT_MS);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
      if (verdict === "ok") this.storeProbe.ok("store probe");
      return verdict;
    },
  },
};
