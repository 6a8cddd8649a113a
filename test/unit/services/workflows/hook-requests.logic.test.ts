import fc from "fast-check";
import {
  HOOK_REQUESTS_KEPT,
  hookRequestView,
  holdRequest,
  REFUSALS_KEPT_PER_FLUSH,
  REFUSALS_KEPT_PER_NODE,
  statusOf,
  type HookRequestDoc,
  type PendingRequests,
} from "../../../../services/workflows/hook-requests.logic";
import { HOOK_REQUEST_OUTCOMES, type HookRequestOutcome } from "../../../../shared/api/wire";

const doc = (outcome: HookRequestOutcome, extra: Partial<HookRequestDoc> = {}): HookRequestDoc => ({
  id: "hkr_01jdx3kq9v7c2m5n8p4r6t0w1y",
  org_id: "org_1",
  environment: "live",
  workflow_id: "wf_1",
  hook_id: "hk_1",
  outcome,
  status: statusOf(outcome),
  received_at: "2026-11-27T04:00:00.000Z",
  ...extra,
});

/** Offers `outcomes` in order to one hook's pending requests, as countHook does; answers what was held. */
function offer(outcomes: HookRequestOutcome[], nodeRefusals = 0): PendingRequests {
  const pending: PendingRequests = { records: [], refusals: 0 };
  outcomes.forEach((outcome, i) => {
    if (holdRequest(pending, nodeRefusals, outcome, () => doc(outcome, { request_id: String(i) })) && outcome === "refused")
      nodeRefusals += 1;
  });
  return pending;
}

describe("holdRequest", () => {
  it("holds the newest requests up to the workflow's bound, refusals only the first within their caps", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...HOOK_REQUEST_OUTCOMES), { maxLength: 400 }), fc.nat(300), (outcomes, node) => {
        const held = offer(outcomes, node).records;
        const room = Math.max(0, Math.min(REFUSALS_KEPT_PER_FLUSH, REFUSALS_KEPT_PER_NODE - node));
        // Which requests a refusal cap lets through (the first `room` refusals), then the newest of those.
        let refusals = 0;
        const admitted = outcomes.flatMap((o, i) => (o !== "refused" || refusals++ < room ? [String(i)] : []));
        expect(held.map((r) => r.request_id)).toEqual(admitted.slice(-HOOK_REQUESTS_KEPT));
        expect(held.filter((r) => r.outcome === "refused").length).toBeLessThanOrEqual(room);
      }),
    );
  });

  it("holds the first refusals of a flood, and the requests accepted during it", () => {
    const flood: HookRequestOutcome[] = [...Array(1000).fill("refused"), "accepted", ...Array(1000).fill("refused"), "duplicate"];
    expect(offer(flood).records.map((r) => r.outcome)).toEqual([
      ...Array(REFUSALS_KEPT_PER_FLUSH).fill("refused"),
      "accepted",
      "duplicate",
    ]);
  });

  it("holds the newest when more come than a workflow keeps", () => {
    const held = offer(Array(HOOK_REQUESTS_KEPT + 5).fill("accepted")).records;
    expect(held.map((r) => r.request_id)).toEqual(Array.from({ length: HOOK_REQUESTS_KEPT }, (_, i) => String(i + 5)));
  });

  it("holds no refusal once the node holds its cap of them, whichever hook they came to", () => {
    expect(offer(["refused", "accepted"], REFUSALS_KEPT_PER_NODE).records.map((r) => r.outcome)).toEqual(["accepted"]);
  });
});

describe("hookRequestView", () => {
  it("answers each outcome with its status and nulls for what it does not hold", () => {
    expect(HOOK_REQUEST_OUTCOMES.map(statusOf)).toEqual([202, 200, 200, 401]);
    expect(hookRequestView(doc("refused", { reason: "bad_signature", request_id: "req_1" }))).toEqual({
      object: "hook_request",
      id: "hkr_01jdx3kq9v7c2m5n8p4r6t0w1y",
      workflow_id: "wf_1",
      hook_id: "hk_1",
      outcome: "refused",
      status: 401,
      run_id: null,
      reason: "bad_signature",
      request_id: "req_1",
      received_at: "2026-11-27T04:00:00.000Z",
    });
    expect(hookRequestView(doc("accepted", { run_id: "run_1" }))).toMatchObject({
      status: 202,
      run_id: "run_1",
      reason: null,
      request_id: null,
    });
  });
});
