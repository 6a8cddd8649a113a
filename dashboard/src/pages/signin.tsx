import { useState } from "preact/hooks";
import { signIn, type Session } from "../session";

export function SignInPage({ onSignedIn, notice }: { onSignedIn(session: Session): void; notice: string | null }) {
  const [live, setLive] = useState("");
  const [test, setTest] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  return (
    <main class="container narrow">
      <article>
        <header>
          <h1>Sign in</h1>
          <p class="muted">
            With an API key of your organization. Keys stay in this browser tab only (session storage) and are sent to nothing but this
            platform’s API.
          </p>
        </header>
        {notice && (
          <p role="status" class="notice wait">
            {notice}
          </p>
        )}
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setPending(true);
            setError(null);
            try {
              onSignedIn(await signIn({ live, test }));
            } catch (err) {
              setError((err as Error).message);
            } finally {
              setPending(false);
            }
          }}
        >
          <label>
            Live key
            <input
              name="live-key"
              type="password"
              autocomplete="off"
              spellcheck={false}
              placeholder="svc_live_…"
              value={live}
              onInput={(e) => setLive(e.currentTarget.value)}
              aria-describedby="signin-help"
            />
          </label>
          <label>
            Test key
            <input
              name="test-key"
              type="password"
              autocomplete="off"
              spellcheck={false}
              placeholder="svc_test_…"
              value={test}
              onInput={(e) => setTest(e.currentTarget.value)}
              aria-describedby="signin-help"
            />
          </label>
          <small id="signin-help">One key is enough; give both to switch between live and test data.</small>
          {error && (
            <p role="alert" class="notice error">
              {error}
            </p>
          )}
          <button type="submit" aria-busy={pending} disabled={pending || (!live.trim() && !test.trim())}>
            Sign in
          </button>
        </form>
      </article>
    </main>
  );
}
