import { openSqliteJournal } from "../../src/events/journal.ts";
import { tempDir } from "../events/tmp.ts";
import { jsonJournal } from "../support/loop.ts";
import { eventTokenContract } from "./eventTokenContract.ts";

/** A forged, a reused and an expired event token, refused with nothing journaled: memory and SQLite (PostgreSQL: test/postgres/eventTokens.test.ts). */
eventTokenContract("memory", async () => ({ journal: jsonJournal() }));

eventTokenContract("SQLite", async () => {
  const dir = tempDir("loom-event-tokens-");
  const journal = openSqliteJournal(dir.file("tokens.db"));
  return {
    journal,
    close: async () => {
      await journal.close();
      dir.remove();
    },
  };
});
