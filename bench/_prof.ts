import { existsSync } from "node:fs";
import { agentLoop$, openSqliteJournal, scriptedModel } from "../src/index.ts";
const TURNS = 2000;
const model = scriptedModel(({ turn }) => ({ toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }] }));
const loop = agentLoop$({ id: "resume", model, tools: { lookup: { description: "x", execute: (i: any) => ({ v: "x".repeat(2000), n: i.n }) } }, maxIterations: TURNS });
const file = "/tmp/prof/a.db";
const fresh = !existsSync(file);
let j = openSqliteJournal(file, { synchronous: "normal" });
if (fresh) { await loop.run({ runId: "long", input: "go", journal: j }).catch(() => {}); process.exit(0); }
await j.close();
for (let i = 0; i < 8; i++) {
  j = openSqliteJournal(file);
  const t = performance.now();
  await loop.run({ runId: "long", journal: j }).catch(() => {});
  console.log("resume ms", Math.round(performance.now() - t));
  await j.close();
}
