import fc from "fast-check";
import { printable, printableBlock, printableJson, safe } from "../../../../bin/cli/printable.logic";
import { output, table } from "../../../../bin/cli/output";
import { waitAfter } from "../../../../bin/cli/poll";
import { ApiCallError } from "../../../../bin/cli/http";
import { Writable } from "node:stream";

/** Every character a terminal acts on: C0, DEL, C1, line/paragraph separators, bidi controls. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;
const controls = [
  ...Array.from({ length: 0x20 }, (_, i) => i),
  ...Array.from({ length: 0x21 }, (_, i) => 0x7f + i),
  0x61c,
  0x200e,
  0x200f,
  0x2028,
  0x2029,
  0x202a,
  0x202b,
  0x202c,
  0x202d,
  0x202e,
  0x2066,
  0x2067,
  0x2068,
  0x2069,
].map((c) => String.fromCodePoint(c));
/** Strings rich in control characters, among ordinary and astral ones. */
const hostile = fc
  .array(fc.oneof(fc.constantFrom(...controls), fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" })), { maxLength: 8 })
  .map((parts) => parts.join(""));

const sink = () => {
  let text = "";
  const stream = new Writable({ write: (chunk, _enc, done) => ((text += String(chunk)), done()) });
  return { stream, text: () => text };
};

describe("text for the operator's terminal", () => {
  it("a value shows no control character, newlines included, and changes nothing else", () => {
    fc.assert(
      fc.property(hostile, (s) => {
        const shown = printable(s);
        expect(CONTROL.test(shown)).toBe(false);
        if (!CONTROL.test(s)) expect(shown).toBe(s);
      }),
    );
  });

  it("shows what was there: ESC as \\x1B, OSC 52 and a bidi override spelled out", () => {
    const osc52 = "\u001b]52;c;ZXZpbA==\u0007";
    expect(printable(`Acme${osc52}\u001b[2K\r\u202eevil`)).toBe("Acme\\x1B]52;c;ZXZpbA==\\x07\\x1B[2K\\x0D\\u202Eevil");
    expect(printable("a\nb\u0085c\u2028")).toBe("a\\x0Ab\\x85c\\u2028");
  });

  it("the CLI's own lines keep their newlines; what is interpolated with safe`` does not", () => {
    expect(printableBlock("one\ttwo\nthree\u001b[1A")).toBe("one\ttwo\nthree\\x1B[1A");
    expect(safe`name: ${"x\nforged row"}\nnext`).toBe("name: x\\x0Aforged row\nnext");
  });

  it("--json parses back to the exact value and holds no raw control character", () => {
    fc.assert(
      fc.property(fc.dictionary(hostile, fc.oneof(hostile, fc.integer())), (value) => {
        const text = printableJson(value);
        expect(CONTROL.test(text)).toBe(false);
        expect(JSON.parse(text)).toEqual(value);
      }),
    );
  });

  it("tables escape each cell, so a name cannot add or erase a row", () => {
    const rows = [{ id: "org_1", name: "Evil\n\u001b[1Aorg_2  Forged" }];
    const text = table(rows, ["id", "name"]);
    expect(text.split("\n")).toHaveLength(2);
    expect(CONTROL.test(text.replace(/\n/g, ""))).toBe(false);
  });

  it("notes go to stderr without a prefix; warnings say warning:", () => {
    const out = sink();
    const err = sink();
    const o = output(false, out.stream, err.stream);
    o.info("following\u001b[2J");
    o.warn("no server");
    o.line({ name: "\u009b31m" });
    expect(err.text()).toBe("following\\x1B[2J\nwarning: no server\n");
    expect(out.text()).toBe('{\n  "name": "\\u009B31m"\n}\n');
  });
});

describe("waiting after a failed poll", () => {
  it("waits as long as a 429's Retry-After says, backs off on an unreachable API, and gives up on other refusals", () => {
    expect(waitAfter(new ApiCallError(429, "rate_limited", "", 3), 1)).toBe(3000);
    expect(waitAfter(new ApiCallError(429, "rate_limited", ""), 1)).toBe(1000);
    expect([1, 2, 3, 9].map((n) => waitAfter(new ApiCallError(0, "unreachable", ""), n))).toEqual([1000, 2000, 4000, 30_000]);
    expect(waitAfter(new ApiCallError(503, "unavailable", "", 5), 1)).toBe(5000);
    expect(waitAfter(new ApiCallError(403, "forbidden", ""), 1)).toBeUndefined();
    expect(waitAfter(new Error("bug"), 1)).toBeUndefined();
  });
});
