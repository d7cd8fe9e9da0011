import pg from "pg";
import { scriptedModel } from "../src/models/scripted.ts";
import { openPostgresJournal } from "../src/postgres.ts";
import { agentLoop$ } from "../src/runtime/agentLoop.ts";
import { rng, toolOutput } from "./support.ts";

const url = process.env.LOOM_PG_URL!;
const next = rng(21);
const outputs = Array.from({ length: 64 }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));
const turns = 20;
const loop = agentLoop$({
  id: "twenty",
  maxIterations: 21,
  model: scriptedModel(({ turn }) =>
    turn < turns
      ? { toolCalls: [{ id: `c${turn}`, name: "search", input: { q: turn } }] }
      : { content: "done", toolCalls: [] },
  ),
  tools: { search: { description: "search", execute: (input) => outputs[(input as { q: number }).q % 64] } },
});
const schema = "loom_st_probe";
const admin = new pg.Client({ connectionString: url });
await admin.connect();
await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
const j = openPostgresJournal(url, { schema });
for (let i = 0; i < 5; i++) await loop.run({ runId: `r${i}`, journal: j, input: "go" });
const { rows } = await admin.query(
  `SELECT t.type, count(*)::int n, avg(pg_column_size(e.*))::int row, avg(pg_column_size(e.data))::int data, avg(octet_length(e.data))::int raw, avg(coalesce(octet_length(e.frame),0))::int frame, avg(coalesce(octet_length(e.effect),0))::int effect, avg(coalesce(octet_length(e.digest),0))::int digest FROM ${schema}.loom_entries e JOIN ${schema}.loom_entry_types t ON t.code = e.type GROUP BY 1 ORDER BY 2 DESC`,
);
console.table(rows);
const ex = await admin.query(
  `SELECT type, frame, effect, left(data, 300) d FROM ${schema}.loom_entries WHERE run = (SELECT min(run) FROM ${schema}.loom_entries) ORDER BY seq LIMIT 8`,
);
for (const r of ex.rows) console.log(r);
await j.close();
await admin.query(`DROP SCHEMA ${schema} CASCADE`);
await admin.end();
