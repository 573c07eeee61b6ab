// The web chat in a real browser (acceptance 1–4 of docs/web.md). Started by
// TestWebChatInBrowser (cmd/agentd/web_e2e_test.go) with AGENTD_WEB_TEST, a
// JSON object: base (the agentd server), key (a client API key), chromium,
// screenshots (a folder), timings (a file), allowedOrigin / otherOrigin
// (pages of two other origins; only the first is in cors_origins),
// embedConversation / embedCall / refusedCall (calls parked for them).
// Elements are found by role and name, as a person would.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const cfg = JSON.parse(process.env.AGENTD_WEB_TEST || '{}');
const WAIT = 20_000;
let browser;
const timings = [];

before(async () => {
  browser = await chromium.launch({
    executablePath: cfg.chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  writeFileSync(cfg.timings, JSON.stringify(timings, null, 1));
});

// until polls fn until it returns a truthy value.
async function until(fn, what, timeout = WAIT) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
}

// newPage opens a page that records page errors, CSP violations and the
// time from each confirmation_required event to its card being painted.
async function newPage(viewport = { width: 1000, height: 900 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  await page.addInitScript(() => {
    window.__violations = [];
    window.__cardTimes = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
    document.addEventListener('agentd-event', (e) => {
      if (e.detail.type !== 'confirmation_required') return;
      const t0 = performance.now();
      const emitted = Date.parse(e.detail.data.timestamp);
      const id = e.detail.data.tool_call_id;
      requestAnimationFrame(() => requestAnimationFrame(() => {
        const card = [...document.querySelectorAll('agentd-confirmation')].find((c) => c.event && c.event.tool_call_id === id);
        if (card && card.checkVisibility()) {
          window.__cardTimes.push({ fromReceived: performance.now() - t0, fromEmitted: Date.now() - emitted });
        }
      }));
    });
  });
  return page;
}

async function openChat(page, query = '') {
  await page.goto(cfg.base + '/' + query);
  // The server has keys: the page asks for one after its first 401.
  const key = page.getByRole('textbox', { name: 'API key' });
  await key.waitFor({ timeout: WAIT });
  await key.fill(cfg.key);
  await page.getByRole('button', { name: 'Use this key' }).click();
  await page.getByRole('form', { name: 'API key' }).waitFor({ state: 'hidden' });
}

async function say(page, text) {
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill(text);
  await box.press('Enter');
}

const cards = (page) => page.getByRole('article', { name: /^Confirmation: / });

// collect keeps the page's card times, each with a baseline: two animation
// frames of the same page with no work in them (the floor of "painted").
async function collect(page) {
  const cardTimes = await page.evaluate(() => window.__cardTimes);
  for (const c of cardTimes) {
    c.twoFrames = await page.evaluate(() => new Promise((r) => {
      const t = performance.now();
      requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now() - t)));
    }));
    timings.push(c);
  }
}

async function assertClean(page) {
  assert.deepEqual(page.errors, [], 'page errors');
  assert.deepEqual(await page.evaluate(() => window.__violations), [], 'CSP violations');
}

