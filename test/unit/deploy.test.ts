import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { loadSettings, SERVICE_NAMES, SETTING_NAMES } from "../../shared/config";

/**
 * No Docker engine runs here: docker-compose.yml and the Dockerfile are checked against the code's
 * own lists of services and settings, so that neither can drift from what the code runs and reads.
 */
const root = join(__dirname, "../..");
const compose = parse(readFileSync(join(root, "docker-compose.yml"), "utf8"), { merge: true }) as {
  services: Record<
    string,
    {
      image?: string;
      build?: unknown;
      command?: string[];
      environment?: Record<string, string>;
      depends_on?: Record<string, { condition: string }>;
      ports?: string[];
      healthcheck?: { test: string[] };
    }
  >;
  volumes: Record<string, unknown>;
};
const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");

describe("docker-compose.yml", () => {
  const platform = Object.entries(compose.services).filter(([name]) => name !== "nats" && name !== "mongo");

  it("closes the bus: NATS takes only clients with the password, which has no default, and is not published", () => {
    const required = /^\$\{NATS_PASSWORD:\?[^}]+\}$/;
    const command = compose.services.nats.command ?? [];
    expect(command[command.indexOf("--user") + 1]).toBe("${NATS_USER:-wfp}");
    expect(command[command.indexOf("--pass") + 1]).toMatch(required);
    expect(command).not.toContain("--no_auth_user");
    expect(compose.services.nats.ports).toBeUndefined();
    expect(compose.services.mongo.ports).toBeUndefined();
    for (const [name, svc] of platform) {
      expect({ name, user: svc.environment?.NATS_USER }).toEqual({ name, user: "${NATS_USER:-wfp}" });
      expect({ name, password: svc.environment?.NATS_PASSWORD }).toEqual({ name, password: expect.stringMatching(required) });
    }
  });

  it("runs NATS with JetStream and MongoDB as a single-node replica set", () => {
    expect(compose.services.nats.image).toMatch(/^nats:2/);
    expect(compose.services.nats.command).toContain("--jetstream");
    expect(compose.services.mongo.image).toMatch(/^mongo:/);
    expect(compose.services.mongo.command).toEqual(expect.arrayContaining(["--replSet", "rs0"]));
    expect(compose.services.mongo.healthcheck?.test.join(" ")).toContain("rs.initiate");
    // Healthy only with a primary: the election follows rs.initiate by seconds, and writes wait for it.
    expect(compose.services.mongo.healthcheck?.test.join(" ")).toMatch(/if \(!db\.hello\(\)\.isWritablePrimary\) quit\(1\)/);
  });

  it("has one container per service of the code, all from the one image, each running only that service", () => {
    expect(platform.map(([name]) => name).sort()).toEqual([...SERVICE_NAMES].sort());
    for (const [name, svc] of platform) {
      expect({ name, image: svc.image, build: svc.build }).toEqual({ name, image: "wfp:latest", build: "." });
      expect(svc.environment?.SERVICES).toBe(name);
    }
  });

  it("gives every container settings the code accepts, for a cluster on NATS and MongoDB", () => {
    for (const [name, svc] of platform) {
      const env = svc.environment ?? {};
      for (const key of Object.keys(env))
        expect({ name, key, known: (SETTING_NAMES as readonly string[]).includes(key) }).toEqual({ name, key, known: true });
      const settings = loadSettings(env);
      expect(settings.transporter).toBe("nats://nats:4222");
      expect(settings.mongoUrl).toMatch(/^mongodb:\/\/mongo:27017\/.*replicaSet=rs0/);
      expect(settings.services).toEqual([name]);
      expect(Object.keys(svc.depends_on ?? {}).sort()).toEqual(["mongo", "nats"]);
      expect(svc.depends_on?.mongo.condition).toBe("service_healthy");
    }
  });

  it("lets the gateway scale (a range of host ports) and checks it through /ready", () => {
    const gateway = compose.services.gateway;
    expect(gateway.ports).toEqual(["3000-3009:3000"]);
    expect(gateway.healthcheck?.test.join(" ")).toContain("/ready");
    for (const name of ["webhook-dispatcher", "workflows"]) expect(compose.services[name].ports).toBeUndefined();
    expect(Object.keys(compose.volumes).sort()).toEqual(["mongo-data", "nats-data"]);
  });
});

describe("Dockerfile", () => {
  it("builds in stages on Node 24 and runs production dependencies only, as a non-root user", () => {
    const froms = dockerfile.match(/^FROM .*/gm) ?? [];
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const from of froms) expect(from).toMatch(/^FROM node:24/);
    expect(dockerfile).toMatch(/npm install --omit=dev/);
    const final = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
    expect(final).toMatch(/^USER node$/m);
    expect(final).toMatch(/COPY --from=deps \/app\/node_modules node_modules/);
    expect(final).toMatch(/CMD \["node", "dist\/bin\/server.js"\]/);
  });

  it("builds the dashboard into dist/dashboard, which the final image copies with dist", () => {
    const stages = dockerfile.split(/^(?=FROM )/m);
    const build = stages.find((stage) => / AS build$/m.test(stage)) ?? "";
    expect(build).toMatch(/^COPY dashboard dashboard$/m);
    expect(build).toMatch(/vite build dashboard/);
    expect(dockerfile).toMatch(/^COPY --from=build \/app\/dist dist$/m);
  });
});
