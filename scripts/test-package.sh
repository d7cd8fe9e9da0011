#!/usr/bin/env bash
# The package as users receive it: build, pack, lint the tarball (publint, attw), install it
# into a fresh project, type-check a consumer file and the README's quickstart against the
# shipped .d.ts, then run the quickstart and the `loom` bin with plain node (no tsx).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/loom-package-XXXXXX")"
trap 'rm -rf "$work"' EXIT
cd "$root"

npm pack --silent --pack-destination "$work" >"$work/pack.txt"   # runs prepack: the build
tarball="$work/$(tail -n 1 "$work/pack.txt")"
echo "packed $(basename "$tarball") ($(du -k "$tarball" | cut -f1) kB):"
tar -tzf "$tarball" | sed 's|^package/||' | grep -vE '^dist/.*\.(js|d\.ts)(\.map)?$' | sed 's/^/  /'
if tar -tzf "$tarball" | grep -qE '^package/(src|test|bench|node_modules)/'; then
  echo "the tarball ships sources, tests or benchmarks" >&2
  exit 1
fi

npx publint run "$tarball" --strict
npx attw "$tarball" --profile esm-only

consumer="$work/consumer"
mkdir -p "$consumer"
cat >"$consumer/package.json" <<'JSON'
{ "name": "loom-consumer", "private": true, "type": "module", "allowScripts": { "better-sqlite3": true } }
JSON
# No prebuilt binary can be downloaded here: build from source at once instead of timing out first.
(cd "$consumer" && npm_config_build_from_source=true npm install --no-audit --no-fund --loglevel=error "$tarball")

cp examples/quickstart.ts "$consumer/quickstart.ts"
cat >"$consumer/consumer.ts" <<'TS'
import {
  type AgentOutput,
  type AgentStep,
  agentLoop$,
  createJournal,
  isLeanAgentStep,
  type LeanAgentStep,
  memoryStore,
  rebuildToolCallLog,
  scriptedModel,
} from "loom";
import { fromAiSdk, isInvalidToolInput } from "loom/ai-sdk";

const journal = createJournal({ store: memoryStore({ json: true }) });
const loop = agentLoop$({ id: "consumer", model: scriptedModel([{ content: "hi", toolCalls: [] }]), toolCallLog: "lean" });
const out: AgentOutput = await loop.run({ runId: "c1", input: "hello", journal });
const lean: LeanAgentStep[] = out.toolCallLog.filter(isLeanAgentStep);
// @ts-expect-error the log may be lean: passing it where AgentStep[] is wanted needs a narrowing
const full: AgentStep[] = out.toolCallLog;
const rebuilt = await rebuildToolCallLog(journal, "c1", "full");
console.log(JSON.stringify({ content: out.content, lean: lean.length, full: full.length, rebuilt: rebuilt.length }));
void fromAiSdk;
void isInvalidToolInput;
TS
cat >"$consumer/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "target": "ES2023", "lib": ["ES2024"], "module": "NodeNext", "moduleResolution": "NodeNext",
    "strict": true, "noUncheckedIndexedAccess": true, "types": ["node"], "typeRoots": ["./types"],
    "skipLibCheck": true, "outDir": "out", "rootDir": "."
  },
  "files": ["consumer.ts", "quickstart.ts"]
}
JSON
# Node's types from the repository (the consumer installs nothing but loom).
mkdir -p "$consumer/types" && cp -r node_modules/@types/node "$consumer/types/node"
node node_modules/typescript/bin/tsc -p "$consumer/tsconfig.json"

cd "$consumer"
node out/consumer.js
node out/quickstart.js quickstart.db
npx --no-install loom --help >/dev/null
npx --no-install loom machine modePin --mermaid | head -n 3
npx --no-install loom runs --db quickstart.db
# Installed, the command's advice is npx, not the repository's npm scripts.
if npx --no-install loom runs --db missing.db 2>advice.txt; then exit 1; fi
grep -q 'run `npx loom demo` to make one' advice.txt || { cat advice.txt; exit 1; }
echo "package test passed"
