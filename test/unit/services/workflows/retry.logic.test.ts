import { checkRetry, kindOf, nextRetry, policyOf, retryAfterMs, retryDelay } from "../../../../services/workflows/retry.logic";

const NOW = Date.parse("2024-01-01T00:00:00Z");

describe("retry policies", () => {
  it("retries: N is a policy of N + 1 attempts with the platform's back-off, and no 4xx but 408 and 429", () => {
    const p = policyOf({ retries: 3 }, 100);
    expect(nextRetry(p, 1, { status_code: 503 }, NOW)).toBe(retryDelay(100, 1));
    expect(nextRetry(p, 2, { timed_out: true }, NOW)).toBe(retryDelay(100, 2));
    expect(nextRetry(p, 3, {}, NOW)).toBe(retryDelay(100, 3));
    expect(nextRetry(p, 4, { status_code: 503 }, NOW)).toBeNull();
    expect(nextRetry(p, 1, { status_code: 400 }, NOW)).toBeNull();
    expect(nextRetry(p, 1, { status_code: 404 }, NOW)).toBeNull();
    expect(nextRetry(p, 1, { status_code: 408 }, NOW)).toBe(100);
    expect(nextRetry(p, 1, { status_code: 429 }, NOW)).toBe(100);
  });

  it("a policy: exponential back-off up to its longest wait, full jitter, the kinds it names", () => {
    const p = {
      max_attempts: 5,
      initial_interval_ms: 1000,
      backoff_rate: 3,
      max_interval_ms: 5000,
      jitter: "none" as const,
      on: ["5xx" as const],
    };
    expect([1, 2, 3, 4].map((n) => nextRetry(p, n, { status_code: 500 }, NOW))).toEqual([1000, 3000, 5000, 5000]);
    expect(nextRetry(p, 1, { timed_out: true }, NOW)).toBeNull();
    expect(nextRetry({ ...p, jitter: "full" }, 2, { status_code: 500 }, NOW, () => 0.5)).toBe(1500);
    expect(nextRetry({ ...p, on: ["4xx"] }, 1, { status_code: 400 }, NOW)).toBe(1000);
    expect(nextRetry({ ...p, on: ["4xx"] }, 1, { status_code: 429 }, NOW)).toBe(1000);
  });

  it("honours Retry-After (seconds or a date) up to the longest wait", () => {
    const p = {
      max_attempts: 5,
      initial_interval_ms: 100,
      backoff_rate: 2,
      max_interval_ms: 10_000,
      jitter: "none" as const,
      on: ["429" as const],
    };
    expect(nextRetry(p, 1, { status_code: 429, retry_after: "3" }, NOW)).toBe(3000);
    expect(nextRetry(p, 1, { status_code: 429, retry_after: "3600" }, NOW)).toBe(10_000);
    expect(nextRetry(p, 1, { status_code: 429, retry_after: new Date(NOW + 2000).toUTCString() }, NOW)).toBe(2000);
    expect(retryAfterMs("soon", NOW)).toBeNull();
  });

  it("classifies failures", () => {
    expect([{}, { timed_out: true }, { status_code: 500 }, { status_code: 302 }, { status_code: 418 }].map(kindOf)).toEqual([
      "network",
      "timeout",
      "5xx",
      "5xx",
      "4xx",
    ]);
  });

  it("checks a written policy, naming the field", () => {
    const fail = (field: string, message: string) => new Error(`${field}: ${message}`);
    expect(checkRetry({ max_attempts: 4 }, fail)).toEqual({
      max_attempts: 4,
      initial_interval_ms: 1000,
      backoff_rate: 2,
      max_interval_ms: 60_000,
      jitter: "full",
      on: ["timeout", "network", "5xx", "429", "408"],
    });
    expect(() => checkRetry({ max_attempts: 21 }, fail)).toThrow(/^retry.max_attempts: /);
    expect(() => checkRetry({ backoff_rate: 11 }, fail)).toThrow(/^retry.backoff_rate: /);
    expect(() => checkRetry({ on: ["5xx", "3xx"] }, fail)).toThrow(/^retry.on: /);
    expect(() => checkRetry({ jitter: "some" }, fail)).toThrow(/^retry.jitter: /);
    expect(() => checkRetry({ tries: 1 }, fail)).toThrow(/^retry.tries: /);
    expect(() => checkRetry({ "a.b": 1 }, fail)).toThrow(/^retry\["a\.b"\]: /);
  });
});

it("http retries back off exponentially up to a minute", () => {
  expect([1, 2, 3, 4].map((n) => retryDelay(1000, n))).toEqual([1000, 2000, 4000, 8000]);
  expect(retryDelay(1000, 20)).toBe(60_000);
});
