import { ServiceBroker } from "moleculer";
import { parsePatterns } from "../../../../services/gateway/listen.mixin";
import { ANNOUNCE_MS, isListened, noteAnnouncement, typeMatches } from "../../../../shared/records/listeners";

describe("listener event types", () => {
  it("match all, a prefix, or one type", () => {
    expect(typeMatches([], "a.b")).toBe(true);
    expect(typeMatches(["*"], "a.b")).toBe(true);
    expect(typeMatches(["order.*"], "order.created")).toBe(true);
    expect(typeMatches(["order.*"], "order.line.added")).toBe(true);
    expect(typeMatches(["order.*"], "orders.created")).toBe(false);
    expect(typeMatches(["order.created"], "order.created")).toBe(true);
    expect(typeMatches(["order.created", "invoice.*"], "order.paid")).toBe(false);
  });

  it("are parsed from --events, and refused when they are no types", () => {
    expect(parsePatterns(undefined)).toEqual([]);
    expect(parsePatterns(" order.* , a.b,a.b ")).toEqual(["order.*", "a.b"]);
    expect(parsePatterns("*")).toEqual(["*"]);
    for (const bad of ["Order.created", "order", "order.", "*.created", "a.b,c d", "order.**"]) {
      expect({
        bad,
        thrown: (() => {
          try {
            parsePatterns(bad);
            return null;
          } catch (err) {
            return (err as { data?: { param?: string } }).data?.param;
          }
        })(),
      }).toEqual({ bad, thrown: "events" });
    }
  });
});

describe("the announced tenants", () => {
  it("are what each gateway announced last, lapsing when a gateway stops renewing", () => {
    const broker = new ServiceBroker({ logger: false });
    const t0 = 1_000_000;
    expect(isListened(broker, "org_a", "live", t0)).toBe(false);
    noteAnnouncement(broker, { node_id: "g1", tenants: [{ org_id: "org_a", environment: "live" }] }, t0);
    noteAnnouncement(
      broker,
      {
        node_id: "g2",
        tenants: [
          { org_id: "org_a", environment: "live" },
          { org_id: "org_b", environment: "test" },
        ],
      },
      t0,
    );
    expect(isListened(broker, "org_a", "live", t0)).toBe(true);
    expect(isListened(broker, "org_a", "test", t0)).toBe(false);
    noteAnnouncement(broker, { node_id: "g2", tenants: [] }, t0 + 1);
    expect(isListened(broker, "org_b", "test", t0 + 1)).toBe(false);
    expect(isListened(broker, "org_a", "live", t0 + 1)).toBe(true);
    // g1 dies without a word: its announcement lapses after three periods.
    expect(isListened(broker, "org_a", "live", t0 + 3 * ANNOUNCE_MS)).toBe(true);
    expect(isListened(broker, "org_a", "live", t0 + 3 * ANNOUNCE_MS + 1)).toBe(false);
  });
});
