// nmem for OpenCode: sends the session's prompts, tool calls and idle/compaction events to nmem's
// hook command, one process per event with the event as JSON on stdin (what Claude Code's hooks do).
// Written by `nmem install opencode`, which fills in NMEM_COMMAND; `nmem uninstall opencode` removes it.
// OpenCode plugin API (opencode.ai/docs/plugins): `event` ({event: {type, properties}}),
// `chat.message` (input {sessionID}, output {message, parts}), `tool.execute.before` (input {tool,
// sessionID, callID}, output {args}), `tool.execute.after` (same input, output {title, output, metadata}).
// The agent's reply: `message.updated` ({info: {id, sessionID, role, time}}) says which messages are the
// assistant's, `message.part.updated` ({part: {id, messageID, sessionID, type, text, synthetic}}) streams
// their text; at `session.idle` the last assistant message's text goes with the event, as
// `last_assistant_message` (what Claude Code's Stop hook carries).
import { spawn } from "node:child_process"

const NMEM_COMMAND = ["nmem-memory", "record", "--agent", "opencode"]

export const NmemPlugin = async ({ directory, worktree }) => {
  const cwd = worktree && worktree !== "/" ? worktree : directory
  const pending = new Map()  // callID -> the tool's args, read before it runs
  const replies = new Map()  // sessionID -> {id, parts: Map(partID -> text)} of its latest assistant message

  const send = (payload) =>
    new Promise((resolve) => {
      try {
        const child = spawn(NMEM_COMMAND[0], NMEM_COMMAND.slice(1), { stdio: ["pipe", "ignore", "ignore"] })
        child.on("error", () => resolve())  // nmem missing: the agent goes on
        child.on("close", () => resolve())
        child.stdin.end(JSON.stringify({ cwd, ...payload }))
      } catch {
        resolve()
      }
    })

  const text = (parts) =>
    (Array.isArray(parts) ? parts : [])
      .filter((p) => p && p.type === "text" && !p.synthetic && typeof p.text === "string")
      .map((p) => p.text)
      .join("\n")

  const noteMessage = (info) => {
    if (!info || info.role !== "assistant" || !info.id || !info.sessionID) return
    const latest = replies.get(info.sessionID)
    if (!latest || latest.id !== info.id) replies.set(info.sessionID, { id: info.id, parts: new Map() })
  }

  const notePart = (part) => {
    if (!part || part.type !== "text" || part.synthetic || typeof part.text !== "string") return
    const latest = replies.get(part.sessionID)
    if (latest && latest.id === part.messageID) latest.parts.set(part.id, part.text)
  }

  const reply = (sessionID) => {
    const latest = replies.get(sessionID)
    replies.delete(sessionID)
    return latest ? [...latest.parts.values()].join("\n").trim() : ""
  }

  return {
    event: async ({ event }) => {
      const props = (event && event.properties) || {}
      if (event.type === "message.updated") {
        noteMessage(props.info)
      } else if (event.type === "message.part.updated") {
        notePart(props.part)
      } else if (event.type === "session.created" && props.info && props.info.id) {
        await send({ hook_event_name: "session.created", session_id: props.info.id })
      } else if (event.type === "session.idle" && props.sessionID) {
        const text = reply(props.sessionID)
        await send({ hook_event_name: "session.idle", session_id: props.sessionID,
                     ...(text ? { last_assistant_message: text } : {}) })
      } else if (event.type === "session.compacted" && props.sessionID) {
        await send({ hook_event_name: "session.compacted", session_id: props.sessionID })
      }
    },
    "chat.message": async (input, output) => {
      const prompt = text(output && output.parts)
      if (input && input.sessionID && prompt) {
        await send({ hook_event_name: "chat.message", session_id: input.sessionID, prompt })
      }
    },
    "tool.execute.before": async (input, output) => {
      if (input && input.callID) pending.set(input.callID, (output && output.args) || {})
    },
    "tool.execute.after": async (input, output) => {
      if (!input || !input.sessionID) return
      const args = pending.get(input.callID) || {}
      pending.delete(input.callID)
      await send({
        hook_event_name: "tool.execute.after", session_id: input.sessionID, tool: input.tool, args,
        title: output && output.title, output: output && output.output, metadata: (output && output.metadata) || {},
      })
    },
  }
}
