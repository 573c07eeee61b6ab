// agentd.js — the web chat's custom elements, usable from any page:
//
//   <agentd-chat server="https://agentd.example" conversation="conv_…" key="…">
//   <agentd-confirmation server="…" tool-call="call_…" key="…">   (or .event = a confirmation_required event's data)
//   <agentd-approvals server="…" key="…">                          (the pending approvals of the key's tenant)
//
// server defaults to the origin this module was loaded from; key defaults to
// the one the page keeps in sessionStorage ("agentd.key"). Everything that
// comes from the model, a tool or the arguments is put into the page as
// text (textContent), never as HTML. Plain JavaScript, no build step.

const moduleOrigin = new URL(import.meta.url).origin;
export const KEY_STORAGE = 'agentd.key';

// The stylesheet next to this module, added once to the embedding page.
if (typeof document !== 'undefined' && !document.querySelector('link[data-agentd-css]')) {
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = new URL('./agentd.css', import.meta.url).href;
  link.dataset.agentdCss = '';
  document.head.append(link);
}

// h builds an element: attrs are set as attributes (on* names are refused:
// listeners are added with addEventListener), strings become text nodes.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (/^on/i.test(k)) throw new Error('h: no event handler attributes');
    el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return el;
}

// ApiError is an answer of the API that is not 2xx ({error: {code, message}}).
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Client speaks agentd's HTTP API: the key goes in an Authorization header,
// and only the stream (EventSource cannot set headers) gets it as access_token.
export class Client {
  constructor(server, key) {
    this.server = (server || moduleOrigin).replace(/\/+$/, '');
    this.key = key || '';
    this.tools = null;
  }

  async request(method, path, body) {
    const headers = {};
    if (this.key) headers.Authorization = 'Bearer ' + this.key;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let resp;
    try {
      resp = await fetch(this.server + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      // A network error, or a cross-origin answer without CORS headers:
      // the origin of this page is not in the server's cors_origins.
      throw new ApiError(0, 'network', `cannot reach ${this.server} from this page (${err.message}); is this origin in the server's cors_origins?`);
    }
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!resp.ok) {
      const e = (data && data.error) || {};
      const err = new ApiError(resp.status, e.code || 'http_' + resp.status, e.message || resp.statusText);
      err.key = this.key || ''; // the key this request was refused with
      throw err;
    }
    return data;
  }

  // streamURL is the conversation's SSE stream, resuming after lastSeq.
  streamURL(conversation, lastSeq) {
    const q = new URLSearchParams();
    if (this.key) q.set('access_token', this.key);
    if (lastSeq > 0) q.set('last_event_id', String(lastSeq));
    const qs = q.toString();
    return `${this.server}/v1/conversations/${encodeURIComponent(conversation)}/events${qs ? '?' + qs : ''}`;
  }

  // toolSchema is the JSON Schema of a tool's arguments (GET /v1/tools, once).
  async toolSchema(name) {
    if (!this.tools) {
      const list = await this.request('GET', '/v1/tools');
      this.tools = new Map(list.tools.map((t) => [t.name, t]));
    }
    const t = this.tools.get(name);
    return t ? t.parameters : null;
  }

  decide(toolCallID, body) {
    return this.request('POST', `/v1/tool-calls/${encodeURIComponent(toolCallID)}/approval`, body);
  }
}

// clientOf is the Client of an element's server and key attributes.
function clientOf(el) {
  const server = el.getAttribute('server') || '';
  const key = el.getAttribute('key') || storedKey();
  if (!el._client || el._client.server !== (server || moduleOrigin).replace(/\/+$/, '') || el._client.key !== key) {
    el._client = new Client(server, key);
  }
  return el._client;
}

function storedKey() {
  try { return sessionStorage.getItem(KEY_STORAGE) || ''; } catch { return ''; }
}

// unauthorized tells the page that the server wants an API key.
function unauthorized(el, err) {
  if (err instanceof ApiError && err.status === 401) {
    el.dispatchEvent(new CustomEvent('agentd-unauthorized', { bubbles: true, composed: true, detail: { message: err.message, key: err.key } }));
    return true;
  }
  return false;
}

// ---- JSON Schema validation (the subset agentd's tool schemas use) -------
//
// type (one or a list), properties, required, additionalProperties (false or
// a schema), enum, const, pattern, minLength, maxLength, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (numbers), minProperties,
// maxProperties, items, minItems, maxItems. Other keywords are not checked
// here; the server validates every edit again in full.

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(want, v) {
  const got = typeOf(v);
  return want === got || (want === 'number' && got === 'integer');
}

