#!/usr/bin/env bash
# The package as users receive it: build, pack, lint the tarball (publint, attw), install it under
# its name (loom-agent) into a fresh project with nothing else but what the examples import,
# type-check a consumer file and the README's examples against the shipped .d.ts with
# skipLibCheck: false and no @types/better-sqlite3, then run the quickstart, the AI SDK example
# the MCP and sub-agents examples and the `loom` bin with plain node (no tsx).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/loom-package-XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$root"

npm pack --silent --pack-destination "$work" >"$work/pack.txt"   # runs prepack: the build
tarball="$work/$(tail -n 1 "$work/pack.txt")"
# The README's install line (until the package is published) installs this very tarball.
grep -qF "npm install ../loom/$(basename "$tarball")" README.md ||
  { echo "README.md's install line does not name $(basename "$tarball"), the tarball npm pack writes" >&2; exit 1; }
tar -tzf "$tarball" | sed 's|^package/||' >"$work/files.txt"
echo "packed $(basename "$tarball") ($(du -k "$tarball" | cut -f1) kB):"
grep -vE '^dist/.*\.(js|d\.ts)$' "$work/files.txt" | sed 's/^/  /'
if grep -qE '^(src|test|bench|node_modules)/' "$work/files.txt"; then
  echo "the tarball ships sources, tests or benchmarks" >&2
  exit 1
fi
if grep -qE '\.map$' "$work/files.txt"; then
  echo "the tarball ships source maps, whose sources it does not ship" >&2
  exit 1
fi
grep -qx 'LICENSE' "$work/files.txt" || { echo "the tarball has no LICENSE" >&2; exit 1; }
# The packed README and guides link to the guides, their screenshots and the examples: each
# relative link (outside code) must name a file the tarball holds, so the installed docs work.
mkdir -p "$work/unpacked" && tar -xzf "$tarball" -C "$work/unpacked"
node --input-type=module -e '
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
const [dir, ...pages] = process.argv.slice(1);
const missing = [];
for (const page of pages) {
  let fenced = false;
  for (const line of readFileSync(join(dir, page), "utf8").split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced || line.startsWith("```")) continue;
    for (const [, path] of line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s#]*)[^)\s]*\)/g)) {
      if (path && !/^[a-z][a-z+.-]*:/i.test(path) && !existsSync(join(dir, dirname(page), path))) missing.push(`${page}: ${path}`);
    }
  }
}
if (missing.length) {
  console.error(`the packed docs link to files the tarball lacks:\n  ${missing.join("\n  ")}`);
  process.exit(1);
}
' "$work/unpacked/package" $(grep -E '\.md$' "$work/files.txt")

npx publint run "$tarball" --strict
npx attw "$tarball" --profile esm-only

consumer="$work/consumer"
mkdir -p "$consumer"
cat >"$consumer/package.json" <<'JSON'
{ "name": "loom-consumer", "private": true, "type": "module", "allowScripts": { "better-sqlite3": true } }
JSON
# The AI SDK example's packages at the versions the repository tests with (and @types/json-schema,
# which @ai-sdk/provider's .d.ts import without depending on it); Node's types for tsc.
version() { node -p "require('./node_modules/$1/package.json').version"; }
deps=("ai@$(version ai)" "@ai-sdk/provider@$(version @ai-sdk/provider)" "zod@$(version zod)")
deps+=("@types/json-schema@$(version @types/json-schema)" "@types/node@$(version @types/node)")
deps+=("@modelcontextprotocol/sdk@$(version @modelcontextprotocol/sdk)") # the MCP example's optional peer
# No prebuilt binary can be downloaded here: build from source at once instead of timing out first.
(cd "$consumer" && npm_config_build_from_source=true npm install --no-audit --no-fund --loglevel=error "$tarball" "${deps[@]}")
if [ -e "$consumer/node_modules/@types/better-sqlite3" ]; then
  echo "the consumer has @types/better-sqlite3: the check below would prove nothing" >&2
  exit 1
fi

cp examples/quickstart.ts examples/ai-sdk.ts examples/approvals.ts examples/mcp.ts examples/sub-agents.ts examples/use-chat.ts "$consumer/"
# loom-agent/mcp declares the client it needs structurally: no shipped JavaScript loads the MCP SDK.
# (Import statements start their line; the doc comments' examples, which name the SDK, do not.)
if grep -rlE --include='*.js' "^(import|export)[^*]*[\"']@modelcontextprotocol|import\([\"']@modelcontextprotocol" \
  "$consumer/node_modules/loom-agent/dist"; then
  echo "loom-agent's JavaScript imports @modelcontextprotocol/sdk: it must stay an optional peer" >&2
  exit 1
fi
# @opentelemetry/api is an optional peer too: only loom-agent/otel's own file imports it.
if grep -rlE --include='*.js' "^(import|export)[^*]*[\"']@opentelemetry" "$consumer/node_modules/loom-agent/dist" |
  grep -v '/dist/otel.js$'; then
  echo "loom-agent's JavaScript imports @opentelemetry/api outside loom-agent/otel: it must stay an optional peer" >&2
  exit 1
fi
cat >"$consumer/consumer.ts" <<'TS'
import {
  type AgentOutput,
  type AgentStep,
  agentLoop$,
  createJournal,
  isAgentInterruptedError,
  type LeanAgentStep,
  memoryStore,
  rebuildToolCallLog,
  scriptedModel,
  type Tool,
} from "loom-agent";
import * as loom from "loom-agent";
import { fromAiSdk, isInvalidToolInput } from "loom-agent/ai-sdk";
import { foldEntries, type JournalEntry, parseFrameId } from "loom-agent/journal";

