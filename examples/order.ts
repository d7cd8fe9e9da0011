import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { agentLoop$, eventWebhook, type Journal, openSqliteJournal, scriptedModel, type Tool } from "loom-agent";

/** An order agent: it asks for a payment, then waits (durably) for the payment provider's webhook. */
export function orderLoop(checkouts: { order: string; webhook: string }[], base: string) {
  const awaitPayment: Tool<{ order: string }> = {
    description: "creates a checkout and waits for its payment",
    execute: ({ order }, ctx) => {
      const wait = ctx.waitForEvent({ timeoutMs: 86_400_000, what: `payment of ${order}` });
      checkouts.push({ order, webhook: `${base}/events/${wait.token}` }); // in real life: payments.checkout(…)
      return wait; // the run stops here; the webhook's payload becomes this call's output
    },
  };
  const model = scriptedModel([
    { toolCalls: [{ id: "p", name: "awaitPayment", input: { order: "42" } }] },
    { content: "Order 42 is paid; it ships today.", toolCalls: [] },
  ]);
  return agentLoop$({ id: "orders", model, tools: { awaitPayment } });
}

/** A small server on loopback that takes the webhook and resumes the run it pays for. */
export async function serveEvents(journal: Journal, resume: (runId: string) => Promise<unknown>) {
  const events = eventWebhook(journal, { onDelivered: ({ runId }) => void resume(runId) });
  const server = createServer((req, res) => {
    if (req.url?.startsWith("/events/")) return void events(req, res);
    res.writeHead(404).end();
  });
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** The whole story: start the order, the provider POSTs the webhook (as curl would), the run completes. */
export async function order(file = "order.db", log = console.log) {
  const journal = openSqliteJournal(file);
  const runId = `order-${Date.now()}`;
  const checkouts: { order: string; webhook: string }[] = [];
  let finished: Promise<unknown> = Promise.resolve();
  const { server, base } = await serveEvents(journal, async (id) => (finished = loop.run({ runId: id, journal })));
  const loop = orderLoop(checkouts, base);
  const stopped = await loop.run({ runId, journal, input: "Buy order 42" }).catch((e) => e);
  log(`stopped: ${stopped.run.reason}; webhook: ${checkouts[0]?.webhook.slice(0, 40)}…`);
  // The payment provider calls back: curl -X POST -d '{"paid":4200}' <webhook>
  const webhook = checkouts[0]?.webhook ?? "";
  const first = await fetch(webhook, { method: "POST", body: JSON.stringify({ paid: 4200, currency: "EUR" }) });
  const again = await fetch(webhook, { method: "POST", body: JSON.stringify({ paid: 4200, currency: "EUR" }) });
  log(`webhook: ${first.status}, replayed: ${again.status}`); // 200, then 409: a token is single-use
  const output = (await finished) as Awaited<ReturnType<typeof loop.run>>;
  log(output.content, output.toolCallLog[0]);
  server.close();
  await journal.close();
  return { runId, statuses: [first.status, again.status], output };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) await order(process.argv[2]);