// validate returns the problems of value under schema, each "path: what".
export function validate(schema, value, path = '(arguments)') {
  const errs = [];
  if (!schema || typeof schema !== 'object') return errs;
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => typeMatches(t, value))) {
      errs.push(`${path}: must be ${types.join(' or ')}, not ${typeOf(value)}`);
      return errs;
    }
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    errs.push(`${path}: must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`);
  }
  if ('const' in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) {
    errs.push(`${path}: must be ${JSON.stringify(schema.const)}`);
  }
  if (typeof value === 'string') {
    const n = [...value].length;
    if (schema.minLength !== undefined && n < schema.minLength) errs.push(`${path}: must be at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && n > schema.maxLength) errs.push(`${path}: must be at most ${schema.maxLength} characters`);
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value)) errs.push(`${path}: must match ${schema.pattern}`);
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) errs.push(`${path}: must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) errs.push(`${path}: must be at most ${schema.maximum}`);
    if (typeof schema.exclusiveMinimum === 'number' && value <= schema.exclusiveMinimum) errs.push(`${path}: must be greater than ${schema.exclusiveMinimum}`);
    if (typeof schema.exclusiveMaximum === 'number' && value >= schema.exclusiveMaximum) errs.push(`${path}: must be less than ${schema.exclusiveMaximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) errs.push(`${path}: must have at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) errs.push(`${path}: must have at most ${schema.maxItems} items`);
    if (schema.items && typeof schema.items === 'object') value.forEach((v, i) => errs.push(...validate(schema.items, v, `${path}[${i}]`)));
  }
  if (typeOf(value) === 'object') {
    const keys = Object.keys(value);
    const props = schema.properties || {};
    for (const r of schema.required || []) if (!(r in value)) errs.push(`${path}.${r}: is required`);
    if (schema.minProperties !== undefined && keys.length < schema.minProperties) errs.push(`${path}: must have at least ${schema.minProperties} properties`);
    if (schema.maxProperties !== undefined && keys.length > schema.maxProperties) errs.push(`${path}: must have at most ${schema.maxProperties} properties`);
    for (const k of keys) {
      if (k in props) errs.push(...validate(props[k], value[k], `${path}.${k}`));
      else if (schema.additionalProperties === false) errs.push(`${path}.${k}: is not allowed`);
      else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') errs.push(...validate(schema.additionalProperties, value[k], `${path}.${k}`));
    }
  }
  return errs;
}

// ---- countdowns: one ticker for every live card --------------------------

const ticking = new Set();
let ticker = 0;

function tick() {
  for (const card of ticking) card._tick();
  if (ticking.size === 0) { clearInterval(ticker); ticker = 0; }
}

function startTicking(card) {
  ticking.add(card);
  if (!ticker) ticker = setInterval(tick, 1000);
}

export function formatRemaining(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const hh = Math.floor(s / 3600), mm = Math.floor((s % 3600) / 60), ss = s % 60;
  const two = (n) => String(n).padStart(2, '0');
  return hh > 0 ? `${hh}:${two(mm)}:${two(ss)}` : `${mm}:${two(ss)}`;
}

function pretty(v) {
  return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
}

// unshown are the characters that can make a name read as something it is
// not: controls (a line break starts a fake diff hunk), line separators and
// bidirectional formatting characters (U+202E shows "exe.txt" as
// "txt.exe"). The server refuses them in file paths (docs/files.md); the
// card shows any that reach it escaped. bidiOnly is the last group alone,
// for a diff's lines (tabs and line ends are content there).
const unshown = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/gu;
const bidiOnly = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;
const escapeChar = (c) => '\\u' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');

// fileSection names the file a workspace file tool would change, apart
// from the diff (whose "--- a/…" lines are part of the diff, not a label).
function fileSection(path) {
  return h('section', { class: 'agentd-file', 'aria-label': 'File' }, h('h4', {}, 'File'),
    h('code', {}, path.replace(unshown, escapeChar)));
}

// diffSection shows a card's diff; a unified diff line by line, marked as
// added or removed (as text, like everything else), with its size above
// the box. When the diff is taller than the box, a button says how many
// lines there are and opens the whole diff.
function diffSection(diff) {
  const pre = h('pre', { tabindex: '0' });
  const sec = h('section', { class: 'agentd-diff', 'aria-label': 'Diff' }, h('h4', {}, 'Diff'));
  if (typeof diff !== 'string') {
    pre.append(pretty(diff));
    sec.append(pre);
    return sec;
  }
  const lines = diff.replace(/\n$/, '').split('\n');
  let added = 0, removed = 0;
  for (const line of lines) {
    const add = line.startsWith('+') && !line.startsWith('+++');
    const del = line.startsWith('-') && !line.startsWith('---');
    added += add; removed += del;
    pre.append(h('span', { class: add ? 'agentd-add' : del ? 'agentd-del' : undefined }, line.replace(bidiOnly, escapeChar) + '\n'));
  }
  const n = lines.length;
  const label = `Show all ${n} lines`;
  const more = h('button', { type: 'button', class: 'agentd-more', 'aria-expanded': 'false', hidden: true }, label);
  more.addEventListener('click', () => {
    const open = sec.classList.toggle('agentd-open');
    more.setAttribute('aria-expanded', String(open));
    more.textContent = open ? 'Show less' : label;
  });
  // Whether the box cuts the diff is known once it is laid out (and again
  // whenever its size changes: a narrower window wraps more).
  const fit = () => {
    const cut = pre.scrollHeight > pre.clientHeight + 1;
    sec.classList.toggle('agentd-cut', cut);
    more.hidden = !cut && !sec.classList.contains('agentd-open');
  };
  if (typeof ResizeObserver !== 'undefined') new ResizeObserver(fit).observe(pre);
  sec.append(h('p', { class: 'agentd-sub' }, `${added} added, ${removed} removed · ${n} lines`), pre, more);
  return sec;
}

