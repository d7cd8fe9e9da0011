/**
 * Sub-agents in the parent's inspector: a child run's statechart is an actor tree
 * of its own (`loop.run` creates it), so `agentTool` hands the child an `inspect` that shows
 * that tree as a branch of the parent's: the child's root actor as a child of the parent's call
 * actor (`call:<index>`, the one running the tool), and every event of the child's tree rooted
 * at the parent's root. A grandchild's events go through the child's `inspect` in turn, so a
 * chain is one tree. Nothing changes when the parent is not inspected.
 */
import type { AnyActorRef, InspectionEvent } from "xstate";
import { parseFrameId } from "../../events/ids.ts";

/** An inspected run, as its context (`RunContext`) holds it while it runs. */
export interface RunInspector {
  readonly tell: (event: InspectionEvent) => void;
  /** The run's root actor: its children are the calls going now. */
  readonly actor: AnyActorRef;
}

/**
 * The `inspect` for the sub-agent run of the inspected run `parent`'s call `stepId`. Called
 * through the run's context (`RunContext.inspectionBelow`) by `agentTool`, and by `loom inspect`'s
 * replay of a sub-agent's run.
 */
export function inspectorBelow(parent: RunInspector, stepId: string): (event: InspectionEvent) => void {
  const parsed = parseFrameId(stepId);
  const callId = `call:${parsed?.kind === "tool" ? parsed.index : -1}`;
  let call: AnyActorRef | undefined;
  const shown = new WeakMap<AnyActorRef, AnyActorRef>();
  return (event) => {
    let actorRef = event.actorRef as AnyActorRef;
    // The child's root actor (the one its tree is rooted at) shows as a child of the call running it.
    if (actorRef.sessionId === event.rootId) {
      // A tool agentTool made runs as its own chart; one wrapped by the caller (no longer known as a
      // sub-agent's) runs in the run's plainCalls actor, which is then the closest actor to show it under.
      const children = (parent.actor.getSnapshot() as { children?: Record<string, AnyActorRef | undefined> }).children;
      call ??= children?.[callId] ?? children?.plainCalls;
      if (call !== undefined) {
        let as = shown.get(actorRef);
        if (as === undefined) shown.set(actorRef, (as = underCall(actorRef, call)));
        actorRef = as;
      }
    }
    parent.tell({ ...event, actorRef, rootId: parent.actor.sessionId } as InspectionEvent);
  };
}

/**
 * `actor` as an inspector sees it: its parent the call actor `call`, everything else its own. An
 * inspector names an actor's parent by its session id (`_parent.sessionId`, as @statelyai/inspect
 * reads it), so one level is enough: the call's own parents are those of the parent's tree.
 */
const underCall = (actor: AnyActorRef, call: AnyActorRef): AnyActorRef =>
  new Proxy(actor, { get: (target, key) => (key === "_parent" ? call : Reflect.get(target, key, target)) });
