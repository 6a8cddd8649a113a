import { Environment, type ASTNode } from "@marcbachmann/cel-js";

/**
 * CEL (docs/workflows/language.md) as workflows use it: one environment per place an expression
 * can stand (a step's fields, an event trigger's filter), each naming its variables, with the
 * helpers a transform needs. JSON has one number type and CEL three: whole JSON numbers enter as
 * int, others as double, arithmetic mixing the two is done in double, and every number leaves as a
 * JSON number. Expressions are compiled once per text and kept (bounded).
 */
export const EXPRESSION_MAX_CHARS = 2000;

/** Evaluation steps (nodes of the expression evaluated, counting each iteration; a function call counts 15) one evaluation may take. */
export const MAX_EVALUATION_STEPS = 5_000;

/** An expression that cannot be compiled or evaluated: what is wrong and where (0-based offset in the expression). */
export class ExpressionError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(message);
    this.name = "ExpressionError";
  }
}

/** `request`: an inbound webhook trigger's filter (services/workflows/hooks.logic.ts). */
export type Place = "step" | "event" | "request";

const MIXED: Record<string, (a: number, b: number) => number> = {
  "+": (a, b) => a + b,
  "-": (a, b) => a - b,
  "*": (a, b) => a * b,
  "/": (a, b) => a / b,
};

type Num = bigint | number;
const numeric = (list: unknown[], name: string): Num[] =>
  list.map((v) => {
    if (typeof v === "bigint" || typeof v === "number") return v;
    throw new Error(`${name}() takes a list of numbers; it holds ${v === null ? "null" : typeof v}`);
  });
const allInts = (list: Num[]): list is bigint[] => list.every((v) => typeof v === "bigint");

function sum(list: unknown[]): Num {
  const nums = numeric(list, "sum");
  if (allInts(nums)) return nums.reduce((a, b) => a + b, 0n);
  return nums.reduce<number>((a, b) => a + Number(b), 0);
}

function extreme(list: unknown[], name: "min" | "max"): Num {
  const nums = numeric(list, name);
  if (nums.length === 0) throw new Error(`${name}() of an empty list`);
  return nums.reduce((a, b) => ((name === "min" ? b < a : b > a) ? b : a));
}

const isMissing = (err: unknown): boolean => (err as { code?: string } | null)?.code === "no_such_key";