const journal = createJournal({ store: memoryStore({ json: true }) });
const echo: Tool<{ text: string }> = { description: "echoes", execute: ({ text }) => ({ text }) };
const model = () =>
  scriptedModel([
    { toolCalls: [{ id: "e1", name: "echo", input: { text: "hi" } }] },
    { content: "hi", toolCalls: [] },
  ]);
// The log's type follows the configured mode: lean here, with no narrowing.
const lean = agentLoop$({ id: "consumer", model: model(), tools: { echo }, toolCallLog: "lean" });
const out: AgentOutput<"lean"> = await lean.run({ runId: "c1", input: "hello", journal });
const stepIds: string[] = out.toolCallLog.map((step: LeanAgentStep) => step.stepId);
// @ts-expect-error a lean log is not a full one
const notFull: AgentStep[] = out.toolCallLog;
// Unset, the mode is not known statically (a resume follows the recorded pin): ADR 0142 D5's union.
const unset = agentLoop$({ id: "consumer", model: model(), tools: { echo } });
const either: AgentOutput = await unset.run({ runId: "c1", journal });
// @ts-expect-error the log may be lean: passing it where AgentStep[] is wanted needs a narrowing
const full: AgentStep[] = either.toolCallLog;
const rebuilt: AgentStep[] = await rebuildToolCallLog(journal, "c1", "full");
const limited = agentLoop$({ id: "limited", model: model(), tools: { echo }, toolCallLog: "lean", maxIterations: 1 });
const stopped: unknown = await limited.run({ runId: "c2", input: "hello", journal }).catch((e) => e);
if (!isAgentInterruptedError(stopped, limited)) throw stopped;
const interrupted: string[] = stopped.run.toolCallLog.map((step) => step.stepId);
const seen = JSON.stringify({ content: out.content, stepIds, rebuilt: rebuilt.map((s) => s.toolOutput), interrupted });
const want = '{"content":"hi","stepIds":["consumer#turn:0:tool:0"],"rebuilt":[{"text":"hi"}],"interrupted":["limited#turn:0:tool:0"]}';
if (seen !== want) throw new Error(`consumer: got ${seen}, want ${want}`);
// The journal's internals come from loom-agent/journal, not from the front door.
const entries: JournalEntry[] = await loom.readJournal(journal, "c1");
if (foldEntries(entries).status !== "completed") throw new Error("consumer: the fold of c1 is not completed");
if (parseFrameId(stepIds[0] ?? "")?.kind !== "tool") throw new Error(`consumer: ${stepIds[0]} is not a tool step's id`);
if ("foldEntries" in loom || "parseFrameId" in loom) throw new Error("consumer: loom-agent exports journal internals");
console.log(`consumer: ${seen}`);
void [notFull, full, fromAiSdk, isInvalidToolInput];
TS
# Loom's own .d.ts, alone: the consumer file and the examples that import only loom-agent.
cat >"$consumer/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "target": "ES2023", "lib": ["ES2024"], "module": "NodeNext", "moduleResolution": "NodeNext",
    "strict": true, "noUncheckedIndexedAccess": true, "types": ["node"],
    "skipLibCheck": false, "outDir": "out", "rootDir": "."
  },
  "files": ["consumer.ts", "quickstart.ts", "approvals.ts", "sub-agents.ts"]
}
JSON
# The AI SDK example and the useChat route: the AI SDK's own .d.ts name fetch's DOM types (HeadersInit, FileList).
cat >"$consumer/tsconfig.ai-sdk.json" <<'JSON'
{ "extends": "./tsconfig.json", "compilerOptions": { "lib": ["ES2024", "DOM"] }, "files": ["ai-sdk.ts", "use-chat.ts"] }
JSON
node node_modules/typescript/bin/tsc -p "$consumer/tsconfig.json"
node node_modules/typescript/bin/tsc -p "$consumer/tsconfig.ai-sdk.json"
# The MCP example: the SDK's own .d.ts name DOM types too.
cat >"$consumer/tsconfig.mcp.json" <<'JSON'
{ "extends": "./tsconfig.json", "compilerOptions": { "lib": ["ES2024", "DOM"] }, "files": ["mcp.ts"] }
JSON
node node_modules/typescript/bin/tsc -p "$consumer/tsconfig.mcp.json"
echo "type-checked consumer.ts and the examples against the shipped .d.ts (skipLibCheck: false)"

cd "$consumer"
node out/consumer.js
node out/quickstart.js quickstart.db
node out/ai-sdk.js
node out/mcp.js
node out/sub-agents.js
npx --no-install loom --help >/dev/null
npx --no-install loom view --help >/dev/null # the viewer's dependencies (immer) come with the package
npx --no-install loom machine modePin --mermaid | head -n 3
npx --no-install loom runs --db quickstart.db
# Installed, the command's advice is npx, not the repository's npm scripts.
if npx --no-install loom runs --db missing.db 2>advice.txt; then exit 1; fi
grep -q 'run `npx loom demo` to make one' advice.txt || { cat advice.txt; exit 1; }
# pg is an optional peer the consumer did not install: a PostgreSQL journal asks for it by name.
if [ ! -e node_modules/pg ]; then
  if npx --no-install loom runs --pg postgres://loom@127.0.0.1:1/none 2>nopg.txt; then exit 1; fi
  grep -q 'npm install pg' nopg.txt || { cat nopg.txt; exit 1; }
fi
echo "package test passed"