// cardFromToolCall turns a parked call (GET /v1/tool-calls/{id},
// GET /v1/approvals) into the fields of a confirmation_required event.
export function cardFromToolCall(c) {
  const conn = c.connection_name || null;
  return {
    type: 'confirmation_required', tool_call_id: c.id, tool_name: c.name, server_id: c.server_id,
    conversation_id: c.conversation_id, run_id: c.run_id, correlation_id: c.correlation_id,
    endpoint: c.endpoint, method: c.method, reason: c.reason || '', escalated: !!c.escalated,
    params: conn ? c.params : c.arguments, connection_name: conn, arguments_sha256: c.arguments_sha256,
    card_revision: c.card_revision,
    requires_approval_at: c.requires_approval_at, allowed_decisions: c.allowed_decisions || ['approve', 'deny'],
    status: c.status, decisions: c.decisions || [],
    card: { connection_name: conn, method: c.method, endpoint: c.endpoint, path_template: c.path_template || null, diff: null,
      arguments: conn ? c.params : c.arguments, diff: c.diff || null,
      approval: c.approval ? { ...c.approval, approvals: (c.approvals || []).length } : undefined },
  };
}

const decisionLabel = {
  approved: 'Approved', denied: 'Denied', expired: 'Expired', cancelled: 'Cancelled',
};

const statusDecision = {
  approved: 'approved', executing: 'approved', completed: 'approved', failed: 'approved',
  denied: 'denied', expired: 'expired', cancelled: 'cancelled', refused: 'refused',
};

// ---- <agentd-confirmation> ----------------------------------------------

export class AgentdConfirmation extends HTMLElement {
  static get observedAttributes() { return ['tool-call', 'key', 'server']; }

  constructor() {
    super();
    this._event = null;
    this._state = 'pending';
    this._busy = false;
  }

  // event is the data of a confirmation_required event.
  set event(data) { this._event = data; if (this.isConnected) this._render(); }
  get event() { return this._event; }

  // client may be given by a containing element; otherwise it comes from
  // the server and key attributes.
  set client(c) { this._sharedClient = c; }
  get client() { return this._sharedClient || clientOf(this); }

  // state is pending, approved, denied, expired, cancelled or refused.
  get state() { return this._state; }

  connectedCallback() {
    if (this._event) { this._render(); return; }
    if (this.getAttribute('tool-call')) this.load();
  }

  disconnectedCallback() { ticking.delete(this); }

  attributeChangedCallback(name, old, val) {
    if (old !== val && this.isConnected && !this._event && this.getAttribute('tool-call')) this.load();
  }

  // load fetches the call named by the tool-call attribute.
  async load() {
    this.replaceChildren(h('p', { class: 'agentd-note' }, 'Loading the tool call…'));
    try {
      const c = await this.client.request('GET', '/v1/tool-calls/' + encodeURIComponent(this.getAttribute('tool-call')));
      this.event = cardFromToolCall(c);
    } catch (err) {
      unauthorized(this, err);
      this.replaceChildren(h('p', { class: 'agentd-error', role: 'alert' }, 'Cannot load the tool call: ' + err.message));
    }
  }

  _render() {
    const ev = this._event;
    if (!ev) return;
    const card = ev.card || {};
    const conn = ev.connection_name || card.connection_name;
    const title = conn
      ? `${card.method || ev.method} ${card.path_template || card.endpoint || ev.endpoint} on ${conn}`
      : ev.tool_name;
    this.setAttribute('role', 'article');
    this.setAttribute('aria-label', 'Confirmation: ' + title);
    this.classList.add('agentd-card');
    const head = h('header', {},
      h('span', { class: 'agentd-badge' }, conn ? 'Connection' : 'Tool'),
      h('h3', {}, title));
    const body = [head];
    if (conn) body.push(h('p', { class: 'agentd-sub' }, `Tool ${ev.tool_name} · ${card.method || ev.method} ${card.endpoint || ev.endpoint}`));
    if (ev.reason) body.push(h('p', { class: 'agentd-reason' }, ev.reason));
    if (ev.escalated) body.push(h('p', { class: 'agentd-sub' }, 'Escalated: the tier was raised for this call.'));
    const args = card.arguments || ev.params;
    if (ev.server_id === 'files' && args && typeof args.path === 'string') body.push(fileSection(args.path));
    body.push(this._arguments(args, !!conn));
    if (card.diff !== null && card.diff !== undefined && card.diff !== '') body.push(diffSection(card.diff));
    this._countdown = h('p', { class: 'agentd-countdown', role: 'timer', 'aria-live': 'off' });
    // A reminder or an extension of the deadline, said once (aria-live).
    this._notice = h('p', { class: 'agentd-notice', role: 'status', 'aria-live': 'polite', hidden: true });
    // A call that needs several approvals shows how many it has.
    this._quorum = h('p', { class: 'agentd-quorum', hidden: true });
    if (card.approval && card.approval.quorum > 1) this.progress(card.approval.approvals, card.approval.quorum);
    body.push(this._quorum);
    this._status = h('p', { class: 'agentd-status', role: 'status', 'aria-live': 'polite' });
    this._error = h('p', { class: 'agentd-error', role: 'alert', hidden: true });
    this._actions = this._buttons(ev);
    // The remembered grant this card's approval made (grant_created).
    this._grant = h('div', { class: 'agentd-grant', role: 'group', 'aria-label': 'Remembered grant', hidden: true });
    body.push(this._countdown, this._notice, this._actions, this._editor = h('div', { class: 'agentd-editor', hidden: true }), this._error, this._status, this._grant);
    this.replaceChildren(...body);
    const done = ev.status && ev.status !== 'requires_confirmation';
    if (done) {
      const d = (ev.decisions || [])[0];
      this.resolve(statusDecision[ev.status] || ev.status, d ? d.reason : '', d ? d.decided_by : '');
    } else {
      this._tick();
      if (this._state === 'pending') startTicking(this);
    }
  }

