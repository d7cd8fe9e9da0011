import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { isApprovalRefusedError, isLoomError, isRunControlError, type Journal } from "../index.ts";
import { agentLoopMachine } from "../journal.ts";
import type { ResumeCommand } from "../read/activity.ts";
import { FORM_TOKEN_FIELD, isActionFormError, type ViewerActions } from "./actions.ts";
import { CSS, SCRIPT } from "./assets.ts";
import { hostnameOf, isLoopback, urlHost, ViewerStartError } from "./host.ts";
import { followSource, type LiveSource, serveLive } from "./live.ts";
import { Pages } from "./routes.ts";
import { problemPage } from "./stepPage.ts";

/**
 * `loom view`'s server (node:http): the runs page, a run's page (live), a step's page, time
 * travel, and, when given the run-control API, the approve/deny, cancel and fork forms. Every
 * asset comes from this server. It answers only requests addressed to it by a loopback name or
 * its own host (a DNS-rebinding page cannot read it), and takes a form only from its own pages:
 * one sent with another `Origin` is refused, and one sent with none only with the form token
 * its pages embed (random per start).
 */

export interface ViewerOptions {
  /** The journal to show (an `OpenJournal` from `openSqliteJournal`, `openPostgresJournal`, `createJournal`…). */
  readonly journal: Journal;
  /** Default 127.0.0.1: anyone who reaches the port sees the runs' inputs and outputs. */
  readonly host?: string;
  /** Default 0: a free port (`url` says which). */
  readonly port?: number;
  /** The run-control API; without it the pages only read, and show no buttons. */
  readonly actions?: ViewerActions;
  /** Where a live run page's events come from; default {@link followSource} (`followRun`) on `journal`. */
  readonly live?: LiveSource;
  /** What the runs page names as the journal (a file path). */
  readonly source?: string;
  /**
   * How the pages tell a user to resume a stalled or answered run; default
   * `loop.run({ runId, journal })` (`loom view` names `loom resume` for the loops it defines).
   */
  readonly resumeCommand?: ResumeCommand;
}

/** A running viewer. */
export interface Viewer {
  /** The address of the runs page. */
  readonly url: string;
  /** Closes the server and every connection (live pages too). */
  stop(): Promise<void>;
}

/**
 * Starts the viewer. A taken port or an address this machine does not have is a
 * `ViewerStartError` (`portInUse`, `badHost`).
 *
 * @example
 * const journal = openSqliteJournal("./loom.db", { readonly: true });
 * const viewer = await startViewer({ journal, port: 8090 });
 * console.log(viewer.url); // http://127.0.0.1:8090
 * await viewer.stop();
 */
