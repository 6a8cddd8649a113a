import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";

/** Debian's Chromium, driven by playwright-core; screenshots land in test-artifacts/dashboard/. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const SHOTS = join(__dirname, "..", "..", "test-artifacts", "dashboard");

/** A headless Chromium kept off the network (this machine's is closed: no calls to Google's hosts). */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`No Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  mkdirSync(SHOTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** A full-page screenshot of `page` as test-artifacts/dashboard/<name>.png. */
export const screenshot = (page: Page, name: string): Promise<Buffer> =>
  page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

/** A page of a fresh 1280×900 context; uncaught errors in it are added to `problems`. */
export async function newPage(browser: Browser, problems: string[]): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  return page;
}

/** Opens the dashboard at `url` and signs in with a live key, a test key or both, as a person does. */
export async function signIn(page: Page, url: string, keys: { live?: string; test?: string }): Promise<void> {
  await page.goto(url);
  if (keys.live !== undefined) await page.getByLabel("Live key").fill(keys.live);
  if (keys.test !== undefined) await page.getByLabel("Test key").fill(keys.test);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: "Workflows" }).waitFor();
}

/**
 * Rotates a secret through the dashboard's button named `action` and its confirmation; answers the
 * new secret as the dialog shows it (once), leaving the dialog open.
 */
export async function rotateSecret(page: Page, action: string): Promise<string> {
  await page.getByRole("button", { name: action }).click();
  await page.getByRole("dialog").getByRole("button", { name: action }).click();
  const box = page.getByRole("textbox", { name: "New signing secret" });
  await box.waitFor();
  return box.inputValue();
}
