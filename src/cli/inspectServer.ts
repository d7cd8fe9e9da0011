import { spawn } from "node:child_process";
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocket, WebSocketServer } from "ws";
import { hostnameOf, isLoopback, urlHost } from "../viewer/host.ts";
import { CliError } from "./io.ts";

export { isLoopback, urlHost } from "../viewer/host.ts";

/**
 * The local server `loom inspect` feeds: a page that embeds the Stately inspector and a websocket
 * that relays every message one client sends (the replay) to the other clients (the page, and
 * the command's own probe). It listens on one host, 127.0.0.1 unless asked otherwise: the run's
 * tool calls (inputs and outputs) go to whoever connects. So it is fenced like `loom view`: it
 * answers only requests addressed to it by a loopback name or its own host (a DNS-rebinding page
 * cannot read it), refuses a websocket opened from another page's origin, and serves the page and
 * the websocket only to a client that presents the token in the address it prints (random per
 * start). A browser's websocket (one that sends an `Origin`) only listens: what it sends is dropped.
 */

/** Where the Stately inspector's page lives; the local page embeds it in a frame. */
const STATELY_INSPECTOR = "https://stately.ai/inspect";
/** Messages kept for a page that connects after the replay started. */
const KEPT = 500;

/** The warning `loom inspect --host` prints for a host other machines can reach (undefined for loopback). */
export function exposureWarning(host: string, port: number): string | undefined {
  if (isLoopback(host)) return undefined;
  return `warning: the inspector listens on ${host}:${port}, which other machines may reach: anyone who connects sees this run's tool calls, inputs and outputs. Leave --host out to keep it on 127.0.0.1.`;
}

/** The page: the inspector in a frame, fed the websocket's messages once it says it is ready. */
const page = (token: string) => `<!doctype html>
<html>
<head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>loom inspect</title>
<style>html, body, iframe { margin: 0; width: 100%; height: 100%; border: 0; }</style></head>
<body>
<iframe id="inspector" src="${STATELY_INSPECTOR}"></iframe>
<script>
  const frame = document.getElementById("inspector");
  const waiting = [];
  let ready = false;
  const deliver = (event) => frame.contentWindow.postMessage(event, "*");
  addEventListener("message", (e) => {
    if (e.data && e.data.type === "@statelyai.connected" && !ready) {
      ready = true;
      waiting.splice(0).forEach(deliver);
    }
  });
  const socket = new WebSocket("ws://" + location.host + "/?token=${token}");
  socket.onmessage = (m) => {
    const event = JSON.parse(m.data);
    if (ready) deliver(event);
    else waiting.push(event);
  };
</script>
</body>
</html>
`;

export interface InspectorServer {
  /** The page's address (http) and the websocket's (ws), each with the server's token. */
  readonly url: { readonly http: string; readonly ws: string };
  /** The port it listens on (a free one when asked for port 0). */
  readonly port: number;
  stop(): Promise<void>;
}

/** What refuses a request (status and text), or undefined when it may go on. */
type Refusal = { readonly status: number; readonly text: string } | undefined;

/**
 * Starts the server on `host:port` (port 0: a free one); a taken port or an address this machine
 * does not have is a CliError. The page and the websocket answer only the addresses in `url`.
 *
 * @example
 * const server = await startInspectorServer({ host: "127.0.0.1", port: 0 });
 * console.log(server.url.http); // http://127.0.0.1:43117/?token=…
 * await server.stop();
 */
export async function startInspectorServer(options: {
  readonly host: string;
  readonly port: number;
  readonly open?: boolean;
}): Promise<InspectorServer> {
  const { host, port } = options;
  const token = randomBytes(24).toString("base64url");
  const refusal = (req: IncomingMessage): Refusal => {
    const name = hostnameOf(req.headers.host);
    if (name === undefined || (!isLoopback(name) && name !== host.replace(/^\[|\]$/g, "")))
      return { status: 421, text: "this inspector answers requests addressed to it only" };
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://${req.headers.host}`)
      return { status: 403, text: "this inspector is read from its own page only" };
    if (!sameToken(new URL(req.url ?? "/", "http://inspector").searchParams.get("token"), token))
      return {
        status: 403,
        text: "open the address `loom inspect` printed: it carries this server's token (random per start)",
      };
    return undefined;
  };
  const http: Server = createServer((req, res) => {
    const refused = refusal(req);
    const headers = { "cache-control": "no-store", "referrer-policy": "no-referrer" };
    if (refused !== undefined)
      return void res.writeHead(refused.status, { ...headers, "content-type": "text/plain" }).end(refused.text);
    if (req.method !== "GET" && req.method !== "HEAD")
      return void res.writeHead(405, { ...headers, "content-type": "text/plain" }).end("GET only");
    res.writeHead(200, { ...headers, "content-type": "text/html; charset=utf-8" }).end(page(token));
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", (e: NodeJS.ErrnoException) => {
      reject(
        e.code === "EADDRINUSE"
          ? new CliError("portInUse", `port ${port} on ${host} is in use (another \`loom inspect\`?); pass --port <n>`)
          : e.code === "EADDRNOTAVAIL" || e.code === "ENOTFOUND" || e.code === "EAI_AGAIN"
            ? new CliError(
                "badHost",
                `--host ${host}: not an address of this machine (${e.code}); pass one of its addresses, or leave --host out for 127.0.0.1`,
              )
            : e,
      );
    });
    http.listen(port, host, () => resolve());
  });
  // Made once the port is ours: it re-emits the server's errors, which would then go unheard.
  const sockets = new WebSocketServer({
    server: http,
    verifyClient: ({ req }, done) => {
      const refused = refusal(req);
      if (refused === undefined) done(true);
      else done(false, refused.status, refused.text);
    },
  });
  const kept: string[] = [];
  sockets.on("connection", (socket, req) => {
    for (const message of kept) socket.send(message);
    if (req.headers.origin !== undefined) return; // a browser page: it only listens
    socket.on("message", (data) => {
      const message = String(data);
      kept.push(message);
      if (kept.length > KEPT) kept.shift();
      for (const other of sockets.clients)
        if (other !== socket && other.readyState === WebSocket.OPEN) other.send(message);
    });
  });
  const listening = (http.address() as AddressInfo).port;
  const base = `${urlHost(host)}:${listening}/?token=${token}`;
  const url = { http: `http://${base}`, ws: `ws://${base}` };
  if (options.open) openBrowser(url.http);
  return {
    url,
    port: listening,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const client of sockets.clients) client.terminate();
        sockets.close();
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
}

/** The token a request presents matches the server's (compared in constant time). */
function sameToken(sent: string | null, token: string): boolean {
  if (sent === null) return false;
  const a = Buffer.from(sent);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Best effort: the platform's opener, with the URL as an argument (no shell). */
function openBrowser(url: string): void {
  const [command, args] =
    process.platform === "darwin"
      ? ["open", [url]]
      : process.platform === "win32"
        ? ["cmd", ["/c", "start", "", url]]
        : ["xdg-open", [url]];
  const child = spawn(command, args as string[], { stdio: "ignore", detached: true });
  child.on("error", () => {});
  child.unref();
}
