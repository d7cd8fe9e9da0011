#!/usr/bin/env node
import { processIo } from "./io.ts";
import { main } from "./main.ts";

// Ctrl-C: the first one lets a long command (`loom inspect`) stop cleanly; a second one exits.
const interrupt = new AbortController();
process.once("SIGINT", () => {
  interrupt.abort();
  process.once("SIGINT", () => process.exit(130));
});

// `loom log … | head`: a closed pipe ends the command quietly, as it does for other tools.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw e;
  });
}

const code = await main(process.argv.slice(2), processIo(interrupt.signal));
process.exitCode = code;
// Sockets a browser keeps open (the inspector page) must not keep a finished command alive.
setTimeout(() => process.exit(code), 1000).unref();