  // _arguments shows the effective arguments; a connection call's grouped
  // as path, query, header and body (empty groups left out).
  _arguments(args, grouped) {
    const sec = h('section', { class: 'agentd-args', 'aria-label': 'Arguments' }, h('h4', {}, 'Arguments'));
    const list = (obj) => {
      if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return h('pre', {}, pretty(obj));
      const dl = h('dl', {});
      for (const [k, v] of Object.entries(obj)) dl.append(h('dt', {}, k), h('dd', {}, typeof v === 'object' && v !== null ? h('pre', {}, pretty(v)) : pretty(v)));
      if (!dl.children.length) dl.append(h('dd', { class: 'agentd-note' }, '(none)'));
      return dl;
    };
    if (grouped && args && typeof args === 'object') {
      for (const g of ['path', 'query', 'header', 'body']) {
        const v = args[g];
        if (v === undefined || v === null || (typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0)) continue;
        sec.append(h('div', { class: 'agentd-group', role: 'group', 'aria-label': g }, h('h5', {}, g), list(v)));
      }
    } else {
      sec.append(list(args === undefined ? {} : args));
    }
    return sec;
  }

  _buttons(ev) {
    const allowed = ev.allowed_decisions || ['approve', 'deny'];
    const reasonId = 'agentd-reason-' + ev.tool_call_id;
    this._reason = h('input', { id: reasonId, type: 'text', maxlength: '4096', autocomplete: 'off' });
    const approve = h('button', { type: 'button', class: 'agentd-approve' }, 'Approve');
    const deny = h('button', { type: 'button', class: 'agentd-deny' }, 'Deny');
    approve.addEventListener('click', () => this.sendDecision({ decision: 'approve', reason: this._reason.value || undefined }));
    deny.addEventListener('click', () => this.sendDecision({ decision: 'deny', reason: this._reason.value || undefined }));
    const row = h('div', { class: 'agentd-actions' },
      h('label', { for: reasonId, class: 'agentd-reason-label' }, 'Reason (optional)'), this._reason,
      h('div', { class: 'agentd-buttons' }, approve, deny));
    if (allowed.includes('remember')) {
      // A conversation grant of the default ttl that answers identical calls.
      const rem = h('button', { type: 'button', class: 'agentd-approve' }, 'Approve and remember for this conversation');
      rem.addEventListener('click', () => this.sendDecision({ decision: 'approve', reason: this._reason.value || undefined,
        remember: { scope: 'conversation' } }));
      row.lastChild.append(rem);
    }
    if (allowed.includes('edit')) {
      const edit = h('button', { type: 'button', class: 'agentd-edit', 'aria-expanded': 'false' }, 'Edit');
      edit.addEventListener('click', () => this._openEditor(edit));
      row.lastChild.append(edit);
    }
    return row;
  }

  // _openEditor shows the effective arguments (the tool's own form, from
  // GET /v1/tool-calls/{id}) as JSON; they are checked against the tool's
  // schema before they are sent.
  async _openEditor(button) {
    if (!this._editor.hidden) { this._editor.hidden = true; button.setAttribute('aria-expanded', 'false'); return; }
    this._showError('');
    let args;
    try {
      const c = await this.client.request('GET', '/v1/tool-calls/' + encodeURIComponent(this._event.tool_call_id));
      args = c.arguments;
    } catch (err) {
      unauthorized(this, err);
      this._showError('Cannot load the arguments: ' + err.message);
      return;
    }
    const id = 'agentd-edit-' + this._event.tool_call_id;
    const area = h('textarea', { id, rows: '8', spellcheck: 'false' });
    area.value = JSON.stringify(args, null, 2);
    const send = h('button', { type: 'button', class: 'agentd-approve' }, 'Approve edited arguments');
    send.addEventListener('click', () => this._sendEdit(area.value));
    this._editor.replaceChildren(h('label', { for: id }, 'Edited arguments (JSON)'), area, h('div', { class: 'agentd-buttons' }, send));
    this._editor.hidden = false;
    button.setAttribute('aria-expanded', 'true');
    area.focus();
  }

