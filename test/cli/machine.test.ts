import { describe, expect, it } from "vitest";
import type { AnyStateMachine } from "xstate";
import { MACHINES } from "../../src/cli/commands/machine.ts";
import { mermaidId } from "../../src/cli/mermaid.ts";
import { agentLoopMachine, modePinMachine, toolCallMachine } from "../../src/journal.ts";
import { loom } from "./support.ts";

interface StateNodeLike {
  readonly id: string;
  readonly key: string;
  readonly type: string;
  readonly states: Record<string, StateNodeLike>;
  readonly transitions: Map<string, { target?: StateNodeLike[] }[]>;
  readonly always?: { target?: StateNodeLike[] }[];
}

/** Every state node under the root, depth first. */
const statesOf = (node: StateNodeLike): StateNodeLike[] =>
  Object.values(node.states).flatMap((child) => [child, ...statesOf(child)]);

/**
 * A parser for the subset of mermaid's stateDiagram-v2 grammar the generator writes (checked
 * against mermaid 11's own parser when the README's diagrams were made): it returns the declared
 * states (id → label and parent composite) and the edges, and throws on any other line.
 */
function parseStateDiagram(text: string) {
  const lines = text.split("\n");
  if (lines[0] !== "stateDiagram-v2") throw new Error(`not a state diagram: ${lines[0]}`);
  const states = new Map<string, { label: string; parent: string | undefined }>();
  const edges: { from: string; to: string; label?: string }[] = [];
  const stack: string[] = [];
  const ID = "[A-Za-z_][A-Za-z0-9_]*";
  for (const [n, raw] of lines.slice(1).entries()) {
    const line = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = new RegExp(`^state "([^"]+)" as (${ID})( \\{)?$`).exec(line))) {
      states.set(m[2] as string, { label: m[1] as string, parent: stack.at(-1) });
      if (m[3]) stack.push(m[2] as string);
    } else if ((m = new RegExp(`^state (${ID}) \\{$`).exec(line))) {
      states.set(m[1] as string, { label: m[1] as string, parent: stack.at(-1) });
      stack.push(m[1] as string);
    } else if (line === "}") {
      if (!stack.pop()) throw new Error(`line ${n + 2}: } closes nothing`);
    } else if ((m = new RegExp(`^(\\[\\*\\]|${ID}) --> (\\[\\*\\]|${ID})(?: : ([^;#{}\\n]+))?$`).exec(line))) {
      edges.push({ from: m[1] as string, to: m[2] as string, ...(m[3] ? { label: m[3] } : {}) });
    } else {
      throw new Error(`line ${n + 2} is not a statement of stateDiagram-v2: ${raw}`);
    }
  }
  if (stack.length > 0) throw new Error(`unclosed composite state ${stack.at(-1)}`);
  return { states, edges };
}

describe("loom machine --mermaid", () => {
  it.each([
    ["agentLoop", agentLoopMachine],
    ["modePin", modePinMachine],
    ["toolCall", toolCallMachine],
  ] as [string, AnyStateMachine][])(
    "%s parses as a state diagram with every state and transition",
    async (name, machine) => {
      const { code, stdout } = await loom(".", ["machine", name, "--mermaid"]);
      expect(code).toBe(0);
      const { states, edges } = parseStateDiagram(stdout.trimEnd());
      const nodes = statesOf(machine.root as unknown as StateNodeLike);
      expect([...states.keys()].sort()).toEqual(nodes.map((s) => mermaidId(s)).sort());
      for (const node of nodes) {
        const parent = node.id.split(".").slice(1, -1).join("_") || undefined;
        expect(states.get(mermaidId(node)), node.id).toEqual({ label: node.key, parent });
        // Every transition of the node is an edge from it (a targetless one loops back to it).
        const transitions = [...[...node.transitions.values()].flat(), ...(node.always ?? [])];
        for (const t of transitions) {
          const target = t.target?.[0] ?? node;
          expect(
            edges.some((e) => e.from === mermaidId(node) && e.to === mermaidId(target)),
            `${node.id} → ${target.id}`,
          ).toBe(true);
        }
        if (node.type === "final") expect(edges).toContainEqual({ from: mermaidId(node), to: "[*]" });
      }
      expect(edges.filter((e) => e.from === "[*]").length).toBe(1 + nodes.filter((s) => s.type === "compound").length);
    },
  );

  it("labels invoked actors' done/error, always transitions and inline guards", async () => {
    const { stdout } = await loom(".", ["machine", "agentLoop", "--mermaid"]);
    expect(stdout).toContain("starting --> completed : prepare done [output.kind = completed]");
    expect(stdout).toContain("starting --> failing : prepare error");
    expect(stdout).toContain("starting --> cancelling : prepare done [cancelNoted]<br>prepare error [cancelNoted]");
    expect(stdout).toContain("failing --> failed : end done<br>end error");
    expect(stdout).toContain("running_deciding --> running_callingModel : always [withinLimit]");
    expect(stdout).toContain(
      "running_dispatching --> interrupting : always [open = 0 and (pending.length > 0 or waiting.length > 0)]",
    );
    expect(stdout).toContain("running --> failing : modelCalls error<br>plainCalls error");
    expect(stdout).toContain("running_callingModel --> interrupting : MODEL.DONE [not output.ok]");
    expect(stdout).toContain("running --> interrupting : ABORT");
    expect(stdout).toContain("running --> cancelling : CANCEL");
    expect(stdout).toContain("running --> lost : LOST");
  });
});

describe("loom machine --json", () => {
  it.each(Object.entries(MACHINES))("%s prints machine.toJSON()", async (name, machine) => {
    const { code, stdout } = await loom(".", ["machine", name, "--json"]);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toEqual(JSON.parse(JSON.stringify(machine.toJSON())));
  });

  it("exits 2 for an unknown machine, or without exactly one of --json and --mermaid", async () => {
    expect(await loom(".", ["machine", "nope", "--mermaid"])).toMatchObject({
      code: 2,
      stderr: 'loom: no machine "nope"; choose one of agentLoop, modePin, toolCall (see --help)\n',
    });
    // With --json the error is JSON too, on stdout.
    const json = await loom(".", ["machine", "nope", "--json"]);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toEqual({
      error: { code: "usage", message: 'no machine "nope"; choose one of agentLoop, modePin, toolCall' },
    });
    expect((await loom(".", ["machine", "modePin"])).code).toBe(2);
    expect((await loom(".", ["machine", "modePin", "--json", "--mermaid"])).code).toBe(2);
  });
});
