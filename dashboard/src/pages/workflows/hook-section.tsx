import { useState } from "preact/hooks";
import type { HookRequest, Workflow } from "../../api";
import { href } from "../../session";
import { ListOf, Status, Time, useApi } from "../../ui";
import { REFUSAL_TEXT, requestText } from "./hook-requests.logic";

/**
 * A webhook trigger's hook: the address to give the provider, what it received (counted about once
 * a second), and its recent requests (GET /workflows/{id}/hook/requests), each with its run or why
 * it was refused. Read again every 3 s.
 */
export function HookSection({ workflowId }: { workflowId: string }) {
  const path = `/workflows/${encodeURIComponent(workflowId)}`;
  const wf = useApi<Workflow>(path, undefined, 3000);
  const [page, setPage] = useState(1);
  const requests = useApi<HookRequest[]>(`${path}/hook/requests`, { page, per_page: 20 }, 3000);
  const hook = wf.data?.hook;
  const scheme = wf.data?.trigger.type === "webhook" ? wf.data.trigger.verify.scheme : null;
  if (!hook) return null;
  return (
    <section aria-labelledby="hook-title" class="panel">
      <h3 id="hook-title">Inbound hook</h3>
      <p>
        Providers send to <code class="break" aria-label="Hook URL">{`${location.origin}${hook.url}`}</code>
      </p>
      <dl class="facts">
        <dt>Signatures</dt>
        <dd>
          {scheme === "none"
            ? "not checked (scheme none)"
            : `${scheme ?? ""}, secret: ${hook.secret_source === "generated" ? "the platform's, shown once" : hook.secret_source}`}
          {hook.previous_secret_expires_at && (
            <>
              {" "}
              · the previous secret is accepted until <Time at={hook.previous_secret_expires_at} />
            </>
          )}
        </dd>
        <dt>Received</dt>
        <dd aria-label="Hook counts">
          {hook.accepted} accepted · {hook.duplicates} duplicates · {hook.filtered} filtered · {hook.refused} refused
        </dd>
        <dt>Last accepted</dt>
        <dd>
          <Time at={hook.last_accepted_at} />
        </dd>
        <dt>Last refused</dt>
        <dd>
          <Time at={hook.last_refused_at} />
          {hook.last_refused_reason && ` · ${hook.last_refused_reason}: ${REFUSAL_TEXT[hook.last_refused_reason] ?? ""}`}
        </dd>
      </dl>
      <h4 id="hook-requests-title">Recent requests</h4>
      <ListOf
        state={requests}
        what="the hook's requests"
        empty="No requests yet."
        onPage={setPage}
        columns={[
          { title: "Received", cell: (r) => <Time at={r.received_at} /> },
          { title: "Outcome", cell: (r) => <Status value={r.outcome} /> },
          { title: "HTTP", cell: (r) => r.status },
          {
            title: "What happened",
            cell: (r) => (
              <>
                {requestText(r)}
                {r.run_id && (
                  <>
                    {" "}
                    <a href={href("workflows", workflowId, "runs", r.run_id)}>{r.run_id}</a>
                  </>
                )}
              </>
            ),
          },
          { title: "Request", cell: (r) => <code class="break">{r.request_id ?? "—"}</code> },
        ]}
      />
    </section>
  );
}
