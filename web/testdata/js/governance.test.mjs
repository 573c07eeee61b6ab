// The card's approval governance in a real browser (SPEC §11.1–§11.3,
// docs/web.md). Started by TestWebGovernanceInBrowser
// (cmd/agentd/webgov_e2e_test.go) with AGENTD_GOV_TEST, a JSON object:
// chromium; quorumBase (a server whose calls need two operators, with a
// reminder 15 s before a 20 s deadline and max_extension 1h), quorumKey
// (the page's operator key) and otherKey (a second operator's);
// rememberBase (a server whose card offers remember) and rememberKey;
// screenshots (a folder).
// Elements are found by role and name, as a person would.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const cfg = JSON.parse(process.env.AGENTD_GOV_TEST || '{}');
const WAIT = 30_000;
let browser;

before(async () => {
  browser = await chromium.launch({
    executablePath: cfg.chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
});

after(async () => { await browser?.close(); });

async function openChat(base, key, path = '/') {
  const page = await (await browser.newContext({ viewport: { width: 1000, height: 900 } })).newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  await page.goto(base + path);
  const box = page.getByRole('textbox', { name: 'API key' });
  await box.waitFor({ timeout: WAIT });
  await box.fill(key);
  await page.getByRole('button', { name: 'Use this key' }).click();
  await page.getByRole('form', { name: 'API key' }).waitFor({ state: 'hidden' });
  return page;
}

async function say(page, text) {
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill(text);
  await box.press('Enter');
}

async function api(base, key, method, path, body) {
  const r = await fetch(base + path, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await r.json();
  assert.equal(r.status, 200, `${method} ${path}: ${JSON.stringify(data)}`);
  return data;
}

const cards = (page) => page.getByRole('article', { name: /^Confirmation: / });
const callIdOf = (card) => card.evaluate((el) => el.event.tool_call_id);

test('a quorum-2 card shows 1 of 2 approvals, a reminder, and an extended countdown', async () => {
  const page = await openChat(cfg.quorumBase, cfg.quorumKey);
  await say(page, 'pay the bill');
  const card = cards(page).nth(0);
  await card.waitFor({ timeout: WAIT });
  const id = await callIdOf(card);
  assert.equal(await card.getByRole('button', { name: /remember/ }).count(), 0, 'a quorum card offers remember');

  // Another operator approves elsewhere: the card counts it.
  await api(cfg.quorumBase, cfg.otherKey, 'POST', `/v1/tool-calls/${id}/approval`, { decision: 'approve' });
  await card.getByText('1 of 2 approvals').waitFor({ timeout: WAIT });

  // The reminder (15 s before the 20 s deadline) is said, and the countdown goes on.
  const notice = card.getByRole('status').filter({ hasText: /^Reminder: this approval expires in \d+ s\.$/ });
  await notice.waitFor({ timeout: WAIT });
  const timer = card.getByRole('timer');
  assert.match(await timer.innerText(), /^Expires in 0:[01]\d$/);
  const before = await timer.locator('time').getAttribute('datetime');

  // An extension moves the shown deadline.
  const ext = await api(cfg.quorumBase, cfg.otherKey, 'POST', `/v1/tool-calls/${id}/extend`, { by: '10m' });
  await card.getByRole('status').filter({ hasText: /^Deadline extended by 10m \(op2\)\.$/ }).waitFor({ timeout: WAIT });
  await page.waitForFunction(() => /^Expires in 10:\d\d$/.test(document.querySelector('.agentd-countdown')?.innerText || ''), null, { timeout: WAIT });
  const after = await timer.locator('time').getAttribute('datetime');
  assert.notEqual(after, before, 'the deadline did not move');
  assert.equal(Date.parse(after), Date.parse(ext.requires_approval_at));
  await card.screenshot({ path: join(cfg.screenshots, 'web-card-quorum.png') });

  // The page's operator is the second approval: the call runs.
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  await card.getByText(/^Approved by /).waitFor({ timeout: WAIT });
  await page.getByText(/^paid: /).waitFor({ timeout: WAIT });
  assert.deepEqual(page.errors, []);
});

test('approve and remember skips the next identical card; Revoke brings it back', async () => {
  const page = await openChat(cfg.rememberBase, cfg.rememberKey);
  await say(page, 'pay the bill');
  const card = cards(page).nth(0);
  await card.waitFor({ timeout: WAIT });
  await card.screenshot({ path: join(cfg.screenshots, 'web-card-remember.png') });
  await card.getByRole('button', { name: 'Approve and remember for this conversation' }).click();
  await card.getByText(/^Approved by owner/).waitFor({ timeout: WAIT });
  const grant = card.getByRole('group', { name: 'Remembered grant' });
  await grant.getByText(/^Remembered for this conversation until /).waitFor({ timeout: WAIT });
  await page.getByText(/^paid: /).first().waitFor({ timeout: WAIT });
  await card.screenshot({ path: join(cfg.screenshots, 'web-card-grant.png') });
  const grants = await api(cfg.rememberBase, cfg.rememberKey, 'GET', '/v1/grants');
  assert.equal(grants.grants.length, 1);
  assert.equal(grants.grants[0].scope, 'conversation');
  assert.equal(grants.grants[0].tool_call_id, await callIdOf(card));

  // The identical call runs without a card, under the grant.
  await say(page, 'pay it again');
  await page.getByText(/no card: remembered grant of owner/).waitFor({ timeout: WAIT });
  await until(async () => (await page.getByText(/^paid: /).count()) === 2, 'the second answer');
  assert.equal(await cards(page).count(), 1, 'the identical call showed a card');

  // Revoke: the grant ends, and the next identical call asks again.
  await grant.getByRole('button', { name: 'Revoke' }).click();
  await grant.getByText(/^Grant revoked/).waitFor({ timeout: WAIT });
  assert.equal((await api(cfg.rememberBase, cfg.rememberKey, 'GET', '/v1/grants')).grants.length, 0);
  await say(page, 'pay the bill');
  await cards(page).nth(1).waitFor({ timeout: WAIT });
  await cards(page).nth(1).getByRole('button', { name: 'Approve', exact: true }).click();
  await cards(page).nth(1).getByText(/^Approved by owner/).waitFor({ timeout: WAIT });
  await until(async () => (await page.getByText(/^paid: /).count()) === 3, 'the third answer');

  // A card of the approvals view (no stream) shows its grant too.
  await say(page, 'pay the bill');
  await cards(page).nth(2).waitFor({ timeout: WAIT });
  const list = await openChat(cfg.rememberBase, cfg.rememberKey, '/#approvals');
  const listed = list.getByRole('list', { name: 'Pending approvals' }).getByRole('article', { name: 'Confirmation: pay' });
  await listed.waitFor({ timeout: WAIT });
  await listed.getByRole('button', { name: 'Approve and remember for this conversation' }).click();
  const listedGrant = listed.getByRole('group', { name: 'Remembered grant' });
  await listedGrant.getByText(/^Remembered for this conversation until /).waitFor({ timeout: WAIT });
  await listedGrant.getByRole('button', { name: 'Revoke' }).click();
  await listedGrant.getByText(/^Grant revoked/).waitFor({ timeout: WAIT });
  // The chat's card of that call follows: approved, its grant shown and then revoked (the stream).
  await cards(page).nth(2).getByRole('group', { name: 'Remembered grant' }).getByText(/^Grant revoked/).waitFor({ timeout: WAIT });
  assert.equal((await api(cfg.rememberBase, cfg.rememberKey, 'GET', '/v1/grants')).grants.length, 0);
  assert.deepEqual(page.errors, []);
  assert.deepEqual(list.errors, []);
});

async function until(fn, what, timeout = WAIT) {
  const end = Date.now() + timeout;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}