function base(): Environment {
  const env = new Environment({
    unlistedVariablesAreDyn: false,
    homogeneousAggregateLiterals: false,
    enableOptionalTypes: true,
    limits: { maxAstNodes: 400, maxDepth: 32, maxListElements: 100, maxMapEntries: 100, maxCallArguments: 8 },
  });
  for (const [op, f] of Object.entries(MIXED)) {
    env.registerOperator(`int ${op} double`, (a: bigint, b: number) => f(Number(a), b));
    env.registerOperator(`double ${op} int`, (a: number, b: bigint) => f(a, Number(b)));
  }
  env.registerFunction("string.lower(): string", (s: string) => s.toLowerCase());
  env.registerFunction("string.upper(): string", (s: string) => s.toUpperCase());
  env.registerFunction("list.sum(): dyn", sum);
  env.registerFunction("list.min(): dyn", (l: unknown[]) => extreme(l, "min"));
  env.registerFunction("list.max(): dyn", (l: unknown[]) => extreme(l, "max"));
  // default(x, y): x, or y where x is missing (a field that is not there) or null.
  env.registerFunction("default(ast, ast): dyn", ({ args }: { args: ASTNode[] }) => ({
    args,
    typeCheck(chk: { check(n: ASTNode, c: unknown): unknown; getType(n: string): unknown }, macro: { args: ASTNode[] }, ctx: unknown) {
      chk.check(macro.args[0], ctx);
      chk.check(macro.args[1], ctx);
      return chk.getType("dyn");
    },
    evaluate(ev: { run(n: ASTNode, c: unknown): unknown }, macro: { args: ASTNode[] }, ctx: unknown) {
      let value: unknown;
      try {
        value = ev.run(macro.args[0], ctx);
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
      return value === undefined || value === null ? ev.run(macro.args[1], ctx) : value;
    },
  }));
  return env;
}

/**
 * The step budget: the library evaluates every node through its evaluator's `run`, which is
 * wrapped once here to count them (the library has no budget of its own). Outside `evaluate`
 * below the budget is unbounded.
 */
const budget = { left: Infinity };
/** One instance, thrown without a stack: all() and exists() catch errors item by item and go on, and each would build one. */
const OVER_BUDGET = Object.freeze({ overBudget: true });
type EvaluatorProto = {
  run(this: unknown, ast: { op: string; evaluate(ev: unknown, ast: unknown, ctx: unknown): unknown }, ctx: unknown): unknown;
};
const CALL_STEPS = 15;
(() => {
  const found: { proto: EvaluatorProto | null } = { proto: null };
  const probe = new Environment().registerFunction("probe(ast): dyn", ({ args }: { args: ASTNode[] }) => ({
    args,
    typeCheck: (chk: { getType(n: string): unknown }) => chk.getType("dyn"),
    evaluate(ev: object) {
      found.proto = Object.getPrototypeOf(ev) as EvaluatorProto;
      return null;
    },
  }));
  probe.evaluate("probe(1)", {});
  if (!found.proto) throw new Error("the CEL evaluator could not be found");
  found.proto.run = function run(ast, ctx) {
    // A call dispatches on the runtime types of its arguments: it costs about as much as 15 other nodes.
    budget.left -= ast.op === "rcall" || ast.op === "call" ? CALL_STEPS : 1;
    if (budget.left < 0) throw OVER_BUDGET;
    return ast.evaluate(this, ast, ctx);
  };
})();

const ENVIRONMENTS: Record<Place, Environment> = (() => {
  const step = base();
  // run and workflow have known fields: reading another one is refused when written.
  step
    .registerVariable("input", "dyn")
    .registerVariable("steps", "map")
    .registerVariable({ name: "run", schema: { id: "string", attempt: "int", created_at: "string" } })
    .registerVariable({ name: "workflow", schema: { id: "string", version: "int" } });
  const event = base();
  event.registerVariable("event", "map");
  const request = base();
  request.registerVariable("request", "map");
  return { step, event, request };
})();

/** What an expression reads: the variables, and for `steps` the step ids (null: all of them, read other than as `steps.<id>`). */
export interface Reads {
  roots: Set<string>;
  steps: Set<string> | null;
}

export interface Compiled {
  source: string;
  run: (vars: Record<string, unknown>) => unknown;
  reads: Reads;
  /** The checked type of its value (`dyn` when it depends on the data). */
  type: string;
}

const positionOf = (err: unknown): number => {
  const e = err as { range?: { start?: number }; node?: { pos?: number } };
  return e.range?.start ?? e.node?.pos ?? 0;
};
const firstLine = (err: unknown): string => String((err as Error).message ?? err).split("\n")[0];

type Node = { op: string; args: unknown; pos?: number; start?: number };
const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null && typeof (v as Node).op === "string" && "args" in v;

/** Walks the tree: what it reads; refuses what has no bounded cost. */
function inspect(root: Node): Reads {
  const reads: Reads = { roots: new Set(), steps: new Set() };
  const visit = (node: Node, parent: Node | null): void => {
    if (node.op === "id") {
      const name = node.args as string;
      reads.roots.add(name);
      const selectsStep = parent !== null && (parent.op === "." || parent.op === ".?") && (parent.args as unknown[])[0] === node;
      if (name === "steps" && !selectsStep) reads.steps = null;
      return;
    }
    if ((node.op === "." || node.op === ".?") && isNode((node.args as unknown[])[0])) {
      const [target, field] = node.args as [Node, string];
      if (target.op === "id" && target.args === "steps" && reads.steps) reads.steps.add(field);
    }
    if ((node.op === "rcall" || node.op === "call") && (node.args as unknown[])[0] === "matches")
      throw new ExpressionError(
        "matches() is not available: a regular expression can take unbounded time; use contains, startsWith or endsWith",
        node.pos ?? 0,
      );
    if (node.op === "rcall") {
      const [, receiver, args] = node.args as [string, Node, Node[]];
      for (const a of [receiver, ...args]) visit(a, node);
      return;
    }
    const args = node.args;
    if (Array.isArray(args))
      for (const a of args.flat(2)) {
        if (isNode(a)) visit(a, node);
      }
    else if (isNode(args)) visit(args, node);
  };
  visit(root, null);
  return reads;
}

const cache: Record<Place, Map<string, Compiled>> = { step: new Map(), event: new Map(), request: new Map() };
const CACHE_MAX = 2000;

/** The expression compiled for `place`, type-checked: ExpressionError when it is not valid there. */
export function compile(source: string, place: Place): Compiled {
  const known = cache[place].get(source);
  if (known) return known;
  if (source.length > EXPRESSION_MAX_CHARS)
    throw new ExpressionError(`the expression is ${source.length} characters long; at most ${EXPRESSION_MAX_CHARS}`, EXPRESSION_MAX_CHARS);
  if (source.trim() === "") throw new ExpressionError("the expression is empty", 0);
  let program: ReturnType<Environment["parse"]>;
  try {
    program = ENVIRONMENTS[place].parse(source);
  } catch (err) {
    throw new ExpressionError(firstLine(err), positionOf(err));
  }
  const checked = program.check();
  if (!checked.valid) throw new ExpressionError(firstLine(checked.error), positionOf(checked.error));
  const reads = inspect(program.ast as unknown as Node);
  const compiled: Compiled = { source, run: (vars) => program(vars), reads, type: String(checked.type) };
  if (cache[place].size >= CACHE_MAX) cache[place].clear();
  cache[place].set(source, compiled);
  return compiled;
}

/** A JSON value as CEL sees it: whole numbers as int, other numbers as double. */
export function toCel(value: unknown): unknown {
  if (typeof value === "number") return Number.isSafeInteger(value) ? BigInt(value) : value;
  if (Array.isArray(value)) return value.map(toCel);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = toCel(v);
    return out;
  }
  return value;
}