  async _sendEdit(text) {
    let args;
    try { args = JSON.parse(text); } catch (err) { this._showError('The edited arguments are not JSON: ' + err.message); return; }
    let schema;
    try { schema = await this.client.toolSchema(this._event.tool_name); } catch (err) { unauthorized(this, err); this._showError('Cannot load the tool schema: ' + err.message); return; }
    const problems = validate(schema, args);
    if (problems.length) { this._showError('Not sent: ' + problems.join('; ')); return; }
    await this.sendDecision({ decision: 'edit', arguments: args, reason: this._reason.value || undefined });
  }

  // sendDecision posts a decision bound to the card's arguments digest and
  // shows the outcome. The buttons call it; it does no validation of its own.
  async sendDecision(body) {
    if (this._busy || this._state !== 'pending') return;
    this._busy = true;
    this._showError('');
    this._status.textContent = 'Sending…';
    try {
      // The card decided: its digest, and card_revision for a call parked again.
      const d = await this.client.decide(this._event.tool_call_id,
        { ...body, arguments_sha256: this._event.arguments_sha256, card_revision: this._event.card_revision });
      if (d.status === 'requires_confirmation') {
        // An approval short of the quorum: recorded, the call still waits.
        this.progress((d.approvals || []).length, d.quorum);
        this._status.textContent = 'Your approval is recorded.';
      } else {
        this.resolve(d.decision, d.reason, d.decided_by, !!d.edited_arguments_sha256);
        // Outside <agentd-chat> no grant_created comes: the grant is looked up.
        if (body.remember && !this.closest('agentd-chat')) this._findGrant();
      }
    } catch (err) {
      unauthorized(this, err);
      this._status.textContent = '';
      if (err.code === 'expired') this.resolve('expired', '', '');
      this._showError(err.message);
    } finally {
      this._busy = false;
    }
  }

  // progress shows "N of Q approvals" (confirmation_progress, or the
  // answer to an approval short of the quorum).
  progress(n, quorum) {
    if (!this._quorum || !(quorum > 1)) return;
    this._quorum.textContent = `${n} of ${quorum} approvals`;
    this._quorum.hidden = false;
  }

  // extend moves the countdown to a new deadline (confirmation_extended).
  extend(at, by, who) {
    if (this._state !== 'pending' || !this._event || !at) return;
    this._event = { ...this._event, requires_approval_at: at };
    this._say(`Deadline extended${by ? ' by ' + by : ''}${who ? ' (' + who + ')' : ''}.`);
    this._tick();
  }

  // remind shows a confirmation_reminder: how long is left, as the server
  // counted it; the countdown goes on.
  remind(remainingMS) {
    if (this._state !== 'pending' || !this._event) return;
    const s = Math.max(0, Math.round(remainingMS / 1000));
    this._say(`Reminder: this approval expires in ${s >= 90 ? Math.round(s / 60) + ' min' : s + ' s'}.`);
  }

  _say(text) {
    if (!this._notice) return;
    this._notice.textContent = text;
    this._notice.hidden = false;
  }

  // granted shows the remembered grant this card's approval made
  // (grant_created), with a Revoke button (DELETE /v1/grants/{id}).
  granted(g) {
    if (!this._grant || this._grantID === g.grant_id) return;
    this._grantID = g.grant_id;
    const until = new Date(g.expires_at);
    const where = g.scope === 'project' ? 'this project' : 'this conversation';
    const revoke = h('button', { type: 'button', class: 'agentd-deny' }, 'Revoke');
    revoke.addEventListener('click', async () => {
      revoke.disabled = true;
      try {
        await this.client.request('DELETE', '/v1/grants/' + encodeURIComponent(g.grant_id));
        this.revoked();
      } catch (err) {
        unauthorized(this, err);
        revoke.disabled = false;
        this._showError('Cannot revoke the grant: ' + err.message);
      }
    });
    this._grant.replaceChildren(h('p', {}, `Remembered for ${where} until `,
      h('time', { datetime: g.expires_at }, until.toLocaleString()), ': identical calls run without asking.'), revoke);
    this._grant.hidden = false;
  }