test('acceptance 1: a card, Approve, Deny, Expired, reload once; the approvals view', async () => {
  const page = await newPage();
  await openChat(page);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agentd.key')), cfg.key, 'key kept in sessionStorage');

  await say(page, 'pay 5');
  const card = cards(page).nth(0);
  await card.waitFor({ timeout: WAIT });
  await card.getByRole('heading', { name: 'pay' }).waitFor();
  await card.getByText('Tool "pay" requires user confirmation').waitFor();
  const args = card.getByRole('region', { name: 'Arguments' });
  assert.match(await args.innerText(), /amount\s+5/);
  const timer = card.getByRole('timer');
  assert.match(await timer.innerText(), /^Expires in 1[45]:\d\d$/);
  const first = await timer.innerText();
  await until(async () => (await timer.innerText()) !== first, 'the countdown to tick');
  await page.getByRole('log', { name: 'Conversation' }).getByText('Paying 5 EUR now. This needs your approval.').waitFor();
  await card.screenshot({ path: join(cfg.screenshots, 'web-card.png') });
  await page.screenshot({ path: join(cfg.screenshots, 'web-chat.png'), clip: { x: 0, y: 0, width: 1000, height: 620 } }); // the README's picture

  // The pending-approvals view (another tab: the key is per tab) lists it.
  const other = await newPage();
  await openChat(other, '#approvals');
  const listed = other.getByRole('list', { name: 'Pending approvals' }).getByRole('article', { name: 'Confirmation: pay' });
  await listed.first().waitFor({ timeout: WAIT });
  await assertClean(other);

  // Approve runs the call and the answer streams in.
  await card.getByRole('button', { name: 'Approve' }).click();
  await card.getByText(/^Approved by alice/).waitFor();
  assert.equal(await card.getByRole('button').count(), 0, 'a decided card has no buttons');
  await page.getByText(/^paid: \{"paid":true/).waitFor({ timeout: WAIT });
  await page.getByRole('log', { name: 'Conversation' }).getByText('completed', { exact: true }).first().waitFor();
  await card.screenshot({ path: join(cfg.screenshots, 'web-card-approved.png') });
  await other.getByRole('button', { name: 'Refresh' }).click();
  await until(async () => (await other.getByRole('list', { name: 'Pending approvals' }).getByRole('article', { name: 'Confirmation: pay' }).count()) === 2,
    'the approved call to leave the pending list (the two embedding calls stay)');

  // Deny, with the keyboard: the reason, then Tab to Deny.
  await say(page, 'pay 5 again');
  const second = cards(page).nth(1);
  await second.waitFor({ timeout: WAIT });
  const reason = second.getByLabel('Reason (optional)');
  await reason.fill('not this month');
  await reason.press('Tab'); // Approve
  await page.keyboard.press('Tab'); // Deny
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Deny');
  await page.keyboard.press('Enter');
  await second.getByText('Denied by alice: not this month').waitFor();
  await page.getByText('not paid, you said: not this month').waitFor({ timeout: WAIT });

  // A card left alone turns Expired (its deadline is 4 s) and loses its buttons.
  await say(page, 'slow');
  const third = cards(page).nth(2);
  await third.waitFor({ timeout: WAIT });
  await third.getByRole('heading', { name: 'PUT /invoices/{id} on billing' }).waitFor();
  assert.match(await third.getByRole('group', { name: 'body' }).innerText(), /memo\s+replaced/);
  await third.getByText('Expired: nothing was done.').waitFor({ timeout: WAIT });
  assert.equal(await third.getByRole('button').count(), 0, 'an expired card has no buttons');
  await page.getByText('The approval expired; I did not replace the invoice.').waitFor({ timeout: WAIT });
  await third.screenshot({ path: join(cfg.screenshots, 'web-card-expired.png') });

  // Reopening the stream mid-conversation resumes after the last event
  // (last_event_id), then a reload renders the whole conversation once.
  const log = page.getByRole('log', { name: 'Conversation' });
  await page.evaluate(() => document.querySelector('agentd-chat')._open());
  await say(page, 'pay 5 once more');
  await cards(page).nth(3).waitFor({ timeout: WAIT });
  await until(async () => (await page.getByText('Waiting for approval.').count()) === 4, 'the fourth wait');
  const before = await log.innerText();
  const seqs = async () => page.evaluate(() => [...document.querySelectorAll('.agentd-log > [data-seq]')].map((e) => Number(e.dataset.seq)));
  const lastBefore = await page.evaluate(() => document.querySelector('agentd-chat').lastSeq);
  assert.match(page.url(), /[?&]c=conv_/);
  await collect(page); // live cards only: a reload replays the old ones
  await page.reload();
  await until(async () => (await page.evaluate(() => document.querySelector('agentd-chat').lastSeq)) === lastBefore, 'the replay');
  await cards(page).nth(3).getByRole('timer').waitFor();
  const after = await log.innerText();
  const strip = (s) => s.replace(/Expires in [\d:]+/g, 'Expires in …');
  assert.equal(strip(after), strip(before), 'the conversation after a reload');
  const s = await seqs();
  assert.equal(new Set(s).size, s.length, 'no event rendered twice');
  assert.equal(await cards(page).count(), 4);
  assert.equal(await page.getByText('Paying 5 EUR now. This needs your approval.').count(), 3);
  await assertClean(page);

  // Readable on a phone: no sideways scrolling.
  const phone = await newPage({ width: 390, height: 844 });
  await openChat(phone, new URL(page.url()).search);
  await cards(phone).nth(3).waitFor({ timeout: WAIT });
  await phone.screenshot({ path: join(cfg.screenshots, 'web-phone.png') });
  assert.ok(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal overflow on a phone');
  await cards(page).nth(3).getByRole('button', { name: 'Deny' }).click();
  await page.getByText(/^not paid/).nth(1).waitFor({ timeout: WAIT });
});

test('acceptance 2: model and tool text containing HTML is shown as text; nothing runs', async () => {
  const page = await newPage();
  await openChat(page);
  await say(page, 'xss please');
  const card = cards(page).nth(0);
  await card.waitFor({ timeout: WAIT });
  const log = page.getByRole('log', { name: 'Conversation' });
  await log.getByText('<script>window.__pwned=2</script> and a <b>bold</b> claim').waitFor();
  assert.match(await card.getByRole('region', { name: 'Arguments' }).innerText(), /<img src=x onerror="window.__pwned=1">/);
  await card.getByRole('button', { name: 'Approve' }).click();
  await log.getByText(/^noted: \{"noted":/).waitFor({ timeout: WAIT });
  // The tool's result, opened with the keyboard, shows the payload as text.
  const tool = log.getByText('Tool note completed');
  await tool.focus();
  await page.keyboard.press('Enter');
  await log.getByText(/"noted": \{[^]*"text": "<img src=x onerror=\\"window\.__pwned=1\\"><script>/).waitFor();
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'a payload ran');
  assert.equal(await page.evaluate(() => document.querySelectorAll('agentd-chat img, agentd-chat script, agentd-chat b').length), 0, 'HTML elements from model text');
  await assertClean(page);
  await collect(page);
});

test('acceptance 3: Edit on a connection card; an invalid edit is refused by the page, and by the server if forced', async () => {
  const page = await newPage();
  const posts = [];
  page.on('request', (r) => { if (r.method() === 'POST' && r.url().endsWith('/approval')) posts.push(r.postData()); });
  await openChat(page);
  await say(page, 'memo');
  const card = cards(page).nth(0);
  await card.waitFor({ timeout: WAIT });
  await card.getByRole('heading', { name: 'PATCH /invoices/{id} on billing' }).waitFor();
  await card.getByText('Changes an invoice the customer sees').waitFor();
  assert.match(await card.getByRole('group', { name: 'path' }).innerText(), /id\s+INV-2002/);
  assert.match(await card.getByRole('group', { name: 'body' }).innerText(), /memo\s+Paid by bank transfer/);
  await card.screenshot({ path: join(cfg.screenshots, 'web-card-connection.png') });

  await card.getByRole('button', { name: 'Edit' }).click();
  const editor = card.getByRole('textbox', { name: 'Edited arguments (JSON)' });
  await editor.waitFor();
  assert.deepEqual(JSON.parse(await editor.inputValue()), { path: { id: 'INV-2002' }, body: { memo: 'Paid by bank transfer', amount: 100 } });
  // Invalid against the tool's schema: refused in the page, nothing sent.
  await editor.fill(JSON.stringify({ path: { id: 'INV-2002' }, body: { memo: 'x', amount: 'lots' } }));
  await card.getByRole('button', { name: 'Approve edited arguments' }).click();
  await card.getByRole('alert').getByText(/Not sent: .*body\.amount: must be number/).waitFor();
  await editor.fill('{"path": {"id": "INV-2002"}, ');
  await card.getByRole('button', { name: 'Approve edited arguments' }).click();
  await card.getByRole('alert').getByText(/not JSON/).waitFor();
  assert.equal(posts.length, 0, 'an invalid edit was sent');
  // Forced past the page's check: the server refuses it, the card stays pending.
  await page.evaluate(() => document.querySelector('agentd-confirmation').sendDecision({ decision: 'edit', arguments: { path: { id: 'INV-2002' }, body: { amount: 'lots' } } }));
  await card.getByRole('alert').getByText(/^edited arguments: /).waitFor();
  assert.equal(posts.length, 1);
  assert.equal(await card.getByRole('button', { name: 'Approve', exact: true }).count(), 1, 'still pending');
  // A valid edit is approved and runs with the edited arguments.
  await editor.fill(JSON.stringify({ path: { id: 'INV-2002' }, body: { memo: 'Paid in cash', amount: 90 } }, null, 2));
  await card.getByRole('button', { name: 'Approve edited arguments' }).click();
  await card.getByText(/^Approved with edited arguments by alice/).waitFor();
  await page.getByText(/^updateInvoice completed: .*Paid in cash/).waitFor({ timeout: WAIT });
  assert.equal(posts.length, 2);
  await assertClean(page);
  await collect(page);
});

test('a stream cut after a card resumes by itself with Last-Event-ID; nothing is shown twice', async () => {
  const page = await newPage();
  await page.goto(cfg.proxy + '/');
  const key = page.getByRole('textbox', { name: 'API key' });
  await key.waitFor({ timeout: WAIT });
  await key.fill(cfg.key);
  await key.press('Enter');
  await say(page, 'pay 5');
  const card = cards(page).nth(0);
  await card.waitFor({ timeout: WAIT });
  // The proxy ended the stream after the card; run_waiting comes on the reconnect.
  await page.getByText('Waiting for approval.').waitFor({ timeout: WAIT });
  await card.getByRole('button', { name: 'Deny' }).click();
  await page.getByText(/^not paid/).waitFor({ timeout: WAIT });
  const s = await page.evaluate(() => [...document.querySelectorAll('.agentd-log > [data-seq]')].map((e) => Number(e.dataset.seq)));
  assert.equal(new Set(s).size, s.length, 'no event rendered twice');
  assert.equal(await page.getByText('Waiting for approval.').count(), 1);
  assert.equal(await cards(page).count(), 1);
  await assertClean(page);
});

test('a file edit card shows its diff', async () => {
  const page = await newPage();
  await openChat(page);
  await say(page, 'fix the notes');
  const card = cards(page).nth(0);
  await card.getByRole('heading', { name: 'edit_file' }).waitFor({ timeout: WAIT });
  const diff = card.getByRole('region', { name: 'Diff' });
  await diff.getByText('-Meeting on Monday', { exact: true }).waitFor();
  await diff.getByText('+Meeting on Tuesday', { exact: true }).waitFor();
  // The file is named on the card apart from the diff; a short diff fits.
  await card.getByRole('region', { name: 'File' }).getByText('notes.md', { exact: true }).waitFor();
  await diff.getByText('1 added, 1 removed', { exact: false }).waitFor();
  assert.equal(await diff.getByRole('button', { name: /Show all/ }).count(), 0, 'no "more" control on a diff that fits');
  await card.screenshot({ path: join(cfg.screenshots, 'web-card-diff.png') });
  await card.getByRole('button', { name: 'Approve' }).click();
  await page.getByText('edit_file completed', { exact: true }).waitFor({ timeout: WAIT });
  await assertClean(page);
  await collect(page);
});

test('a long file diff: the path apart from the diff, and the box says there is more', async () => {
  const page = await newPage();
  await openChat(page);
  await say(page, 'write the report');
  const card = cards(page).nth(0);
  await card.getByRole('heading', { name: 'write_file' }).waitFor({ timeout: WAIT });
  const file = card.getByRole('region', { name: 'File' });
  await file.getByText('report.md', { exact: true }).waitFor();
  const diff = card.getByRole('region', { name: 'Diff' });
  assert.equal(await page.evaluate(([f, d]) => !d.contains(f) && !f.contains(d),
    [await file.elementHandle(), await diff.elementHandle()]), true, 'the path is shown apart from the diff');
  await diff.getByText('80 added, 0 removed · 83 lines', { exact: true }).waitFor();
  const box = diff.locator('pre');
  const clipped = () => box.evaluate((el) => el.scrollHeight > el.clientHeight + 1);
  assert.equal(await clipped(), true, 'the diff is taller than its box');
  const more = diff.getByRole('button', { name: 'Show all 83 lines' });
  await more.waitFor();
  assert.equal(await more.getAttribute('aria-expanded'), 'false');
  await diff.screenshot({ path: join(cfg.screenshots, 'web-card-diff-long.png') });
  await more.click();
  await until(async () => !(await clipped()), 'the whole diff shown');
  await diff.getByText('+report line 80', { exact: true }).waitFor();
  const less = diff.getByRole('button', { name: 'Show less' });
  assert.equal(await less.getAttribute('aria-expanded'), 'true');
  await less.click();
  await until(clipped, 'the diff box closed again');
  await card.getByRole('button', { name: 'Deny' }).click();
  await page.getByText('write_file denied', { exact: true }).waitFor({ timeout: WAIT });
  await assertClean(page);
  await collect(page);
});

test('acceptance 4: <agentd-confirmation> on another origin works when it is in cors_origins, and is refused when not', async () => {
  const q = new URLSearchParams({ key: cfg.key, call: cfg.embedCall, chat: cfg.embedConversation });
  const page = await newPage();
  await page.goto(cfg.allowedOrigin + '/embed.html?' + q);
  const standalone = page.locator('body > agentd-confirmation');
  await standalone.getByRole('heading', { name: 'pay' }).waitFor({ timeout: WAIT });
  const inChat = page.locator('agentd-chat').getByRole('article', { name: 'Confirmation: pay' });
  await inChat.waitFor({ timeout: WAIT }); // the stream works across origins too
  await standalone.getByRole('button', { name: 'Approve' }).click();
  await standalone.getByText(/^Approved by alice/).waitFor();
  await inChat.getByText(/^Approved by alice/).waitFor({ timeout: WAIT }); // via the stream
  await page.locator('agentd-chat').getByText(/^paid: /).waitFor({ timeout: WAIT });
  await assertClean(page);

  // An origin that is not listed: the API answers without CORS headers (403).
  const refused = await newPage();
  const r = new URLSearchParams({ key: cfg.key, call: cfg.refusedCall, copy: '1' });
  await refused.goto(cfg.otherOrigin + '/embed.html?' + r);
  await refused.getByRole('alert').getByText(/^Cannot load the tool call: cannot reach/).waitFor({ timeout: WAIT });
  assert.equal(await refused.getByRole('button', { name: 'Approve' }).count(), 0);
  const forced = await refused.evaluate(async ([base, id, key]) => {
    try {
      await fetch(`${base}/v1/tool-calls/${id}/approval`, { method: 'POST', headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' }, body: '{"decision":"approve"}' });
      return 'sent';
    } catch (e) {
      return 'refused: ' + e.name;
    }
  }, [cfg.base, cfg.refusedCall, cfg.key]);
  assert.equal(forced, 'refused: TypeError');
  // Loading the module itself from agentd is refused for that origin too.
  const mod = await refused.evaluate(async (base) => import(base + '/agentd.js').then(() => 'loaded', (e) => 'refused: ' + e.name), cfg.base);
  assert.equal(mod, 'refused: TypeError');
});