/** A CEL value as JSON: every number a JSON number, a timestamp as ISO 8601 text, a duration as text such as "90s". */
export function fromCel(value: unknown): unknown {
  if (typeof value === "bigint") {
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER))
      throw new Error(`the result ${value} is beyond what a JSON number holds exactly (±2^53)`);
    return Number(value);
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error(`the result ${value} is not a JSON number`);
    // JSON has no negative zero (the store refuses it as a value it cannot hold): it leaves as 0.
    return value === 0 ? 0 : value;
  }
  if (value === null || typeof value !== "object") return value;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(fromCel);
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [String(k), fromCel(v)]));
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  const proto = Object.getPrototypeOf(value) as object | null;
  if (proto !== Object.prototype && proto !== null) {
    // Durations, unsigned ints, optionals: their text or value.
    const v = value as { hasValue?: () => boolean; value?: unknown; toString(): string };
    if (typeof v.hasValue === "function") return v.hasValue() ? fromCel(v.value) : null;
    if (typeof (value as { valueOf(): unknown }).valueOf() === "bigint") return fromCel((value as { valueOf(): unknown }).valueOf());
    return v.toString();
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = fromCel(v);
  return out;
}

/** Evaluates `compiled` over `vars` (already as CEL sees them): the JSON result, or ExpressionError. */
export function evaluate(compiled: Compiled, vars: Record<string, unknown>): unknown {
  budget.left = MAX_EVALUATION_STEPS;
  try {
    const value = compiled.run(vars);
    // all() and exists() may have caught the budget's stop and answered anyway.
    if (budget.left < 0) throw OVER_BUDGET;
    return fromCel(value);
  } catch (err) {
    if (err === OVER_BUDGET || budget.left < 0)
      throw new ExpressionError(
        `the expression took over ${MAX_EVALUATION_STEPS} evaluation steps (each item of a list counts for what is done with it): work on fewer items`,
        0,
      );
    throw new ExpressionError(firstLine(err), positionOf(err));
  } finally {
    budget.left = Infinity;
  }
}