  // _findGrant shows the grant this card's approval made, from
  // GET /v1/grants (a few pages of it, oldest first).
  async _findGrant() {
    let cursor = '';
    try {
      for (let i = 0; i < 10 && !this._grantID; i++) {
        const page = await this.client.request('GET', '/v1/grants?limit=100' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
        const g = page.grants.find((x) => x.tool_call_id === this._event.tool_call_id);
        if (g) this.granted({ ...g, grant_id: g.id });
        if (!(cursor = page.next_cursor)) break;
      }
    } catch (err) {
      unauthorized(this, err);
    }
  }

  // revoked shows that the grant ended (grant_revoked, or the Revoke button).
  revoked(by) {
    if (!this._grantID || this._grant.dataset.revoked) return;
    this._grant.dataset.revoked = '1';
    this._grant.replaceChildren(h('p', {}, 'Grant revoked' + (by ? ` by ${by}` : '') + ': identical calls ask again.'));
  }

  _showError(msg) {
    this._error.textContent = msg;
    this._error.hidden = !msg;
  }

  _tick() {
    if (this._state !== 'pending' || !this._event) { ticking.delete(this); return; }
    const at = Date.parse(this._event.requires_approval_at);
    const left = at - Date.now();
    if (!(left > 0)) { this.resolve('expired', '', '', false, true); return; }
    this._countdown.replaceChildren('Expires in ', h('time', { datetime: this._event.requires_approval_at }, formatRemaining(left)));
  }

  // resolve shows the decision and removes the buttons. A card is decided
  // once: the first decision stays, except that one the server reports
  // replaces an expiry the card only inferred from its clock.
  resolve(decision, reason, decidedBy, edited, provisional = false) {
    if (!this._event || (this._state !== 'pending' && !this._provisional)) return;
    if (this._provisional && provisional) return;
    const first = this._state === 'pending';
    this._provisional = provisional;
    this._state = decision;
    ticking.delete(this);
    this.dataset.state = decision;
    this._actions.remove();
    this._editor.remove();
    this._countdown.remove();
    this._notice.remove();
    const label = decisionLabel[decision] || (decision.charAt(0).toUpperCase() + decision.slice(1));
    let text = label;
    if (edited) text += ' with edited arguments';
    if (decidedBy && decision !== 'expired') text += ` by ${decidedBy}`;
    if (reason) text += `: ${reason}`;
    if (decision === 'expired') text = 'Expired: nothing was done.';
    this._status.replaceChildren(h('strong', { class: 'agentd-decision' }, text));
    if (first) this.dispatchEvent(new CustomEvent('agentd-decided', { bubbles: true, detail: { tool_call_id: this._event.tool_call_id, decision } }));
  }
}

// ---- <agentd-chat> -------------------------------------------------------

export class AgentdChat extends HTMLElement {
  static get observedAttributes() { return ['conversation', 'key', 'server']; }

  constructor() {
    super();
    this._seq = 0;
    this._items = new Map(); // message id / tool call id → element
    this._userByRun = new Map();
    this._es = null;
  }

  get client() { return clientOf(this); }

  // lastSeq is the sequence number of the last event rendered.
  get lastSeq() { return this._seq; }

  connectedCallback() {
    if (!this._log) this._build();
    this._start();
  }

  disconnectedCallback() { this._stop(); }

  attributeChangedCallback(name, old, val) {
    if (old === val || !this._log) return;
    if (name === 'conversation' && val === this._conv) return; // set by us
    this.reconnect();
  }

  // reconnect renders the conversation again from its first event (after
  // the key or the conversation changed).
  reconnect() {
    this._stop();
    this._reset();
    this._start();
  }

