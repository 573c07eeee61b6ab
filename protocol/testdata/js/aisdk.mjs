// Drives agentd's POST /v1/ai-sdk/chat with the AI SDK's own chat client
// (AbstractChat, what useChat wraps, over DefaultChatTransport, approving
// with addToolApprovalResponse and sendAutomaticallyWhen as a useChat page
// does), and validates every chunk the server sent with the SDK's
// uiMessageChunkSchema, also refusing fields the SDK's chunk type does not
// name.
//
//   node aisdk.mjs chat CHAT TEXT [DECISION]   send TEXT; when approvals are requested and DECISION
//                                              (JSON {approved, reason?}) is given, answer each with it
//   node aisdk.mjs raw CHAT BODY               POST BODY (JSON, the chat id set) through DefaultChatTransport
//                                              and read the stream with readUIMessageStream
//   node aisdk.mjs resume CHAT TEXT GATE       send TEXT, cut the stream as a dropped network would once a
//                                              tool-input-available chunk came, then, as a reloaded useChat page
//                                              with resume: true does, a new chat with the messages it had calls
//                                              resumeStream() (GET …/CHAT/stream); once that response has started,
//                                              create the file GATE (the test's tool waits for it)
//   node aisdk.mjs validate - FILE             validate each line of FILE (a chunk) instead
//
// Prints one JSON line: {requests: [{status, frames, problems}], messages, error}.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, readUIMessageStream, uiMessageChunkSchema } from "ai";
import { deadline, env, print, recordingFetch } from "./lib.mjs";

deadline();
const { url, headers } = env();
const [cmd, chatId, arg, arg2] = process.argv.slice(2);

// The fields of each chunk type, read from the installed SDK's own
// declaration of UIMessageChunk.
const allowed = (() => {
  const dts = readFileSync(createRequire(import.meta.url).resolve("ai").replace(/index\.js$/, "index.d.ts"), "utf8");
  const start = dts.indexOf("type UIMessageChunk<METADATA");
  const block = dts.slice(start, dts.indexOf("type InferUIMessageChunk", start));
  const out = new Map();
  for (const member of block.split(/\n\} \| \{\n|\n\} \| DataUIMessageChunk<DATA_TYPES> \| \{\n/)) {
    const type = member.match(/^\s*type: '([a-z-]+)'/m)?.[1];
    if (!type) continue;
    out.set(type, new Set([...member.matchAll(/^  (\w+)\??:/gm)].map((m) => m[1])));
  }
  if (out.size < 20) throw new Error(`could not read UIMessageChunk from the SDK's declarations (${out.size} types)`);
  return out;
})();

async function validate(raw) {
  if (raw === "[DONE]") return [];
  let chunk;
  try {
    chunk = JSON.parse(raw);
  } catch {
    return [`not JSON: ${raw}`];
  }
  const problems = [];
  const r = await uiMessageChunkSchema().validate(chunk);
  if (!r.success) problems.push(`${chunk.type}: ${r.error.message.slice(0, 400)}`);
  const keys = allowed.get(chunk.type);
  if (!keys) problems.push(`unknown chunk type ${chunk.type}`);
  else for (const k of Object.keys(chunk)) if (!keys.has(k)) problems.push(`${chunk.type}: field ${k} is not in the SDK's chunk type`);
  return problems;
}

const requests = [];
function fetcher(u, init) {
  const record = { body: init.body ? JSON.parse(init.body) : undefined };
  requests.push(record);
  return recordingFetch(record)(u, init);
}

async function report(extra) {
  for (const r of requests) {
    await r.done;
    r.problems = (await Promise.all((r.frames ?? []).map(validate))).flat();
    r.last = r.frames?.at(-1);
    r.frames = (r.frames ?? []).filter((f) => f !== "[DONE]").map((f) => JSON.parse(f));
    r.conversation = r.headers?.["x-agentd-conversation-id"];
    r.stream = r.headers?.["x-vercel-ai-ui-message-stream"];
    delete r.raw;
  }
  print({ requests, ...extra });
}

