/**
 * The event handlers on bad requests: a path whose token is not URL-encoded is refused with the
 * handlers' JSON shape (not a 500), a wrong method too, and a body over the limit is not read to
 * its end (counted in bytes pulled, never in time). Nothing is journaled by any of them.
 */

import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { eventFetchHandler, eventWebhook } from "../../src/runtime/control/eventHttp.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const RUN = "bad-1";
let journal: Journal;
let token = "";
let entries = 0;

beforeAll(async () => {
  const awaitPayment: Tool<{ order: string }> = {
    description: "waits for the payment webhook",
    execute: (_input, ctx) => {
      const wait = ctx.waitForEvent({ what: "payment" });
      token = wait.token;
      return wait;
    },
  };
  const model = scriptedModel([
    { toolCalls: [{ id: "p", name: "awaitPayment", input: { order: "o-1" } }] },
    { content: "paid", toolCalls: [] },
  ]);
  journal = jsonJournal();
  await agentLoop$({ id: "order", model, tools: { awaitPayment } })
    .run({ runId: RUN, journal, input: "sell" })
    .catch(() => {});
  entries = (await readJournal(journal, RUN)).length;
});

/** Last path segments that are not URL-encoded: decodeURIComponent throws on each. */
const MALFORMED = ["%", "%E0%A4%A", "%ZZ", "abc%4", "%FF", "%C0%80", "%ED%A0%80", `${"x".repeat(10)}%E0%A4`];

const MAX = 64 * 1024;

/** The webhook on a loopback server; `sockets` are the server's side of each connection. */
async function webhookServer(): Promise<{ server: Server; base: string; sockets: Socket[]; statuses: number[] }> {
  const handler = eventWebhook(journal, { maxBytes: MAX });
  const statuses: number[] = [];
  const server = createServer((req, res) => {
    res.on("finish", () => statuses.push(res.statusCode));
    void handler(req, res);
  });
  const sockets: Socket[] = [];
  server.on("connection", (socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, base: `127.0.0.1:${(server.address() as AddressInfo).port}`, sockets, statuses };
}

/** A raw request (fetch would normalise the path): its status and JSON body. */
function raw(base: string, method: string, path: string, body?: string) {
  const [host, port] = base.split(":") as [string, string];
  return new Promise<{ status: number; body: unknown }>((resolve, reject) => {
    const req = httpRequest({ host, port: Number(port), method, path }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Posts a chunked body that keeps coming (64 KiB a write, up to `total` bytes) until the server
 * answers or closes the connection; resolves with the status seen (0 for none) and bytes written.
 */
function endlessPost(base: string, path: string, total: number) {
  const [host, port] = base.split(":") as [string, string];
  return new Promise<{ status: number; written: number }>((resolve) => {
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let written = 0;
    let status = 0;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      req.destroy();
      resolve({ status, written });
    };
    const req = httpRequest({ host, port: Number(port), method: "POST", path, agent: false }, (res) => {
      status = res.statusCode ?? 0;
      res.resume();
      res.on("end", finish);
      res.on("error", finish);
    });
    req.on("error", finish);
    req.on("close", () => setImmediate(finish));
    const pump = () => {
      while (!done && written < total) {
        written += chunk.length;
        if (!req.write(chunk)) return void req.once("drain", pump);
      }
      if (!done && written >= total) req.end();
    };
    pump();
  });
}

describe("eventWebhook on bad requests", () => {
  let server: Awaited<ReturnType<typeof webhookServer>>;
  beforeAll(async () => {
    server = await webhookServer();
  });
  afterAll(() => {
    server.server.close();
    server.server.closeAllConnections();
  });

  it.each(MALFORMED)("POST /events/%s: 404 eventUnknownToken with a message, not a 500", async (segment) => {
    const r = await raw(server.base, "POST", `/events/${segment}`, '{"paid":1}');
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ error: "eventUnknownToken", message: expect.stringContaining("not URL-encoded") });
    expect((await readJournal(journal, RUN)).length).toBe(entries);
  });

  it.each(["GET", "PUT", "DELETE", "PATCH"])("%s with a malformed path: 405, its shape", async (method) => {
    const r = await raw(server.base, method, "/events/%E0%A4%A");
    expect(r.status).toBe(405);
    expect(r.body).toEqual({ error: "methodNotAllowed", message: expect.any(String) });
  });

  it("stops reading a body that keeps coming once it passes maxBytes: 413, the rest never pulled", async () => {
    const before = server.sockets.length;
    const total = 32 * 1024 * 1024;
    const client = await endlessPost(server.base, `/events/${encodeURIComponent(token)}`, total);
    const socket = server.sockets[before];
    expect(socket).toBeDefined();
    await new Promise<void>((resolve) => (socket?.destroyed ? resolve() : socket?.once("close", () => resolve())));
    expect(server.statuses.at(-1)).toBe(413);
    // The limit, plus what was already buffered when reading stopped: far from the 32 MiB offered.
    expect(socket?.bytesRead).toBeLessThan(1024 * 1024);
    expect(client.written).toBeLessThan(total);
    expect([0, 413]).toContain(client.status); // the client may see the close before the answer
    expect((await readJournal(journal, RUN)).length).toBe(entries);
  });

  it("refuses a content-length over maxBytes without reading the body", async () => {
    const [host, port] = server.base.split(":") as [string, string];
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        { host, port: Number(port), method: "POST", path: `/events/${encodeURIComponent(token)}` },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.setHeader("content-length", String(MAX + 1));
      req.write("{"); // the rest never comes: the answer must not wait for it
    });
    expect(status).toBe(413);
    expect((await readJournal(journal, RUN)).length).toBe(entries);
  });
});

