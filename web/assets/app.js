// app.js wires agentd's own page (GET /): the chat, the pending approvals,
// the API key prompt, and the conversation id in the address (?c=…), so a
// reload shows the same conversation.
import { KEY_STORAGE } from './agentd.js';

const chat = document.querySelector('agentd-chat');
const approvals = document.querySelector('agentd-approvals');
const keyForm = document.getElementById('key-form');
const keyInput = document.getElementById('key-input');

const params = new URLSearchParams(location.search);
if (params.get('c')) chat.setAttribute('conversation', params.get('c'));

chat.addEventListener('agentd-conversation', (e) => {
  const u = new URL(location.href);
  u.searchParams.set('c', e.detail.id);
  history.replaceState(null, '', u);
});

// A 401 from any element: ask for a key (once at a time).
document.addEventListener('agentd-unauthorized', (e) => {
  const had = sessionStorage.getItem(KEY_STORAGE);
  // A request sent with another key than the one in use now (it left
  // before the key was entered) says nothing of the new key: the
  // reconnect after the key was entered asks again with it.
  if (e.detail.key !== undefined && e.detail.key !== (had || '')) return;
  document.getElementById('key-why').textContent = had
    ? 'The server refused this API key (' + e.detail.message + '). Enter another one.'
    : 'This server needs an API key. It is kept in this tab only (sessionStorage).';
  keyForm.hidden = false;
  keyInput.focus();
});

keyForm.addEventListener('submit', (e) => {
  e.preventDefault();
  sessionStorage.setItem(KEY_STORAGE, keyInput.value.trim());
  keyInput.value = '';
  keyForm.hidden = true;
  chat.reconnect();
  if (!document.getElementById('view-approvals').hidden) approvals.refresh();
});

document.getElementById('new-chat').addEventListener('click', () => {
  const u = new URL(location.href);
  u.searchParams.delete('c');
  history.replaceState(null, '', u);
  chat.removeAttribute('conversation');
  location.hash = '#chat';
  location.reload();
});

function show() {
  const onApprovals = location.hash === '#approvals';
  document.getElementById('view-chat').hidden = onApprovals;
  document.getElementById('view-approvals').hidden = !onApprovals;
  document.getElementById('nav-chat').toggleAttribute('aria-current', !onApprovals);
  document.getElementById('nav-approvals').toggleAttribute('aria-current', onApprovals);
  if (onApprovals) approvals.refresh();
}
addEventListener('hashchange', show);
show();

// Ask for a key up front when the server has keys (a 401 tells).
if (!chat.getAttribute('conversation')) {
  chat.client.request('GET', '/v1/tools').catch((err) => {
    if (err.status === 401) document.dispatchEvent(new CustomEvent('agentd-unauthorized', { detail: { message: err.message, key: err.key } }));
  });
}
