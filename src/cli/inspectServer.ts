import { spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import { WebSocket, WebSocketServer } from "ws";
import { isLoopback, urlHost } from "../viewer/host.ts";
import { CliError } from "./io.ts";

export { isLoopback, urlHost } from "../viewer/host.ts";

/**
 * The local server `loom inspect` feeds: a page that embeds the Stately inspector and a websocket
 * that relays every message one client sends (the replay) to the other clients (the page, and
 * the command's own probe). It listens on one host, 127.0.0.1 unless asked otherwise: the run's
 * tool calls (inputs and outputs) go to whoever connects.
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
const page = () => `<!doctype html>
<html>
<head><meta charset="utf-8"><title>loom inspect</title>
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
  const socket = new WebSocket("ws://" + location.host);
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
  /** The page's address (http) and the websocket's (ws). */
  readonly url: { readonly http: string; readonly ws: string };
  stop(): Promise<void>;
}

/** Starts the server on `host:port`; a taken port or an address this machine does not have is a CliError. */
export async function startInspectorServer(options: {
  readonly host: string;
  readonly port: number;
  readonly open?: boolean;
}): Promise<InspectorServer> {
  const { host, port } = options;
  const http: Server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(page());
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
  const sockets = new WebSocketServer({ server: http });
  const kept: string[] = [];
  sockets.on("connection", (socket) => {
    for (const message of kept) socket.send(message);
    socket.on("message", (data) => {
      const message = String(data);
      kept.push(message);
      if (kept.length > KEPT) kept.shift();
      for (const other of sockets.clients)
        if (other !== socket && other.readyState === WebSocket.OPEN) other.send(message);
    });
  });
  const base = `${urlHost(host)}:${port}`;
  const url = { http: `http://${base}`, ws: `ws://${base}` };
  if (options.open) openBrowser(url.http);
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const client of sockets.clients) client.terminate();
        sockets.close();
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
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
