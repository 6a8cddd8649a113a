import { Validators, type BrokerOptions } from "moleculer";
import type { Settings } from "./shared/config";
import { jsonLines } from "./shared/runtime/log-format";
import { MsgpackrSerializer } from "./shared/runtime/serializer";
import { PromptDiscoverer } from "./shared/runtime/discoverer";
import { BatchingNatsTransporter, natsOptions } from "./shared/runtime/transporter";

/**
 * Moleculer's built-in metrics that describe the machine rather than the platform (the OS user,
 * home directory, host name, network addresses and MAC, the process's arguments): never exported.
 */
export const PRIVATE_METRICS = ["process.arguments", "os.user.*", "os.network.*", "os.hostname"];

/**
 * Whether a failed call counts against the node that answered it, for the circuit breaker: a 5xx
 * or a time-out does, but not `storage_unavailable` or `service_unavailable`. Those say the shared
 * store (or another service) failed, not this node; every node fails alike, each call already
 * answered 503 with Retry-After at once, and a breaker tripped by them would keep refusing calls
 * for `halfOpenTime` after the store came back, while /ready (which probes the store) said ready.
 */
export const countsAgainstNode = (err: unknown): boolean => {
  const e = err as { code?: unknown; type?: unknown } | null;
  return typeof e?.code === "number" && e.code >= 500 && e.type !== "storage_unavailable" && e.type !== "service_unavailable";
};

type Rule = Record<string, unknown>;

/** A copy of a rule in which every rule that does not say `nullable: true` refuses null (see NullRefusingValidator). */
function refusingNull(rule: unknown): unknown {
  if (Array.isArray(rule)) return rule.map(refusingNull);
  if (rule === null || typeof rule !== "object" || rule instanceof RegExp) return rule;
  const r = rule as Rule;
  return {
    ...r,
    ...(r.nullable !== true && { nullable: false }),
    ...(r.props !== undefined && { props: propsRefusingNull(r.props as Rule) }),
    ...(r.items !== undefined && { items: refusingNull(r.items) }),
    ...(Array.isArray(r.rules) && { rules: r.rules.map(refusingNull) }),
  };
}
function propsRefusingNull(schema: Rule): Rule {
  return Object.fromEntries(Object.entries(schema).map(([name, rule]) => [name, name.startsWith("$$") ? rule : refusingNull(rule)]));
}

/**
 * fastest-validator treats `null` as "absent" on any optional field, so `{"description": null}` on
 * a create read as no description and `{"events": null}` on a PATCH as "keep them". Here null is a
 * value like any other: refused (a `required` error carrying `actual: null`, which the gateway
 * words as "cannot be null") unless the rule says `nullable: true`.
 */
export class NullRefusingValidator extends Validators.Fastest {
  /** The same rules with every message left empty, built when first needed (see `compile`). */
  private quiet?: Validators.Fastest;

  constructor() {
    super({ considerNullAsAValue: true } as ConstructorParameters<typeof Validators.Fastest>[0]);
  }

  /**
   * fastest-validator writes the value received into each message as text, which throws a
   * TypeError for an array holding an object whose own `toString` is not a function
   * (`{"name": [{"toString": 1}]}`): a 500 for a bad value. Such a check runs again without
   * messages (the gateway words its own from the rule, the field and the value), so the answer
   * is the 400 naming the field.
   */
  override compile(schema: Record<string, unknown>) {
    const check = super.compile(propsRefusingNull(schema));
    let quietCheck: typeof check | undefined;
    const guarded = (...args: Parameters<typeof check>) => {
      try {
        return check(...args);
      } catch (err) {
        if (!(err instanceof TypeError)) throw err;
        quietCheck ??= this.quietValidator().compile(propsRefusingNull(schema));
        return quietCheck(...args);
      }
    };
    return Object.assign(guarded, { async: check.async }) as typeof check;
  }

  private quietValidator(): Validators.Fastest {
    const messages = (this as unknown as { validator: { messages: Record<string, string> } }).validator.messages;
    this.quiet ??= new Validators.Fastest({
      ...(this as unknown as { opts: Record<string, unknown> }).opts,
      messages: Object.fromEntries(Object.keys(messages).map((kind) => [kind, ""])),
    } as ConstructorParameters<typeof Validators.Fastest>[0]);
    return this.quiet;
  }
}

/**
 * Broker options, set deliberately: Moleculer's defaults are no request timeout, no retries and no
 * circuit breaker. Calls are not retried by the broker (most actions are not idempotent; clients
 * retry with Idempotency-Key); a node that keeps failing is skipped by the breaker.
 */
export function brokerOptions(settings: Settings, overrides: Partial<BrokerOptions> = {}): BrokerOptions {
  const clustered = settings.transporter !== undefined;
  return {
    namespace: "wfp",
    nodeID: settings.nodeId,
    transporter: settings.transporter ? new BatchingNatsTransporter(natsOptions(settings.transporter, settings.nats)) : undefined,
    serializer: new MsgpackrSerializer(),
    validator: new NullRefusingValidator(),
    logger: settings.logLevel === false ? false : { type: "Console", options: { formatter: jsonLines, level: settings.logLevel } },
    // Time-outs and the breaker guard remote calls; in one process a call cannot be lost in transit,
    // and each call's timers would cost CPU on the gateway's hot path for nothing.
    requestTimeout: clustered ? settings.requestTimeoutMs : 0,
    // Retries only where a caller asks for them (`retries` in the call's options): the gateway does
    // for reads, which are safe to repeat, so a read sent to a node that just died is answered by
    // another once the broker drops the dead node.
    retryPolicy: {
      enabled: clustered,
      retries: 0,
      delay: 100,
      maxDelay: 1000,
      factor: 2,
      check: (err: Error) => Boolean((err as { retryable?: boolean }).retryable),
    },
    circuitBreaker: {
      enabled: clustered,
      threshold: 0.5,
      minRequestCount: 20,
      windowTime: 60,
      halfOpenTime: 10_000,
      check: countsAgainstNode,
    },
    registry: { strategy: "RoundRobin", preferLocal: true, discoverer: new PromptDiscoverer() },
    // A node killed without a goodbye is dropped (and calls pending on it rejected) 6 s after its
    // last heartbeat, ≤ 9 s after it died (PromptDiscoverer; Moleculer's own check took 7–11 s).
    heartbeatInterval: 2,
    heartbeatTimeout: 6,
    // bin/server.ts owns SIGTERM/SIGINT; Moleculer's own handlers would stop the broker a second time.
    skipProcessEventRegistration: true,
    // Finish requests in flight before a node stops (graceful shutdown).
    tracking: { enabled: true, shutdownTimeout: 10_000 },
    // Prometheus metrics (Moleculer's request counts and latencies per action, event loop, memory)
    // on their own port, when METRICS_PORT is set: they cost a little on every call.
    metrics:
      settings.metricsPort === undefined
        ? false
        : {
            enabled: true,
            // Where the API listens (HOST) unless METRICS_HOST says otherwise; nothing about the machine or its
            // user: Moleculer's default labels name the node by host name and process id unless NODE_ID is set,
            // so a node is labelled only by the NODE_ID it was given (the scraper's `instance` tells the others apart).
            reporter: {
              type: "Prometheus",
              options: {
                host: settings.metricsHost,
                port: settings.metricsPort,
                path: "/metrics",
                excludes: PRIVATE_METRICS,
                defaultLabels: () => ({ namespace: "wfp", ...(settings.nodeId && { nodeID: settings.nodeId }) }),
              },
            },
          },
    tracing: false,
    ...overrides,
  };
}