  _build() {
    this.classList.add('agentd-chat');
    this._log = h('div', { class: 'agentd-log', role: 'log', 'aria-label': 'Conversation', 'aria-live': 'polite' });
    const inputId = 'agentd-input-' + Math.random().toString(36).slice(2);
    this._input = h('textarea', { id: inputId, rows: '2', placeholder: 'Message the agent', required: true });
    this._send = h('button', { type: 'submit' }, 'Send');
    this._notice = h('p', { class: 'agentd-error', role: 'alert', hidden: true });
    const form = h('form', { class: 'agentd-compose', 'aria-label': 'Send a message' },
      h('label', { for: inputId, class: 'agentd-visually-hidden' }, 'Message'), this._input, this._send);
    form.addEventListener('submit', (e) => { e.preventDefault(); this.send(this._input.value); });
    this._input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
    });
    this.replaceChildren(this._log, this._notice, form);
  }

  _reset() {
    this._seq = 0;
    this._items.clear();
    this._userByRun.clear();
    this._log.replaceChildren();
  }

  _notify(msg) {
    this._notice.textContent = msg;
    this._notice.hidden = !msg;
  }

  async _start() {
    this._conv = this.getAttribute('conversation') || '';
    if (!this._conv) return;
    try {
      const d = await this.client.request('GET', '/v1/conversations/' + encodeURIComponent(this._conv));
      for (const m of d.messages || []) if (m.role === 'user' && m.run_id && !this._userByRun.has(m.run_id)) this._userByRun.set(m.run_id, m.content);
    } catch (err) {
      if (!unauthorized(this, err)) this._notify('Cannot open the conversation: ' + err.message);
      return;
    }
    this._notify('');
    this._open();
  }

  // _open follows the stream after the last rendered event. EventSource
  // reconnects by itself with Last-Event-ID; when it gives up (a closed
  // stream), it is opened again with last_event_id.
  _open() {
    this._stop();
    const es = new EventSource(this.client.streamURL(this._conv, this._seq));
    this._es = es;
    const onEvent = (e) => this._receive(e);
    for (const t of ['run_started', 'text_delta', 'message', 'tool_call_started', 'confirmation_required', 'confirmation_resolved', 'confirmation_progress',
      'confirmation_extended', 'confirmation_reminder', 'grant_created', 'grant_revoked', 'tool_call_refused', 'tool_call_result', 'subagent_event', 'run_waiting', 'run_finished', 'error']) {
      es.addEventListener(t, onEvent);
    }
    es.onopen = () => this._notify('');
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED && this._es === es) {
        this._notify('The stream closed; reconnecting…');
        clearTimeout(this._retry);
        this._retry = setTimeout(() => { if (this._es === es) this._start(); }, 2000);
      }
    };
  }

  _stop() {
    clearTimeout(this._retry);
    if (this._es) { this._es.close(); this._es = null; }
  }

  _receive(e) {
    const seq = Number(e.lastEventId);
    if (!(seq > this._seq)) return; // every event once: replays and duplicates are skipped
    let data;
    try { data = JSON.parse(e.data); } catch { return; }
    this._seq = seq;
    this.dispatchEvent(new CustomEvent('agentd-event', { bubbles: true, detail: { seq, type: e.type, data } }));
    this._render(seq, e.type, data);
  }

  _scroll() { this._log.scrollTop = this._log.scrollHeight; }

  _render(seq, type, d) {
    const add = (el) => { el.dataset.seq = String(seq); this._log.append(el); this._scroll(); return el; };
    switch (type) {
      case 'run_started': {
        // The stream has no user messages: each run shows the message that
        // started it, from the send or from the conversation's history.
        const p = h('p', {});
        const el = add(h('div', { class: 'agentd-msg agentd-user' }, h('span', { class: 'agentd-who' }, 'You'), p));
        this._items.set('run:' + d.run_id, el);
        if (!this._fillUser(d.run_id)) { el.hidden = true; this._loadUsers(); }
        break;
      }
      case 'text_delta':
      case 'message': {
        let el = this._items.get(d.message_id);
        if (!el) {
          el = add(h('div', { class: 'agentd-msg agentd-assistant' }, h('span', { class: 'agentd-who' }, 'Agent'), h('p', {})));
          this._items.set(d.message_id, el);
        }
        const p = el.querySelector('p');
        if (type === 'text_delta') p.append(d.delta);
        else p.textContent = d.content;
        this._scroll();
        break;
      }
      case 'tool_call_started': {
        const el = this._tool(d.tool_call_id, d.tool_name, seq);
        el._state.textContent = 'running';
        // A call a remembered grant answered ran without a card.
        if (d.granted_by) el._granted.textContent = ` · no card: remembered grant of ${d.granted_by.key_id}`;
        // Arguments over 64 KiB are not in the event (omitted).
        el._args.textContent = d.omitted && d.omitted.arguments
          ? `(${d.omitted.arguments.bytes} bytes of arguments, not shown)` : pretty(d.arguments);
        break;
      }
      case 'tool_call_result': {
        const el = this._tool(d.tool_call_id, d.tool_name, seq);
        el._state.textContent = d.status;
        el.dataset.status = d.status;
        el._out.textContent = d.status === 'completed' ? pretty(d.result) : d.error || '';
        el._out.hidden = false;
        break;
      }
      case 'tool_call_refused': {
        const el = this._tool(d.tool_call_id, d.tool_name, seq);
        el._state.textContent = 'refused';
        el.dataset.status = 'refused';
        el._out.textContent = d.reason;
        el._out.hidden = false;
        break;
      }
      case 'confirmation_required': {
        const card = document.createElement('agentd-confirmation');
        card.client = this.client;
        // A card whose large values the event leaves out (omitted) shows
        // the whole call, loaded by its id.
        if (d.omitted) card.setAttribute('tool-call', d.tool_call_id);
        else card.event = d;
        this._items.set('card:' + d.tool_call_id, card);
        add(card);
        break;
      }
      case 'confirmation_progress': {
        const card = this._items.get('card:' + d.tool_call_id);
        if (card) card.progress(d.approvals, d.quorum);
        break;
      }
      case 'confirmation_extended': {
        const card = this._items.get('card:' + d.tool_call_id);
        if (card) card.extend(d.requires_approval_at, d.by, d.extended_by);
        break;
      }
      case 'confirmation_reminder': {
        const card = this._items.get('card:' + d.tool_call_id);
        if (card) card.remind(d.remaining_ms);
        break;
      }
      case 'grant_created': {
        const card = this._items.get('card:' + d.tool_call_id);
        if (card) { card.granted(d); this._items.set('grant:' + d.grant_id, card); }
        break;
      }
      case 'grant_revoked': {
        const card = this._items.get('grant:' + d.grant_id);
        if (card) card.revoked(d.revoked_by);
        break;
      }
      case 'confirmation_resolved': {
        const card = this._items.get('card:' + d.tool_call_id);
        if (card) card.resolve(d.decision, d.reason, d.decided_by, !!d.edited_arguments_sha256);
        break;
      }
      case 'run_waiting':
        add(h('p', { class: 'agentd-note' }, 'Waiting for approval.'));
        break;
      case 'run_finished':
        if (d.status !== 'completed') add(h('p', { class: 'agentd-note' }, `Run ${d.status}${d.error ? ': ' + d.error : ''}.`));
        break;
      case 'error':
        add(h('p', { class: 'agentd-error' }, `${d.code}: ${d.message}`));
        break;
      default:
        break;
    }
  }

  // _fillUser puts a run's user message into its place, if it is known.
  _fillUser(runID) {
    const el = this._items.get('run:' + runID);
    const text = this._userByRun.get(runID);
    if (!el || text === undefined) return false;
    el.querySelector('p').textContent = text;
    el.hidden = false;
    return true;
  }

  // _loadUsers reads the user messages of the conversation (once at a time).
  async _loadUsers() {
    if (this._loadingUsers) return;
    this._loadingUsers = true;
    try {
      await new Promise((r) => setTimeout(r, 200)); // a send's own answer usually comes first
      const d = await this.client.request('GET', '/v1/conversations/' + encodeURIComponent(this._conv));
      for (const m of d.messages || []) {
        if (m.role === 'user' && m.run_id && !this._userByRun.has(m.run_id)) this._userByRun.set(m.run_id, m.content);
        if (m.run_id) this._fillUser(m.run_id);
      }
    } catch (err) {
      unauthorized(this, err);
    } finally {
      this._loadingUsers = false;
    }
  }

  // _tool is the entry of a tool call in the log, made on first sight.
  _tool(id, name, seq) {
    let el = this._items.get('tool:' + id);
    if (el) return el;
    const state = h('span', { class: 'agentd-tool-state' });
    const args = h('pre', {});
    const out = h('pre', { class: 'agentd-tool-out', hidden: true });
    const granted = h('span', { class: 'agentd-sub' });
    el = h('details', { class: 'agentd-tool' }, h('summary', {}, 'Tool ', h('code', {}, name || ''), ' ', state, granted), h('h4', {}, 'Arguments'), args, out);
    el._state = state;
    el._granted = granted;
    el._args = args;
    el._out = out;
    el.dataset.seq = String(seq);
    this._items.set('tool:' + id, el);
    this._log.append(el);
    this._scroll();
    return el;
  }

  // send posts a user message, creating the conversation first if there is none.
  async send(content) {
    content = (content || '').trim();
    if (!content) return;
    this._send.disabled = true;
    try {
      if (!this._conv) {
        const c = await this.client.request('POST', '/v1/conversations', {});
        this._conv = c.id;
        this.setAttribute('conversation', c.id);
        this.dispatchEvent(new CustomEvent('agentd-conversation', { bubbles: true, detail: { id: c.id } }));
        this._open();
      }
      const r = await this.client.request('POST', `/v1/conversations/${encodeURIComponent(this._conv)}/messages`, { content });
      this._userByRun.set(r.run_id, content);
      this._fillUser(r.run_id);
      this._input.value = '';
      this._notify('');
    } catch (err) {
      if (!unauthorized(this, err)) this._notify(err.code === 'run_active' ? 'The agent is still working on the last message.' : err.message);
    } finally {
      this._send.disabled = false;
    }
  }
}

