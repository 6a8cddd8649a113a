import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/**
 * What the docs test reads in a Markdown file: headings (as GitHub makes their anchors), relative
 * links, and fenced code blocks with the `<!-- test: … -->` marker written just before them.
 */

export interface CodeBlock {
  lang: string;
  code: string;
  /** The text of `<!-- test: … -->` on the last non-blank line before the fence, if any. */
  marker?: string;
  line: number;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)[^\n]*$/;

/** The fenced code blocks of a file, in order. */
export function codeBlocks(md: string): CodeBlock[] {
  const lines = md.split("\n");
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]);
    if (!open) continue;
    const fence = open[2];
    let end = i + 1;
    while (end < lines.length && !lines[end].trim().startsWith(fence)) end++;
    let before = i - 1;
    while (before >= 0 && lines[before].trim() === "") before--;
    const marker = before >= 0 ? /^<!--\s*test:\s*(.*?)\s*-->$/.exec(lines[before].trim())?.[1] : undefined;
    blocks.push({ lang: open[3].toLowerCase(), code: lines.slice(i + 1, end).join("\n"), marker, line: i + 1 });
    i = end;
  }
  return blocks;
}

/** Every `<!-- test: … -->` marker with its line, whether or not a code block follows it. */
export function markers(md: string): { marker: string; line: number }[] {
  return md.split("\n").flatMap((text, i) => {
    const m = /^<!--\s*test:\s*(.*?)\s*-->$/.exec(text.trim());
    return m ? [{ marker: m[1], line: i + 1 }] : [];
  });
}

/** The file without its fenced blocks and inline code, where links and headings are not read. */
function prose(md: string): string[] {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of md.split("\n")) {
    const open = FENCE.exec(line);
    if (fence) {
      if (line.trim().startsWith(fence)) fence = undefined;
      out.push("");
    } else if (open) {
      fence = open[2];
      out.push("");
    } else out.push(line.replace(/`[^`]*`/g, (m) => m.replace(/[[\]()]/g, " ")));
  }
  return out;
}

/** The anchor GitHub gives a heading's text: inline markup dropped, lower case, punctuation removed, spaces to hyphens. */
export function slugOf(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-");
}

/** The anchors of a file's headings, with GitHub's `-1`, `-2` for repeated ones. */
export function anchorsOf(md: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  const lines = md.split("\n");
  let fence: string | undefined;
  for (const line of lines) {
    const open = FENCE.exec(line);
    if (fence) {
      if (line.trim().startsWith(fence)) fence = undefined;
      continue;
    }
    if (open) {
      fence = open[2];
      continue;
    }
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = slugOf(h[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Relative link targets in a file's prose (`[text](target)`), with their lines. */
export function relativeLinks(md: string): { target: string; line: number }[] {
  const links: { target: string; line: number }[] = [];
  prose(md).forEach((text, i) => {
    for (const m of text.matchAll(/\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      links.push({ target, line: i + 1 });
    }
  });
  return links;
}

/** What is wrong with a file's relative links: a missing file, or an anchor no heading of the target makes. */
export function linkProblems(file: string): string[] {
  const md = readFileSync(file, "utf8");
  const problems: string[] = [];
  for (const { target, line } of relativeLinks(md)) {
    const [path, anchor] = target.split("#", 2);
    let dest = path === "" ? file : resolve(dirname(file), decodeURIComponent(path));
    const where = `${file}:${line} → ${target}`;
    if (!existsSync(dest)) {
      problems.push(`${where}: no such file`);
      continue;
    }
    if (statSync(dest).isDirectory()) dest = join(dest, "README.md");
    if (anchor === undefined) continue;
    if (!existsSync(dest) || !dest.endsWith(".md")) {
      problems.push(`${where}: an anchor into a file that is not Markdown`);
      continue;
    }
    if (!anchorsOf(readFileSync(dest, "utf8")).has(anchor.toLowerCase())) problems.push(`${where}: no heading makes #${anchor}`);
  }
  return problems;
}

/** README.md and every Markdown file under docs/, relative to the root. */
export function docFiles(root: string): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".md") ? [join(dir, e.name)] : [],
    );
  return ["README.md", ...walk(join(root, "docs")).map((f) => relative(root, f))].sort();
}

const REPO_DIRS = /^(app|bench|bin|clients|dashboard|docs|scripts|services|shared|test|tools)\//;

/** Repository paths a file names in inline code (`services/gateway/routes.ts`), placeholders (`<name>`, `{a,b}`, `…`) left out. */
export function repoPaths(md: string): string[] {
  const paths = new Set<string>();
  for (const line of prose(md)) {
    for (const m of line.matchAll(/`([^`]*)`/g)) {
      const text = m[1].split(":")[0];
      if (REPO_DIRS.test(text) && !/[<{…*\s]/.test(text)) paths.add(text);
    }
  }
  return [...paths];
}
