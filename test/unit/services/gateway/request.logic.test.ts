import fc from "fast-check";
import { addressKey, inputOf, UNKNOWN_NAMED } from "../../../../services/gateway/request.logic";

const refusal = (f: () => unknown): { code?: string; message: string; param?: string } => {
  try {
    f();
  } catch (err) {
    const e = err as { type?: string; message: string; data?: { param?: string } };
    return { code: e.type, message: e.message, param: e.data?.param };
  }
  throw new Error("not refused");
};

describe("inputOf", () => {
  const known = new Set(["name", "scopes", "page"]);

  it("merges body, query and path when nothing clashes", () => {
    expect(inputOf("POST", { name: "a" }, {}, { id: "x" }, null)).toEqual({ name: "a", id: "x" });
    expect(inputOf("GET", undefined, { page: "2" }, { id: "x" }, known)).toEqual({ page: "2", id: "x" });
  });

  it("refuses query parameters on POST and PATCH, whatever the body holds", () => {
    for (const method of ["POST", "PATCH"]) {
      expect(refusal(() => inputOf(method, { scopes: ["a"] }, { scopes: "b" }, {}, known))).toMatchObject({
        code: "parameter_unknown",
        param: "scopes",
      });
      expect(refusal(() => inputOf(method, undefined, { name: "b" }, {}, null)).message).toMatch(/in the query: .* JSON body/);
    }
  });

  it("refuses a parameter sent in both the query and a body on other methods", () => {
    expect(refusal(() => inputOf("GET", { page: 1 }, { page: "2" }, {}, known))).toMatchObject({
      code: "parameter_invalid",
      param: "page",
    });
  });

  it("refuses a path parameter sent again", () => {
    expect(refusal(() => inputOf("PATCH", { id: "y" }, {}, { id: "x" }, null))).toMatchObject({ code: "parameter_unknown", param: "id" });
    expect(refusal(() => inputOf("GET", undefined, { id: "y" }, { id: "x" }, null))).toMatchObject({ param: "id" });
  });

  it("names the first unknown parameter and at most a few in the message, counting the rest", () => {
    const body = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, i]));
    const err = refusal(() => inputOf("POST", { name: "a", ...body }, {}, {}, known));
    expect(err).toMatchObject({ code: "parameter_unknown", param: "k0" });
    expect(err.message).toBe(`Received unknown parameters: k0, k1, k2 and ${1000 - UNKNOWN_NAMED} more`);
    expect(refusal(() => inputOf("GET", undefined, { x: "1" }, {}, known)).message).toBe("Received unknown parameter: x");
  });

  it("shows odd names as short JSON strings, and keeps the raw one as param", () => {
    const long = "é".repeat(300);
    for (const name of ["", "a b", "__proto__x\u0000", long]) {
      const err = refusal(() => inputOf("POST", Object.fromEntries([[name, 1]]), {}, {}, known));
      expect(err.param).toBe(name);
      expect(err.message.length).toBeLessThan(150);
    }
  });

  it("takes any parameter when the action's are not known", () => {
    expect(inputOf("POST", { anything: 1 }, {}, {}, null)).toEqual({ anything: 1 });
  });
});

describe("addressKey", () => {
  it("keeps IPv4 addresses and unwraps IPv4-mapped IPv6 ones", () => {
    expect(addressKey("203.0.113.7")).toBe("203.0.113.7");
    expect(addressKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(addressKey("unknown")).toBe("unknown");
  });

  it("keys IPv6 addresses on their /64, however they are written", () => {
    const key = "2001:db8:0:1::/64";
    for (const a of ["2001:db8:0:1::1", "2001:DB8:0:1:ffff:ffff:ffff:ffff", "2001:0db8:0000:0001:0:0:0:2", "2001:db8:0:1::1%eth0"]) {
      expect(addressKey(a)).toBe(key);
    }
    expect(addressKey("2001:db8:0:2::1")).not.toBe(key);
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
  });

  it("gives every address of a /64 the same key and none outside it", () => {
    const group = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
    fc.assert(
      fc.property(fc.array(group, { minLength: 8, maxLength: 8 }), fc.array(group, { minLength: 4, maxLength: 4 }), (a, tail) => {
        const b = [...a.slice(0, 4), ...tail];
        expect(addressKey(a.join(":"))).toBe(addressKey(b.join(":")));
        const other = [...a];
        other[3] = ((parseInt(a[3], 16) + 1) % 0x10000).toString(16);
        expect(addressKey(other.join(":"))).not.toBe(addressKey(a.join(":")));
      }),
    );
  });
});