describe("eventFetchHandler on bad requests", () => {
  const handle = () => eventFetchHandler(journal, { maxBytes: MAX });

  it.each(MALFORMED)("POST /events/%s: 404 eventUnknownToken with a message, not a 500", async (segment) => {
    const r = await handle()(new Request(`http://localhost/events/${segment}`, { method: "POST", body: "{}" }));
    expect(r.status).toBe(404);
    expect(await r.json()).toEqual({ error: "eventUnknownToken", message: expect.stringContaining("not URL-encoded") });
    expect((await readJournal(journal, RUN)).length).toBe(entries);
  });

  it("cancels a streamed body once it passes maxBytes: 413, the rest never pulled", async () => {
    const chunk = new Uint8Array(16 * 1024).fill(0x61);
    const total = 300 * 1024 * 1024;
    let pulled = 0;
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (pulled >= total) return controller.close();
          pulled += chunk.byteLength;
          controller.enqueue(chunk);
        },
        cancel() {
          cancelled = true;
        },
      },
      { highWaterMark: 0 },
    );
    const r = await handle()(
      new Request(`http://localhost/events/${encodeURIComponent(token)}`, {
        method: "POST",
        body,
        duplex: "half",
      } as RequestInit),
    );
    expect(r.status).toBe(413);
    expect(await r.json()).toEqual({ error: "payloadTooLarge", message: `at most ${MAX} bytes` });
    expect(pulled).toBeLessThanOrEqual(MAX + 2 * chunk.byteLength);
    expect(cancelled).toBe(true);
    expect((await readJournal(journal, RUN)).length).toBe(entries);
  });

  it("refuses a declared content-length over maxBytes before pulling anything", async () => {
    const chunk = new Uint8Array(64 * 1024);
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled === 128) return controller.close(); // 8 MiB in all
        pulled += 1;
        controller.enqueue(chunk);
      },
    });
    const r = await handle()(
      new Request(`http://localhost/events/${encodeURIComponent(token)}`, {
        method: "POST",
        body,
        duplex: "half",
        headers: { "content-length": String(MAX + 1) },
      } as RequestInit),
    );
    expect(r.status).toBe(413);
    expect(pulled).toBeLessThanOrEqual(1); // a stream pulls once when it is made
  });
});
