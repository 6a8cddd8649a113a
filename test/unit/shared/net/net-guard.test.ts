import { createServer, type Server } from "node:http";
import { Agent, request } from "undici";
import { checkTargetUrl, guardedLookup, isPrivateAddress } from "../../../../shared/net/net-guard";

describe("isPrivateAddress", () => {
  it.each([
    "127.0.0.1",
    "127.255.0.3",
    "10.0.0.1",
    "172.16.5.5",
    "172.31.255.255",
    "192.168.0.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "198.18.0.1",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "64:ff9b::10.0.0.1",
    "not-an-ip",
  ])("refuses %s", (ip) => expect(isPrivateAddress(ip)).toBe(true));

  it.each(["93.184.215.14", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"])("allows %s", (ip) =>
    expect(isPrivateAddress(ip)).toBe(false),
  );
});

describe("checkTargetUrl", () => {
  const live = { allowPrivate: false, environment: "live" as const };
  const publicDns = async () => ["93.184.215.14"];
  const privateDns = async () => ["93.184.215.14", "10.0.0.7"];

  it("takes https to names that resolve to public addresses only", async () => {
    expect((await checkTargetUrl("https://hooks.example.com/x", live, publicDns)).href).toBe("https://hooks.example.com/x");
    await expect(checkTargetUrl("https://hooks.example.com/x", live, privateDns)).rejects.toMatchObject({ type: "url_not_allowed" });
    await expect(checkTargetUrl("https://hooks.example.com/x", live, async () => [])).rejects.toMatchObject({ type: "url_not_allowed" });
  });

  it("takes http only in the test environment, or when private targets are allowed", async () => {
    await expect(checkTargetUrl("http://hooks.example.com/x", live, publicDns)).rejects.toMatchObject({ type: "url_not_allowed" });
    await expect(checkTargetUrl("http://hooks.example.com/x", { ...live, environment: "test" }, publicDns)).resolves.toBeInstanceOf(URL);
    await expect(checkTargetUrl("http://127.0.0.1:9/x", { allowPrivate: true, environment: "live" })).resolves.toBeInstanceOf(URL);
  });

  it("names the setting that allows a local receiver, and says it is for local use", async () => {
    for (const [url, environment] of [
      ["http://localhost:4242/hooks", "test"],
      ["https://127.0.0.1:4242/hooks", "live"],
      ["http://hooks.example.com/x", "live"],
    ] as const) {
      const err = await checkTargetUrl(url, { allowPrivate: false, environment }, async () => ["127.0.0.1"]).catch((e: unknown) => e);
      expect(err).toMatchObject({ type: "url_not_allowed" });
      expect((err as Error).message).toMatch(/for local use only, start the server with WEBHOOK_ALLOW_PRIVATE_TARGETS=true/);
    }
  });

  it("refuses what is not an http(s) URL, or is too long, or carries credentials", async () => {
    await expect(checkTargetUrl("nope", live)).rejects.toMatchObject({ type: "parameter_invalid", data: { param: "url" } });
    await expect(checkTargetUrl(`https://a.example/${"x".repeat(2048)}`, live)).rejects.toMatchObject({ type: "parameter_invalid" });
    await expect(checkTargetUrl("ftp://a.example/x", live)).rejects.toMatchObject({ type: "url_not_allowed" });
    await expect(checkTargetUrl("https://u:p@a.example/x", live, publicDns)).rejects.toMatchObject({ type: "parameter_invalid" });
  });
});

describe("guardedLookup, at connect time", () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end("ok"));
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

  it("refuses a name that resolves to loopback unless private targets are allowed", async () => {
    const strict = new Agent({ connect: { lookup: guardedLookup(false) } });
    const err = await request(`http://localhost:${port}/`, { dispatcher: strict }).catch((e: unknown) => e);
    expect(String((err as { code?: string; cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code)).toBe(
      "ERR_URL_NOT_ALLOWED",
    );
    await strict.close();

    const open = new Agent({ connect: { lookup: guardedLookup(true) } });
    const res = await request(`http://localhost:${port}/`, { dispatcher: open });
    expect(await res.body.text()).toBe("ok");
    await open.close();
  });
});

describe("isPrivateAddress, IPv6 forms that carry or reach an inner address", () => {
  it.each([
    ["::127.0.0.1", "IPv4-compatible (deprecated ::/96)"],
    ["::7f00:1", "IPv4-compatible, in hex"],
    ["::8.8.8.8", "IPv4-compatible of a public address: the whole deprecated range"],
    ["::ffff:0:7f00:1", "SIIT translated ::ffff:0:a.b.c.d"],
    ["::ffff:0:10.1.2.3", "SIIT translated, dotted"],
    ["0:0:0:0:0:ffff:7f00:1", "mapped, written out in full"],
    ["64:ff9b:1::1", "local-use NAT64 64:ff9b:1::/48"],
    ["64:ff9b:1:ffff::8.8.8.8", "local-use NAT64 of a public address"],
    ["2002:7f00:1::1", "6to4 of 127.0.0.1"],
    ["2002:a00:1::", "6to4 of 10.0.0.1"],
    ["2002:c0a8:101::5", "6to4 of 192.168.1.1"],
    ["fec0::1", "site-local fec0::/10"],
    ["feff::1", "the end of fec0::/10"],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"],
    ["100::1", "discard-only"],
    ["FE80::1%eth0", "link-local with a zone, upper case"],
  ])("refuses %s (%s)", (ip) => expect(isPrivateAddress(ip)).toBe(true));

  it.each(["2002:808:808::1", "64:ff9b::8.8.8.8", "2a00:1450:4001::200e", "::ffff:0:808:808"])("allows %s", (ip) =>
    expect(isPrivateAddress(ip)).toBe(false),
  );

  it("refuses these forms as URL hosts, saying only that the host resolves to a private address", async () => {
    const live = { allowPrivate: false, environment: "live" as const };
    for (const host of ["[::127.0.0.1]", "[::ffff:0:7f00:1]", "[64:ff9b:1::a00:1]", "[2002:a00:1::1]", "[fec0::1]"]) {
      const err = await checkTargetUrl(`https://${host}/hook`, live).catch((e: unknown) => e);
      expect(err).toMatchObject({
        type: "url_not_allowed",
        message:
          "the host resolves to a private address; for local use only, start the server with WEBHOOK_ALLOW_PRIVATE_TARGETS=true to allow it",
      });
    }
    const viaDns = await checkTargetUrl("https://hooks.example.com/x", live, async () => ["93.184.215.14", "10.0.0.7"]).catch(
      (e: unknown) => e,
    );
    expect((viaDns as Error).message).toBe(
      "the host resolves to a private address; for local use only, start the server with WEBHOOK_ALLOW_PRIVATE_TARGETS=true to allow it",
    );
    expect((viaDns as Error).message).not.toContain("10.0.0.7");
  });
});
