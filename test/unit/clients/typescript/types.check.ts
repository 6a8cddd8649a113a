import { platformClient } from "../../../../clients/typescript/index";

/**
 * Compiled by `npm run typecheck`, never run: each `@ts-expect-error` fails the typecheck when the
 * line below it compiles, so the generated client must refuse these at compile time.
 */
export async function refusedAtCompileTime(): Promise<void> {
  const api = platformClient("http://127.0.0.1:3000/v1", "svc_test_x");
  const wf = await api.POST("/workflows", {
    body: {
      name: "Ship orders",
      // @ts-expect-error a trigger is {type: "manual"} or {type: "event", event_type}
      trigger: 42,
      steps: [{ type: "delay", duration_ms: 1000 }],
    },
  });
  await api.POST("/workflows", {
    // @ts-expect-error steps is a list of typed steps
    body: { name: "x", trigger: { type: "manual" }, steps: "x" },
  });
  await api.POST("/workflows", {
    // @ts-expect-error a delay step takes duration_ms, not url
    body: { name: "x", trigger: { type: "manual" }, steps: [{ type: "delay", url: "https://example.com" }] },
  });
  if (!wf.data) return;
  // @ts-expect-error an id is a string
  const id: number = wf.data.data.id;
  const status: "active" | "inactive" = wf.data.data.status;
  // @ts-expect-error no such status
  const never: "deleted" = wf.data.data.status;
  // @ts-expect-error the path needs its {id}
  await api.GET("/workflows/{id}", {});
  // @ts-expect-error scopes are the platform's names
  await api.POST("/api-keys", { body: { name: "k", scopes: ["everything"] } });
  void [id, status, never];
}
