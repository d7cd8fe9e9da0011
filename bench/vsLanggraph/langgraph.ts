/**
 * The LangGraph.js side of bench/vs-langgraph.ts: the textbook agent graph (a StateGraph over
 * MessagesAnnotation, a model node, a ToolNode, a conditional edge back and forth) checkpointed
 * by @langchain/langgraph-checkpoint-sqlite's SqliteSaver. The model node is a deterministic
 * fake chat model: it answers turn i (the number of AI messages so far, as Loom's scriptedModel
 * counts turns) with one `lookup` tool call, and the last turn with a final answer. No network.
 */
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { END, MessagesAnnotation, MessagesDeltaValue, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { z } from "zod";

export const PROMPT = "look everything up";

/**
 * How the messages are kept: `"annotation"` is MessagesAnnotation (the textbook state: every
 * checkpoint holds the whole list); `"delta"` is LangGraph's experimental MessagesDeltaValue
 * (beta: checkpoints keep per-step deltas plus a full snapshot every 100 updates).
 */
export type MessagesState = "annotation" | "delta";

const DeltaMessages = new StateSchema({ messages: MessagesDeltaValue });

/** The compiled graph for one workload (tool outputs by turn), checkpointed into the file at `path`. */
export function langGraphAgent(
  outputs: readonly unknown[],
  path: string,
  options: { readonly messages?: MessagesState; readonly synchronous?: "normal" | "full" } = {},
) {
  const turns = outputs.length;
  const lookup = tool(
    // A chat model is fed text: the ToolMessage content is the output's JSON.
    async ({ n }: { n: number }) => JSON.stringify(outputs[n]),
    { name: "lookup", description: "looks things up", schema: z.object({ n: z.number() }) },
  );
  const model = async (state: typeof MessagesAnnotation.State) => {
    const turn = state.messages.filter((m) => AIMessage.isInstance(m)).length;
    const message =
      turn < turns
        ? new AIMessage({
            content: "",
            tool_calls: [{ id: `c${turn}`, name: "lookup", args: { n: turn }, type: "tool_call" }],
          })
        : new AIMessage({ content: "done" });
    return { messages: [message] };
  };
  const route = (state: typeof MessagesAnnotation.State) => {
    const last = state.messages.at(-1);
    return last && AIMessage.isInstance(last) && (last.tool_calls?.length ?? 0) > 0 ? "tools" : END;
  };
  const saver = SqliteSaver.fromConnString(path);
  // better-sqlite3 opens with synchronous NORMAL in WAL mode; FULL fsyncs every commit.
  if (options.synchronous === "full") saver.db.pragma("synchronous = FULL");
  // Both state definitions have one `messages` channel of BaseMessage[] with the messages reducer;
  // the graph is built once, typed as the textbook one.
  const state = (options.messages === "delta" ? DeltaMessages : MessagesAnnotation) as typeof MessagesAnnotation;
  const graph = new StateGraph(state)
    .addNode("model", model)
    .addNode("tools", new ToolNode([lookup]))
    .addEdge(START, "model")
    .addConditionalEdges("model", route, ["tools", END])
    .addEdge("tools", "model")
    .compile({ checkpointer: saver });
  // Two supersteps a turn (model, tools) plus the final model call, with room to spare.
  const config = (threadId: string) => ({ configurable: { thread_id: threadId }, recursionLimit: 2 * turns + 10 });
  return {
    graph,
    saver,
    /** Runs a thread from the prompt to the final answer. */
    run: (threadId: string) => graph.invoke({ messages: [new HumanMessage(PROMPT)] }, config(threadId)),
    /** Continues a thread from its last checkpoint (for a completed thread: its final state, nothing runs). */
    resume: (threadId: string) => graph.invoke(null, config(threadId)),
    /** The state of a thread's last checkpoint. */
    state: (threadId: string) => graph.getState(config(threadId)),
    close: () => saver.db.close(),
  };
}
