import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { openPostgresJournal } from "../../src/postgres.ts";
import { loom } from "../cli/support.ts";
import { approvalLoop, REFUND_STEP } from "../runtime/workers/approvalLoop.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

/** Counts the PostgreSQL journals the `loom` command opens (each a probe and a pool of its own). */
const opened = vi.hoisted(() => ({ count: 0 }));
vi.mock("../../src/cli/postgresJournal.ts", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../src/cli/postgresJournal.ts")>();
  return {
    ...real,
    openCliPostgresJournal: (...args: Parameters<typeof real.openCliPostgresJournal>) => {
      opened.count++;
      return real.openCliPostgresJournal(...args);
    },
  };
});

describe.skipIf(PG_URL === undefined)("loom show on PostgreSQL", () => {
  const url = PG_URL as string;
  const schema = freshSchema("showonce");
  const onPg = ["--pg", url, "--pg-schema", schema];

  beforeAll(async () => {
    const journal = openPostgresJournal(url, { schema });
    try {
      const { loop } = approvalLoop({ approvalTimeoutMs: 3_600_000 });
      await loop.run({ runId: "order-1", journal, input: "refund" }).catch(() => {});
    } finally {
      await journal.close();
    }
  });
  afterAll(() => dropSchema(schema));

  it("opens the journal once, whether the argument is a run, a waiting call or a step that ended", async () => {
    for (const arg of ["order-1", REFUND_STEP, "shop#turn:0:model"]) {
      opened.count = 0;
      const { code, stderr } = await loom(process.cwd(), ["show", arg, ...onPg]);
      expect(code, stderr).toBe(0);
      expect(opened.count, arg).toBe(1);
    }
  });
});