export async function startViewer(options: ViewerOptions): Promise<Viewer> {
  const host = options.host ?? "127.0.0.1";
  const pages = new Pages({
    token: randomBytes(24).toString("base64url"),
    journal: options.journal,
    actions: options.actions,
    machine: agentLoopMachine,
    source: options.source ?? "journal",
    ...(options.resumeCommand ? { resumeCommand: options.resumeCommand } : {}),
  });
  const live = options.live ?? followSource(options.journal);
  const server: Server = createServer((req, res) => {
    handle(req, res, { pages, live, host }).catch((e) => fail(res, e));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) => {
      reject(
        e.code === "EADDRINUSE"
          ? new ViewerStartError(
              "portInUse",
              `port ${options.port} on ${host} is in use (another \`loom view\`?); pass --port <n>`,
            )
          : e.code === "EADDRNOTAVAIL" || e.code === "ENOTFOUND" || e.code === "EAI_AGAIN"
            ? new ViewerStartError(
                "badHost",
                `--host ${host}: not an address of this machine (${e.code}); pass one of its addresses, or leave --host out for 127.0.0.1`,
              )
            : e,
      );
    });
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${urlHost(host)}:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface Context {
  readonly pages: Pages;
  readonly live: LiveSource;
  readonly host: string;
}

async function handle(req: IncomingMessage, res: ServerResponse, { pages, live, host }: Context): Promise<void> {
  const url = new URL(req.url ?? "/", "http://viewer");
  const hostName = hostnameOf(req.headers.host);
  if (hostName === undefined || (!isLoopback(hostName) && hostName !== host.replace(/^\[|\]$/g, ""))) {
    return send(res, 421, "text/plain", "this viewer answers requests addressed to it only");
  }
  const segments = pathSegments(url.pathname);
  if (segments === undefined)
    return html(res, 400, problemPage("Bad address", `${url.pathname} is not URL-encoded`, "/"));
  const [top, runId, sub, ...rest] = segments;
  if (req.method === "POST") {
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${req.headers.host}`) {
      return send(res, 403, "text/plain", "forms are taken from this viewer's own pages only");
    }
    const form = new URLSearchParams(await body(req));
    const refused = tokenProblem(form.get(FORM_TOKEN_FIELD), origin !== undefined, pages.token);
    if (refused !== undefined) return send(res, 403, "text/plain", refused);
    if (top === "runs" && runId !== undefined && sub === "actions" && rest.length === 0 && pages.actions) {
      const outcome = await pages.act(runId, form);
      if (outcome.redirect) {
        res.writeHead(303, { location: outcome.redirect }).end();
        return;
      }
      return html(res, outcome.status, outcome.page ?? "");
    }
    return send(res, 405, "text/plain", "nothing to post here");
  }
  if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, "text/plain", "GET only");
  if (top === "assets" && runId === "viewer.css") return send(res, 200, "text/css; charset=utf-8", CSS, true);
  if (top === "assets" && runId === "viewer.js") return send(res, 200, "text/javascript; charset=utf-8", SCRIPT, true);
  if (top === "favicon.ico") return send(res, 204, "text/plain", "");
  if (top === undefined) {
    const session = url.searchParams.get("session") ?? undefined;
    return html(res, 200, await pages.runs(url.searchParams.get("status") ?? undefined, session));
  }
  if (top === "diff" && runId === undefined) {
    const a = url.searchParams.get("a");
    const b = url.searchParams.get("b");
    if (!a || !b) return html(res, 400, problemPage("Two runs needed", "open /diff?a=<runA>&b=<runB>", "/"));
    const diff = await pages.diff(a, b, url.searchParams.get("match"));
    return html(res, diff.status, diff.page);
  }
  if (top === "sessions" && runId !== undefined && sub === undefined) {
    const page = await pages.session(runId);
    return page === undefined
      ? html(res, 404, problemPage("No such session", `nothing was sent to session ${runId} in this journal`, "/"))
      : html(res, 200, page);
  }
  if (top === "runs" && runId !== undefined) {
    if (sub === undefined) {
      const page = await pages.run(runId, url.searchParams.get("part") === "run");
      return page === undefined ? notFoundRun(res, runId) : html(res, 200, page);
    }
    if (sub === "live" && rest.length === 0) {
      const render = await pages.liveRun(runId);
      if (render === undefined) return notFoundRun(res, runId);
      return serveLive(live, runId, req, res, Number(url.searchParams.get("after")) || 0, render);
    }
    if (sub === "travel") {
      const at =
        rest[0] === "at" && rest.length === 2 ? Number(rest[1]) : Number(url.searchParams.get("at") ?? Number.NaN);
      const page = await pages.travel(runId, at, rest[0] === "at");
      return page === undefined ? notFoundRun(res, runId) : html(res, 200, page);
    }
    if (sub === "steps" && rest.length === 1) {
      const step = await pages.step(runId, rest[0] as string);
      return html(res, step.status, step.page);
    }
  }
  return html(res, 404, problemPage("Not found", `nothing at ${url.pathname}`, "/"));
}

/**
 * Why a POST's form token refuses it, if it does. A browser sends the page's origin with a form
 * (checked before this); a request with no `Origin` at all is not known to come from this
 * viewer's pages, so it must carry their token. A token that is sent must be this server's.
 */
function tokenProblem(sent: string | null, hasOrigin: boolean, token: string): string | undefined {
  if (sent === null) {
    return hasOrigin
      ? undefined
      : "a form without an Origin header is taken only with this viewer's form token, which its own pages carry: post it from the viewer's page";
  }
  const a = Buffer.from(sent);
  const b = Buffer.from(token);
  if (a.length === b.length && timingSafeEqual(a, b)) return undefined;
  return "the form's token is not this viewer's (a page from an earlier start of the viewer?): reload the page and send it again";
}

/** The path's segments decoded (run ids may hold `/`, encoded as %2F), or undefined for a malformed escape. */
function pathSegments(pathname: string): string[] | undefined {
  try {
    return pathname
      .split("/")
      .filter(Boolean)
      .map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
}

function notFoundRun(res: ServerResponse, runId: string): void {
  html(res, 404, problemPage("No such run", `no run "${runId}" in this journal`, "/"));
}

function send(res: ServerResponse, status: number, type: string, text: string, cache = false): void {
  res.writeHead(status, {
    "content-type": type,
    "cache-control": cache ? "max-age=60" : "no-store",
    "x-content-type-options": "nosniff",
  });
  res.end(text);
}

/** A page, with a policy that lets it load only what this server serves. */
function html(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
  });
  res.end(text);
}

function fail(res: ServerResponse, e: unknown): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  // A refused action (an approval of no waiting call, a fork of an unknown step…) is the asker's to fix.
  const status = isActionFormError(e) ? 400 : isApprovalRefusedError(e) || isRunControlError(e) ? 409 : 500;
  const message = isLoomError(e) ? `${e.code}: ${e.message}` : e instanceof Error ? e.message : String(e);
  html(res, status, problemPage(status === 500 ? "Something went wrong" : "Cannot do that", message, "/"));
}

/** A form body (at most 64 kB). */
async function body(req: IncomingMessage): Promise<string> {
  let text = "";
  for await (const chunk of req) {
    text += String(chunk);
    if (text.length > 65_536) throw new Error("the form is larger than 64 kB");
  }
  return text;
}