class State {
  constructor(messages = []) {
    this.status = "ready";
    this.error = undefined;
    this.messages = messages;
  }
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(x) { return structuredClone(x); }
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State(init.messages) }); }
}

async function settled(chat) {
  // The automatic request after an approval runs in the background.
  for (let i = 0; i < 600 && (chat.status === "submitted" || chat.status === "streaming"); i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
}

const transport = new DefaultChatTransport({ api: `${url}/v1/ai-sdk/chat`, headers, fetch: fetcher });

if (cmd === "validate") {
  const lines = readFileSync(arg, "utf8").split("\n").filter(Boolean);
  print({ frames: lines.length, problems: (await Promise.all(lines.map(validate))).flat() });
} else if (cmd === "chat") {
  let error;
  const chat = new Chat({ id: chatId, transport, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onError: (e) => { error = String(e?.message ?? e); } });
  await chat.sendMessage({ text: arg });
  await settled(chat);
  if (arg2) {
    const decision = JSON.parse(arg2);
    const pending = chat.messages.at(-1)?.parts.filter((p) => p.state === "approval-requested") ?? [];
    for (const p of pending) await chat.addToolApprovalResponse({ id: p.approval.id, ...decision });
    await new Promise((r) => setTimeout(r, 10));
    await settled(chat);
  }
  await report({ messages: chat.messages, status: chat.status, error });
} else if (cmd === "resume") {
  // The first page: its stream breaks after the tool's input arrived.
  const cut = { frames: [] };
  const cutFetch = async (u, init) => {
    const res = await fetch(u, init);
    cut.status = res.status;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let seen = "", sent = 0;
    const body = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        seen += decoder.decode(value, { stream: true });
        const at = seen.indexOf('"type":"tool-input-available"');
        const end = at < 0 ? -1 : seen.indexOf("\n\n", at);
        cut.frames = seen.split("\n\n").filter((b) => b.startsWith("data: ")).map((b) => b.slice(6));
        if (end < 0) {
          controller.enqueue(new TextEncoder().encode(seen.slice(sent)));
          sent = seen.length;
          return;
        }
        controller.enqueue(new TextEncoder().encode(seen.slice(sent, end + 2)));
        cut.frames = seen.slice(0, end).split("\n\n").map((b) => b.slice(6));
        await reader.cancel(); // the connection is gone
        controller.error(new TypeError("network error"));
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  let firstError, error;
  const first = new Chat({ id: chatId, transport: new DefaultChatTransport({ api: `${url}/v1/ai-sdk/chat`, headers, fetch: cutFetch }),
    onError: (e) => { firstError = String(e?.message ?? e); } });
  await first.sendMessage({ text: arg });
  await settled(first);
  const before = structuredClone(first.messages);
  // The reloaded page: the messages it had, and resumeStream() as useChat's resume: true calls it on mount.
  const gateFetch = async (u, init) => {
    const res = await fetcher(u, init);
    requests.at(-1).method = init.method;
    writeFileSync(arg2, "open");
    return res;
  };
  const second = new Chat({ id: chatId, messages: structuredClone(before),
    transport: new DefaultChatTransport({ api: `${url}/v1/ai-sdk/chat`, headers, fetch: gateFetch }),
    onError: (e) => { error = String(e?.message ?? e); } });
  await second.resumeStream();
  await settled(second);
  await report({ cut, before, firstError, messages: second.messages, status: second.status, error });
} else if (cmd === "raw") {
  let error, message;
  try {
    const body = JSON.parse(arg);
    const stream = await transport.sendMessages({ chatId, messages: body.messages ?? [], trigger: body.trigger ?? "submit-message",
      messageId: body.messageId, abortSignal: undefined });
    for await (const m of readUIMessageStream({ stream, message: body.continue })) message = m;
  } catch (e) {
    error = String(e?.message ?? e);
  }
  await report({ message, error });
} else {
  console.error(`unknown command ${cmd}`);
  process.exit(2);
}
