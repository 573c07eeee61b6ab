// Drives agentd's POST /v1/ag-ui with @ag-ui/client's HttpAgent, and
// validates every frame the server sent with @ag-ui/core's schemas, also
// refusing fields the schemas do not name.
//
//   node agui.mjs run THREAD TEXT            a run with a new user message
//   node agui.mjs resume THREAD DECISIONS    a run resuming interrupts (JSON: [{id, approved, reason?, editedArgs?}])
//   node agui.mjs flow THREAD TEXT DECISION  run to the interrupts, then resume each with DECISION (JSON) on the same agent
//   node agui.mjs validate - FILE            validate each line of FILE (a frame) instead
//
// Prints one JSON line per run: {frames, problems, error, interrupts, messages}.
import { readFileSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";
import * as S from "@ag-ui/core/schemas";
import { deadline, env, print, recordingFetch } from "./lib.mjs";

deadline();
const { url, headers } = env();
const [cmd, threadId, arg, arg2] = process.argv.slice(2);

const byType = new Map(S.EventSchema.options.map((o) => [o.shape.type.value, o]));
const outcomes = {
  success: S.RunFinishedSuccessOutcomeSchema,
  interrupt: S.RunFinishedInterruptOutcomeSchema,
  cancelled: S.RunFinishedCancelledOutcomeSchema,
};

function extra(obj, schema, where, problems) {
  for (const k of Object.keys(obj)) {
    if (!(k in schema.shape)) problems.push(`${where}: field ${k} is not in the schema`);
  }
}

// validate returns what is wrong with one raw frame ([] when nothing).
export function validate(raw) {
  const problems = [];
  let ev;
  try {
    ev = JSON.parse(raw);
  } catch (e) {
    return [`not JSON: ${raw}`];
  }
  const parsed = S.EventSchema.safeParse(ev);
  if (!parsed.success) problems.push(`${ev.type}: ${parsed.error.message.slice(0, 400)}`);
  const schema = byType.get(ev.type);
  if (!schema) return [...problems, `unknown type ${ev.type}`];
  extra(ev, schema, ev.type, problems);
  if (!Number.isInteger(ev.timestamp) || ev.timestamp < 1e12) problems.push(`${ev.type}: timestamp ${ev.timestamp} is not epoch milliseconds`);
  if (ev.outcome) {
    const o = outcomes[ev.outcome.type];
    if (!o) problems.push(`outcome type ${ev.outcome.type}`);
    else extra(ev.outcome, o, "outcome", problems);
    for (const i of ev.outcome.interrupts ?? []) extra(i, S.InterruptSchema, "interrupt", problems);
  }
  return problems;
}

function newAgent(record) {
  return new HttpAgent({ url: `${url}/v1/ag-ui`, headers, threadId, fetch: recordingFetch(record) });
}

async function run(agent, record, params) {
  let error;
  try {
    await agent.runAgent(params);
  } catch (e) {
    error = String(e?.message ?? e);
  }
  await record.done;
  const frames = (record.frames ?? []).map((f) => JSON.parse(f));
  const problems = (record.frames ?? []).flatMap(validate);
  return { status: record.status, conversation: record.headers?.["x-agentd-conversation-id"], frames, problems, error,
    interrupts: agent.pendingInterrupts, messages: agent.messages };
}

function resumeOf(decisions) {
  return decisions.map((d) => d.cancel
    ? { interruptId: d.id, status: "cancelled" }
    : { interruptId: d.id, status: "resolved", payload: { approved: d.approved, ...(d.reason ? { reason: d.reason } : {}), ...(d.editedArgs ? { editedArgs: d.editedArgs } : {}) } });
}

const silence = console.error;
console.error = () => {}; // HttpAgent logs a failed run; the result says it

if (cmd === "validate") {
  const lines = readFileSync(arg, "utf8").split("\n").filter(Boolean);
  print({ frames: lines.length, problems: lines.flatMap(validate) });
} else if (cmd === "run") {
  const record = {};
  const agent = newAgent(record);
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: arg });
  print(await run(agent, record, { runId: crypto.randomUUID() }));
} else if (cmd === "resume") {
  const record = {};
  print(await run(newAgent(record), record, { runId: crypto.randomUUID(), resume: resumeOf(JSON.parse(arg)) }));
} else if (cmd === "flow") {
  const first = {};
  const agent = newAgent(first);
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: arg });
  const a = await run(agent, first, { runId: crypto.randomUUID() });
  print(a);
  const decision = JSON.parse(arg2);
  const second = {};
  agent.fetch = recordingFetch(second);
  const resume = resumeOf(agent.pendingInterrupts.map((i) => ({ id: i.id, ...decision })));
  print(await run(agent, second, { runId: crypto.randomUUID(), resume }));
} else {
  console.error = silence;
  console.error(`unknown command ${cmd}`);
  process.exit(2);
}
