/**
 * The data of a test event (POST /webhooks/{id}/test) of a system type when the request gives none
 * (contract section 7; custom types send the latest event's data): the webhooks service sends it,
 * and the dashboard shows it as the payload to edit, so both read it here.
 */
export const EVENT_EXAMPLES: Readonly<Record<string, Record<string, unknown>>> = {
  "workflow.completed": { workflow_id: "wf_example", run_id: "run_example", status: "succeeded" },
  "approval.requested": { workflow_id: "wf_example", run_id: "run_example", step_id: "approve", message: "Example approval" },
  "api_key.created": { key_id: "key_example", name: "Example key", environment: "live" },
  "api_key.revoked": { key_id: "key_example", name: "Example key", revoked_at: "2026-01-01T00:00:00.000Z" },
  "webhook.disabled": { webhook_id: "wh_example", reason: "an example" },
};
