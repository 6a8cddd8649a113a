import "@picocss/pico/css/pico.min.css";
import "./style.css";
import { render } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Environment } from "./api";
import { AuditLogPage } from "./pages/audit";
import { EventCatalogPage } from "./pages/events/catalog";
import { EventPage, EventsPage } from "./pages/events/list";
import { KeysPage } from "./pages/keys";
import { BulkJobsPage } from "./pages/runs/bulk";
import { BulkJobPage } from "./pages/runs/bulk-job";
import { RunsPage } from "./pages/runs/list";
import { SignInPage } from "./pages/signin";
import { UsagePage } from "./pages/usage";
import { WebhooksPage } from "./pages/webhooks/list";
import { WebhookPage } from "./pages/webhooks/webhook";
import { ApprovalsPage } from "./pages/workflows/approvals";
import { ChildrenPage } from "./pages/workflows/children";
import { WorkflowsPage } from "./pages/workflows/list";
import { RunPage } from "./pages/workflows/run";
import { WorkflowPage } from "./pages/workflows/workflow";
import { href, loadSession, saveSession, useRoute, type Session } from "./session";
import { AccountContext, accountOf, Empty } from "./ui";

const SECTIONS = [
  { route: "keys", label: "API keys" },
  { route: "webhooks", label: "Webhooks" },
  { route: "events", label: "Events" },
  { route: "workflows", label: "Workflows" },
  { route: "runs", label: "Runs" },
  { route: "bulk", label: "Bulk jobs" },
  { route: "approvals", label: "Approvals" },
  { route: "usage", label: "Usage" },
  { route: "audit", label: "Audit log" },
] as const;

function App() {
  const [session, setSession] = useState<Session | null>(loadSession);
  const [notice, setNotice] = useState<string | null>(null);
  const route = useRoute();

  const update = (next: Session | null) => {
    saveSession(next);
    setSession(next);
  };

  // A 401 signs out a session; while signing in it is only the sign-in's own error.
  const signedIn = useRef(false);
  signedIn.current = session !== null;
  useEffect(() => {
    const onRefused = (e: Event) => {
      if (!signedIn.current) return;
      update(null);
      setNotice(`Signed out: ${(e as CustomEvent<string>).detail}.`);
    };
    addEventListener("dashboard:unauthorized", onRefused);
    return () => removeEventListener("dashboard:unauthorized", onRefused);
  }, []);

  const environment = session?.environment;
  const account = useMemo(
    () => (session && environment ? accountOf(session.keys[environment]!, session.identities[environment]!) : null),
    [session, environment],
  );

  if (!session || !account) {
    return (
      <SignInPage
        notice={notice}
        onSignedIn={(s) => {
          setNotice(null);
          update(s);
          if (!route[0]) location.hash = href("keys");
        }}
      />
    );
  }

  const section = route[0] ?? "keys";
  const both = session.keys.live && session.keys.test;
  const switchTo = (env: Environment) => update({ ...session, environment: env });

  return (
    <AccountContext.Provider value={account}>
      <a class="skip" href="#content">
        Skip to content
      </a>
      <header class="top container-fluid">
        <nav aria-label="Account">
          <ul>
            <li>
              <strong>{account.identity.org.name}</strong>
              <small class="muted"> {account.identity.org.id}</small>
            </li>
          </ul>
          <ul>
            <li>
              {both ? (
                <div role="group" aria-label="Environment" class="env-switch">
                  {(["live", "test"] as const).map((env) => (
                    <button
                      key={env}
                      type="button"
                      class={env === environment ? "" : "outline secondary"}
                      aria-pressed={env === environment}
                      onClick={() => switchTo(env)}
                    >
                      {env}
                    </button>
                  ))}
                </div>
              ) : (
                <span class={`env ${environment}`} aria-label={`Environment: ${environment}`}>
                  {environment}
                </span>
              )}
            </li>
            <li>
              <button type="button" class="outline secondary small" onClick={() => (update(null), setNotice("Signed out."))}>
                Sign out
              </button>
            </li>
          </ul>
        </nav>
        <nav aria-label="Sections" class="sections">
          <ul>
            {SECTIONS.map((s) => (
              <li key={s.route}>
                <a href={href(s.route)} aria-current={section === s.route ? "page" : undefined}>
                  {s.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      </header>
      {environment === "test" && <div class="test-banner">Test data: nothing here touches live.</div>}
      {/* Keyed by environment and route: a page starts afresh, and a secret shown once never follows to another page. */}
      <main id="content" class="container" key={`${environment}:${route.length > 0 ? route.join("/") : "keys"}`}>
        <Page route={route} />
      </main>
    </AccountContext.Provider>
  );
}

function Page({ route }: { route: string[] }) {
  const [section, id, sub, subId, more] = route;
  switch (section ?? "keys") {
    case "keys":
      return <KeysPage />;
    case "webhooks":
      return id ? <WebhookPage id={id} /> : <WebhooksPage />;
    case "events":
      if (id === "types") return <EventCatalogPage />;
      return id ? <EventPage id={id} /> : <EventsPage />;
    case "workflows":
      if (id && sub === "runs" && subId && more === "children") return <ChildrenPage workflowId={id} runId={subId} />;
      if (id && sub === "runs" && subId) return <RunPage workflowId={id} runId={subId} />;
      return id ? <WorkflowPage id={id} /> : <WorkflowsPage />;
    case "runs":
      return <RunsPage status={id} workflowId={sub} />;
    case "bulk":
      return id ? <BulkJobPage id={id} /> : <BulkJobsPage />;
    case "approvals":
      return <ApprovalsPage />;
    case "usage":
      return <UsagePage />;
    case "audit":
      return <AuditLogPage />;
    default:
      return (
        <Empty>
          No such page. <a href={href("keys")}>Go to API keys</a>.
        </Empty>
      );
  }
}

render(<App />, document.getElementById("app")!);
