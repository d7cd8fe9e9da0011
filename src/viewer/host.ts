import { isIP } from "node:net";
import { errorGuard } from "../core/errors.ts";
import { LoomError } from "../index.ts";

/** Host names and the viewer's start errors: shared by `startViewer` and `loom inspect`'s server. */

/** `host` reaches this machine only: 127.0.0.0/8, ::1, localhost. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  if (h === "localhost" || h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
  return isIP(h) === 4 && h.startsWith("127.");
}

/** The host name a request is addressed to (its `Host` header, no port, no brackets), or undefined when it names none. */
export function hostnameOf(header: string | undefined): string | undefined {
  try {
    return new URL(`http://${header ?? ""}`).hostname.replace(/^\[|\]$/g, "") || undefined;
  } catch {
    return undefined;
  }
}

/** `host` as it goes in a URL (IPv6 in brackets); a wildcard address is reached through loopback. */
export function urlHost(host: string): string {
  if (host === "0.0.0.0") return "127.0.0.1";
  if (host === "::") return "[::1]";
  return isIP(host) === 6 ? `[${host}]` : host;
}

/**
 * The viewer could not listen: `portInUse` (another server has the port) or `badHost` (not an
 * address of this machine). The message names the port or host and what to pass instead.
 */
export class ViewerStartError extends LoomError {
  declare readonly code: "portInUse" | "badHost";
  constructor(code: "portInUse" | "badHost", message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** True when `e` is a {@link ViewerStartError}. */
export const isViewerStartError = errorGuard(ViewerStartError);
