import { expect } from "vitest";
import {
  type AnyEventObject,
  type AnyStateMachine,
  type AnyStateNode,
  type AnyTransitionDefinition,
  getMicrosteps,
  getNextTransitions,
  getStateNodes,
  type SnapshotFrom,
} from "xstate";

/** Coverage of a statechart by xstate/graph: what a machine defines, and what an event takes. */

/** Every transition the machine defines (`on`, invoke onDone/onError, `always`), labelled. */
export function definedTransitions(m: AnyStateMachine): Map<AnyTransitionDefinition, string> {
  const labels = new Map<AnyTransitionDefinition, string>();
  const label = (t: AnyTransitionDefinition, i: number) =>
    `${t.source.id} --${t.eventType || "always"}[${i}]--> ${t.target?.map((n) => n.id).join(",") ?? "(stays)"}`;
  const visit = (node: AnyStateNode) => {
    for (const list of [...node.transitions.values(), node.always ?? []]) {
      for (const [i, t] of list.entries()) labels.set(t, label(t, i));
    }
    for (const child of Object.values(node.states)) visit(child);
  };
  visit(m.root);
  return labels;
}

/** Every state node id below the root. */
export function definedStates(m: AnyStateMachine): Set<string> {
  const ids = new Set<string>();
  const visit = (node: AnyStateNode) => {
    if (node !== m.root) ids.add(node.id);
    for (const child of Object.values(node.states)) visit(child);
  };
  visit(m.root);
  return ids;
}

export const activeIds = (m: AnyStateMachine, snapshot: SnapshotFrom<AnyStateMachine>) =>
  new Set(
    getStateNodes(m.root, snapshot.value)
      .filter((n) => n !== m.root)
      .map((n) => n.id),
  );

/**
 * The transitions one event takes from `from`, microstep by microstep (eventless ones included),
 * and the states it passes through on the way.
 */
export function walk(m: AnyStateMachine, from: SnapshotFrom<AnyStateMachine>, event: AnyEventObject) {
  const taken: AnyTransitionDefinition[] = [];
  const visited: string[] = [];
  let previous = from;
  getMicrosteps(m, from, event).forEach(([next], i) => {
    const active = activeIds(m, next);
    if (i === 0) taken.push(...m.getTransitionData(previous, event));
    else {
      const eventless = getNextTransitions(previous).filter(
        (t) => t.eventType === "" && (t.target ?? []).every((n) => active.has(n.id)),
      );
      expect(eventless).toHaveLength(1);
      taken.push(...eventless);
    }
    visited.push(...active);
    previous = next;
  });
  return { taken, visited };
}
