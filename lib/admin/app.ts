/**
 * The admin endpoint's Hono app: probes, metrics, read-only views of the stores, the plan of the
 * next pass, and one mutating request (run a pass now) behind a bearer token. docs/admin.md
 * documents every route and answer.
 *
 * Every answer is JSON except /metrics; every error is `{"error": "..."}` with no stack trace;
 * every request is logged as one line. Ids are validated before any lookup.
 */
import { type Context, type Handler, Hono } from "hono";
import * as v from "valibot";
import type { PassReport } from "../pass/report.ts";
import { parseValidId } from "../core/ids.ts";
import { formatSchemaError } from "../core/schema_error.ts";
import { check, int, strictObject } from "../core/schema.ts";
import type { Clock, Instant } from "../core/time.ts";
import { type VersionsView, versionsView } from "../disk/versions.ts";
import { VerbError, type VerbName, type VerbRequest, VERBS } from "../pass/verbs.ts";
import type { Daemon } from "../daemon/daemon.ts";
import type { Logger } from "../util/log.ts";
import { sandboxIdProblem } from "../store/layout.ts";
import type { StatusView } from "../store/status_record.ts";
import { limitBody, MAX_BODY_BYTES } from "./body_limit.ts";
import { isLoopbackHostHeader } from "./listen.ts";
import type { AdminMetrics } from "./metrics.ts";
import { liveness } from "../daemon/probes.ts";
import type { AdminToken } from "./token.ts";
import { type CheckpointVersions, checkpointView, type SandboxView } from "./views.ts";

export interface AdminAppOptions {
  daemon: Daemon;
  metrics: AdminMetrics;
  token: AdminToken;
  clock: Clock;
  log: Logger;
  /** When the daemon started: the heartbeat is measured from here until the first pass ends. */
  startedAt: Instant;
  /** Served on a loopback address: requests must name it so (see isLoopbackHostHeader). */
  loopbackHostOnly: boolean;
}

type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 409 | 413 | 421 | 500 | 503;

function isVerb(verb: string | undefined): verb is VerbName {
  return (VERBS as readonly string[]).includes(verb ?? "");
}

/** A verb's options (`to=N`, `force=true`), or what is wrong with them. */
function verbOptions(
  verb: VerbName,
  to: string | undefined,
  force: string | undefined,
): Pick<VerbRequest, "to" | "force"> | string {
  if (to !== undefined && (verb !== "rollback" || !/^[1-9][0-9]{0,8}$/.test(to))) {
    return verb === "rollback" ? "to: must be a version number" : `${verb} takes no to`;
  }
  if (force !== undefined && (verb !== "purge" || !["true", "false"].includes(force))) {
    return verb === "purge" ? "force: must be true or false" : `${verb} takes no force`;
  }
  return {
    ...(to !== undefined ? { to: Number(to) } : {}),
    ...(force === "true" ? { force: true } : {}),
  };
}

/** A verb's options in a JSON body: `{"to": 2}`, `{"force": true}`. */
const VerbBodySchema = strictObject({
  to: v.optional(int()),
  force: v.optional(v.boolean()),
});

/**
 * A verb's options from a JSON body, as the query writes them; an empty body has none. What is
 * wrong with it otherwise, naming the field.
 */
function bodyOptions(text: string): { to?: string; force?: string } | string {
  if (text.trim() === "") return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return "body: not JSON";
  }
  const parsed = check(VerbBodySchema, body);
  if (!parsed.success) return `body: ${formatSchemaError(VerbBodySchema, parsed.issues)}`;
  const { to, force } = parsed.output;
  return {
    ...(to !== undefined ? { to: String(to) } : {}),
    ...(force !== undefined ? { force: String(force) } : {}),
  };
}

function fail(c: Context, status: ErrorStatus, error: string, headers?: Record<string, string>) {
  return c.json({ error }, status, headers);
}

/** The path as the client sent it (not decoded, not normalized), cut short for the log. */
function rawPath(url: string): string {
  const start = url.indexOf("/", url.indexOf("://") + 3);
  const query = url.indexOf("?", start);
  const path = url.slice(start, query === -1 ? undefined : query);
  return path.length > 256 ? `${path.slice(0, 256)}…` : path;
}

const BAD_CHECKPOINT_ID =
  "bad checkpoint id: expected /v1/checkpoints/<namespace>/<name> with Kubernetes names";

type Method = "GET" | "POST";