// ---- <agentd-approvals> --------------------------------------------------

export class AgentdApprovals extends HTMLElement {
  static get observedAttributes() { return ['key', 'server']; }

  get client() { return clientOf(this); }

  connectedCallback() {
    if (!this._list) {
      this.classList.add('agentd-approvals');
      const refresh = h('button', { type: 'button' }, 'Refresh');
      refresh.addEventListener('click', () => this.refresh());
      this._more = h('button', { type: 'button', hidden: true }, 'Load more');
      this._more.addEventListener('click', () => this._load(this._cursor));
      this._list = h('div', { class: 'agentd-list', role: 'list', 'aria-label': 'Pending approvals' });
      this._note = h('p', { class: 'agentd-note', role: 'status' });
      this.replaceChildren(h('div', { class: 'agentd-toolbar' }, h('h2', {}, 'Pending approvals'), refresh), this._note, this._list, this._more);
    }
    this.refresh();
  }

  attributeChangedCallback(name, old, val) {
    if (old !== val && this._list) this.refresh();
  }

  refresh() {
    this._list.replaceChildren();
    this._load('');
  }

  async _load(cursor) {
    const gen = this._gen = (this._gen || 0) + (cursor ? 0 : 1);
    try {
      const q = cursor ? '&cursor=' + encodeURIComponent(cursor) : '';
      const page = await this.client.request('GET', '/v1/approvals?status=pending' + q);
      if (gen !== this._gen) return; // a newer refresh started
      for (const c of page.approvals) {
        const card = document.createElement('agentd-confirmation');
        card.client = this.client;
        // A call listed without its large values (omitted) is loaded whole.
        if (c.omitted) card.setAttribute('tool-call', c.id);
        else card.event = cardFromToolCall(c);
        this._list.append(h('div', { role: 'listitem' }, h('p', { class: 'agentd-sub' }, 'Conversation ', h('code', {}, c.conversation_id)), card));
      }
      this._cursor = page.next_cursor;
      this._more.hidden = !page.next_cursor;
      this._note.textContent = this._list.children.length ? '' : 'Nothing is waiting for approval.';
    } catch (err) {
      unauthorized(this, err);
      this._note.textContent = 'Cannot list the approvals: ' + err.message;
    }
  }
}

if (typeof customElements !== 'undefined') {
  if (!customElements.get('agentd-confirmation')) customElements.define('agentd-confirmation', AgentdConfirmation);
  if (!customElements.get('agentd-chat')) customElements.define('agentd-chat', AgentdChat);
  if (!customElements.get('agentd-approvals')) customElements.define('agentd-approvals', AgentdApprovals);
}
