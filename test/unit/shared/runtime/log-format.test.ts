import { jsonLines } from "../../../../shared/runtime/log-format";

describe("log lines", () => {
  it("are one JSON object each: fields of plain objects become fields, words the message", () => {
    const [line] = jsonLines("debug", [{ request_id: "req_1", status: 201 }, "request"], { nodeID: "n1", mod: "gateway" });
    expect(JSON.parse(line)).toEqual({
      ts: expect.any(Number),
      level: "debug",
      msg: "request",
      nodeID: "n1",
      mod: "gateway",
      request_id: "req_1",
      status: 201,
    });
  });

  it("render errors with their name, message, code and stack", () => {
    const err = Object.assign(new Error("boom"), { code: "E_BOOM" });
    const parsed = JSON.parse(jsonLines("error", [{ request_id: "req_2", err }, "Request failed"])[0]);
    expect(parsed).toMatchObject({ msg: "Request failed", request_id: "req_2", err: { name: "Error", message: "boom", code: "E_BOOM" } });
    expect(parsed.err.stack).toContain("boom");
    expect(JSON.parse(jsonLines("warn", ["lost", new TypeError("x")])[0])).toMatchObject({ msg: "lost", err: { name: "TypeError" } });
  });

  it("keep a logged object's __proto__ key as a field", () => {
    const parsed = JSON.parse(jsonLines("info", [JSON.parse('{"__proto__":{"polluted":true},"constructor":1}'), "odd"])[0]);
    expect(Object.keys(parsed)).toEqual(expect.arrayContaining(["__proto__", "constructor"]));
    expect(Object.getOwnPropertyDescriptor(parsed, "__proto__")?.value).toEqual({ polluted: true });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("survive a value JSON cannot hold", () => {
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    const parsed = JSON.parse(jsonLines("info", [{ loop }, "circular"])[0]);
    expect(parsed.msg).toContain("circular");
  });
});