/** Hono answers HEAD with its GET route. */
function allowHeader(methods: Set<Method>): string {
  return [...methods].flatMap((m) => m === "GET" ? ["GET", "HEAD"] : [m]).join(", ");
}

export function createAdminApp(opts: AdminAppOptions): Hono {
  const { daemon, metrics, token, clock, log } = opts;
  const app = new Hono();
  /** Every method each known path answers, for the 405s registered after all routes. */
  const known = new Map<string, Set<Method>>();
  const route = (method: Method, path: string, handler: Handler) => {
    if (!known.has(path)) known.set(path, new Set());
    known.get(path)!.add(method);
    app.on(method, path, handler);
  };

  app.use(async (c, next) => {
    const started = performance.now();
    await next();
    c.header("Cache-Control", "no-store");
    c.header("X-Content-Type-Options", "nosniff");
    log.debug("admin request", {
      method: c.req.method,
      path: rawPath(c.req.url),
      status: c.res.status,
      durationMs: Math.round((performance.now() - started) * 10) / 10,
    });
  });
  if (opts.loopbackHostOnly) {
    app.use(async (c, next) => {
      const host = c.req.header("host");
      if (host !== undefined && !isLoopbackHostHeader(host)) {
        return fail(c, 421, "this endpoint answers only requests addressed to a loopback host");
      }
      return await next();
    });
  }
  app.use(limitBody(
    MAX_BODY_BYTES,
    (c) => fail(c, 413, `request body larger than ${MAX_BODY_BYTES} bytes`),
  ));

  route("GET", "/healthz", (c) => {
    const live = liveness(clock.now(), {
      lastTick: daemon.lastTick,
      startedAt: opts.startedAt,
      pollIntervalMs: daemon.config.pollIntervalMs,
    });
    if (live.healthy) return c.json({ status: "ok", ...live });
    return c.json({
      error:
        `the loop has not ticked for ${live.secondsSinceTick} s (limit ${live.limitSeconds} s)`,
      ...live,
    }, 503);
  });

  route("GET", "/readyz", (c) => {
    const ready = daemon.readiness();
    if (ready.ready) return c.json({ status: "ready", ...ready });
    return c.json({ error: ready.notReady.map((n) => n.message).join("; "), ...ready }, 503);
  });

  route("GET", "/metrics", async (c) => {
    return c.body(await metrics.text(), 200, { "Content-Type": metrics.contentType });
  });

  /** A checkpoint's view, with its versions as on disk and as the agent watches them. */
  const viewOf = async (record: StatusView) => {
    const file = daemon.agent.manifestFileOf(record.id);
    return checkpointView(
      record,
      daemon.config,
      file,
      file === undefined
        ? undefined
        : withCandidate(await versionsView(daemon.config, record.id, file), record.id),
    );
  };
  /** Why the candidate waits, and whether its parent crash-loops on it, as the agent last judged. */
  const withCandidate = (versions: VersionsView, id: string): CheckpointVersions => {
    const watched = daemon.agent.candidateOf(id);
    if (!versions.candidate || !watched || watched.version !== versions.candidate.version) {
      return versions;
    }
    const crashLooping = daemon.lastReport?.crashLooping[id] !== undefined;
    return {
      ...versions,
      candidate: {
        ...versions.candidate,
        waiting: watched.why,
        ...(crashLooping ? { crashLooping } : {}),
      },
    };
  };

  route("GET", "/v1/checkpoints", async (c) => {
    const checkpoints = await Promise.all(daemon.stores.status.list().map(viewOf));
    return c.json({ checkpoints });
  });

  route("GET", "/v1/checkpoints/:namespace/:name", async (c) => {
    const id = `${c.req.param("namespace") ?? ""}/${c.req.param("name") ?? ""}`;
    if (!parseValidId(id)) return fail(c, 400, BAD_CHECKPOINT_ID);
    // Every valid id names a record file, however long (docs/design.md#long-names).
    const record = daemon.stores.status.get(id);
    if (!record) return fail(c, 404, `no checkpoint ${id}`);
    return c.json(await viewOf(record));
  });

  /** Undefined when the request carries the token; else the answer that refuses it. */
  const refused = async (c: Context) => {
    const challenge = { "WWW-Authenticate": 'Bearer realm="ckpt-agent"' };
    const authorization = await token.authorize(c.req.header("authorization"));
    if (typeof authorization === "object") return fail(c, 403, authorization.disabled);
    switch (authorization) {
      case "missing":
        return fail(c, 401, "missing bearer token", challenge);
      case "wrong":
        return fail(c, 401, "wrong token", challenge);
      case "ok":
        return undefined;
    }
  };

  // One verb at a time: a second one while the first waits for a pass would act on a
  // checkpoint the first is changing; it is refused, never queued.
  let verbUnderWay = false;
  route("POST", "/v1/checkpoints/:namespace/:name/:verb", async (c) => {
    const denied = await refused(c);
    if (denied) return denied;
    const verb = c.req.param("verb");
    if (!isVerb(verb)) return fail(c, 404, `no verb ${verb}; the verbs: ${VERBS.join(", ")}`);
    const id = `${c.req.param("namespace")}/${c.req.param("name")}`;
    if (!parseValidId(id)) return fail(c, 400, BAD_CHECKPOINT_ID);
    const body = bodyOptions(await c.req.text());
    if (typeof body === "string") return fail(c, 400, body);
    const [to, force] = [c.req.query("to"), c.req.query("force")];
    if ((to !== undefined && body.to) || (force !== undefined && body.force)) {
      return fail(c, 400, "an option given both in the query and in the body");
    }
    const options = verbOptions(verb, to ?? body.to, force ?? body.force);
    if (typeof options === "string") return fail(c, 400, options);
    if (verbUnderWay) return fail(c, 409, "another verb is under way; try again once it has ended");
    verbUnderWay = true;
    try {
      const result = await daemon.between(() =>
        daemon.agent.verb(daemon.stores, { verb, id, ...options })
      );
      if (result.rolledBack) metrics.rolledBack();
      return c.json(result);
    } catch (e) {
      if (e instanceof VerbError) return fail(c, e.status, e.message);
      throw e;
    } finally {
      verbUnderWay = false;
    }
  });

  // Any other shape under /v1/checkpoints/ (one segment, three, an encoded slash) is a bad id.
  route("GET", "/v1/checkpoints/*", (c) => fail(c, 400, BAD_CHECKPOINT_ID));

  route("GET", "/v1/sandboxes", (c) => {
    const sandboxes: SandboxView[] = daemon.stores.sandboxes.list().map((id) => ({
      id,
      checkpoint: daemon.stores.sandboxes.get(id)!,
    }));
    return c.json({ sandboxes });
  });

  route("GET", "/v1/sandboxes/:id", (c) => {
    const id = c.req.param("id") ?? "";
    const problem = sandboxIdProblem(id);
    if (problem) return fail(c, 400, `bad sandbox id: ${problem}`);
    const checkpoint = daemon.stores.sandboxes.get(id);
    if (!checkpoint) return fail(c, 404, `no sandbox checkpoint ${id}`);
    return c.json({ id, checkpoint } satisfies SandboxView);
  });

  route("GET", "/v1/sandboxes/*", (c) => fail(c, 400, "bad sandbox id: expected one path segment"));

  // Without the token, the last pass's plan, from memory: a request anyone on the node can make
  // never reaches the API server, the kubelet or the runtime. A fresh dry run asks them all, so
  // it needs the token; concurrent ones share one dry run.
  let planning: Promise<PassReport> | undefined;
  const planView = (from: "last-pass" | "dry-run", report: PassReport) => ({
    from,
    observedAt: report.startedAt,
    complete: report.complete,
    failures: report.failures,
    crashLooping: report.crashLooping,
    plan: report.plan,
    changes: report.changes,
  });
  route("GET", "/v1/plan", async (c) => {
    if (c.req.header("authorization") === undefined) {
      const last = daemon.lastReport;
      if (!last) {
        return fail(c, 503, "no pass has ended yet; a fresh dry run needs the bearer token");
      }
      return c.json(planView("last-pass", last));
    }
    const denied = await refused(c);
    if (denied) return denied;
    planning ??= daemon.dryRun().finally(() => planning = undefined);
    return c.json(planView("dry-run", await planning));
  });

  route("POST", "/v1/reconcile", async (c) => {
    return await refused(c) ?? c.json(await daemon.runPass("POST /v1/reconcile"));
  });

  for (const [path, methods] of known) {
    const allow = allowHeader(methods);
    app.all(
      path,
      (c) => fail(c, 405, `${c.req.method} not allowed; use ${allow}`, { Allow: allow }),
    );
  }
  app.notFound((c) => fail(c, 404, "not found"));
  app.onError((err, c) => {
    log.error("admin: request failed", {
      method: c.req.method,
      path: rawPath(c.req.url),
      error: err.message,
      stack: err.stack,
    });
    return fail(c, 500, "internal error");
  });
  return app;
}
