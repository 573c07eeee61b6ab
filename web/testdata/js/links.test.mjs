// Decision links in a real browser (SPEC §11.4, issue 22 acceptance 5).
// Started by TestDecisionLinksInBrowser (cmd/agentd/links_e2e_test.go) with
// AGENTD_LINK_TEST, a JSON object: chromium, base (the agentd server), key
// (an operator key, to read the call), callId, approve and deny (the
// call's links), tampered (the approve link with one character changed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const cfg = JSON.parse(process.env.AGENTD_LINK_TEST || '{}');
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

async function callStatus() {
  const r = await fetch(`${cfg.base}/v1/tool-calls/${cfg.callId}`, { headers: { Authorization: `Bearer ${cfg.key}` } });
  assert.equal(r.status, 200);
  return (await r.json()).status;
}

test('a decision link shows the card, decides once on its button, then is spent', async () => {
  const page = await (await browser.newContext()).newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));

  // Opening the link (what a mail scanner does too) decides nothing.
  const res = await page.goto(cfg.approve);
  assert.equal(res.status(), 200);
  const h = res.headers();
  assert.match(h['content-security-policy'], /frame-ancestors 'none'/);
  assert.match(h['content-security-policy'], /default-src 'none'/);
  assert.equal(h['x-frame-options'], 'DENY');
  assert.equal(h['cache-control'], 'no-store');
  assert.equal(await page.locator('#tool').textContent(), 'pay');
  assert.match(await page.locator('#arguments').textContent(), /"amount": 5/);
  assert.ok(await page.locator('#deadline').count() === 1, 'the deadline is shown');
  assert.equal(await page.locator('script').count(), 0, 'the page sends no script');
  const approve = page.getByRole('button', { name: 'Approve' });
  assert.ok(await approve.isVisible());
  assert.equal(await page.getByRole('button', { name: 'Deny' }).count(), 0, 'one button: the link\'s decision');
  await page.reload();
  assert.equal(await callStatus(), 'requires_confirmation', 'a GET of the link decided the call');

  // Pressing the button decides.
  await Promise.all([page.waitForURL(cfg.approve), approve.click()]);
  assert.match(await page.locator('h1').textContent(), /Decision recorded/);
  assert.match(await page.locator('#message').textContent(), /Approved/);

  // The same link again: spent.
  const again = await page.goto(cfg.approve);
  assert.equal(again.status(), 410);
  assert.match(await page.locator('#message').textContent(), /already used/);

  // One character changed: not found.
  const tampered = await page.goto(cfg.tampered);
  assert.equal(tampered.status(), 404);

  // The deny link of the decided call: dead, 409.
  const deny = await page.goto(cfg.deny);
  assert.equal(deny.status(), 409);
  assert.deepEqual(errors, []);
});
