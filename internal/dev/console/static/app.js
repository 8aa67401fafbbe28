// The dev console: the server pushes the state (server-sent events), the page renders it, and every
// button calls the real tenant API or the simulator's control API. No polling here.

import { $, el, fill } from './dom.js';
import { v1, sim, session, useKey } from './api.js';
import * as view from './render.js';
import { richBody } from './rich.js';

// selected is the key of the chat shown; want, the chat a deep link just opened, selected once it appears;
// choices, what the tenant's user stopped (GET /v1/users/{id}), read again whenever the state changes.
const ui = { state: null, selected: null, want: null, deepLink: '', choices: { busy: false, again: false } };

const tenantUser = () => $('#user-id').value.trim() || 'alice';
const linkUser = () => Number($('#open-link-user').value) || 1001;
// A simulated user without a phone number shares this one.
const phoneOf = (user) => user.phone_number || '+1555' + String(user.id).padStart(7, '0').slice(-7);
// A chat is a user's chat with one bot: the key names both.
const chatKey = (c) => `${c.bot.id}:${c.user.id}`;
const selectedChat = () => ui.state?.chats.find((c) => chatKey(c) === ui.selected) || null;
// The simulator's routes about a chat act on its bot.
const ofBot = (chat) => `?bot=${chat.bot.id}`;
// The username a deep link opens (https://t.me/<bot>?start=… or tg://resolve?domain=<bot>&start=…).
function linkBot(url) {
  try {
    const u = new URL(url);
    return (u.protocol === 'tg:' ? u.searchParams.get('domain') : u.pathname.split('/').pop()) || '';
  } catch {
    return '';
  }
}

function render() {
  const st = ui.state;
  if (!st) return;
  const wanted = ui.want && st.chats.find((c) => c.user.id === ui.want.user && c.bot.username.toLowerCase() === ui.want.bot);
  if (wanted) {
    ui.selected = chatKey(wanted);
    ui.want = null;
  }
  if (!selectedChat() && st.chats.length) ui.selected = chatKey(st.chats[0]);
  const chat = selectedChat();
  view.renderBots(st.bots);
  view.renderChatList(st.chats, ui.selected, chatKey, (key) => { ui.selected = key; render(); });
  view.renderChat(chat, press, tap);
  const user = st.users.find((u) => u.user_id === tenantUser());
  view.renderUsers(st.users);
  view.renderVerification(user);
  view.renderWalkthrough(tenantUser(), user);
  view.renderNotifications(st.notifications);
  view.renderFaults(st.faults, st.stats);
  $('#block').textContent = chat?.user.blocked ? 'Unblock the bot' : 'Block the bot';
  for (const id of ['#block', '#delete-account', '#share-foreign']) $(id).disabled = !chat || chat.user.deleted;
  $('#say-form button').disabled = !chat || chat.user.deleted;
  $('#messenger').classList.toggle('no-sim', !st.faults);
}

// A button of the reply keyboard: "Share my phone number" shares the user's own contact; any other sends
// its text, as the platform does.
async function press(chat, button) {
  const res = button.request_contact
    ? await sim('POST', `/users/${chat.user.id}/share-contact${ofBot(chat)}`, { phone_number: phoneOf(chat.user) })
    : await sim('POST', `/users/${chat.user.id}/message${ofBot(chat)}`, { text: button.text });
  view.showResult('#user-result', res);
}

// A callback button of an inline keyboard: the user taps it, and the bot gets a callback_query.
async function tap(chat, messageID, button) {
  const res = await sim('POST', `/users/${chat.user.id}/tap${ofBot(chat)}`, { message_id: messageID, callback_data: button.callback_data });
  view.showResult('#user-result', res);
}

// readChoices reads what the tenant's user stopped in the chat or had stopped (GET /v1/users/{id}): one
// request at a time, once more if the state changed meanwhile. A user the tenant has not seen, or an API
// without these fields, shows nothing.
async function readChoices() {
  const c = ui.choices;
  if (c.busy) { c.again = true; return; }
  c.busy = true;
  const userID = tenantUser();
  const res = await v1('GET', `/users/${encodeURIComponent(userID)}`);
  c.busy = false;
  if (userID === tenantUser()) view.renderChoices(res.ok ? res.json : null);
  if (c.again) { c.again = false; readChoices(); }
}

// openLink opens a deep link as the user, in the bot it names (any of the simulator's), and shows that chat.
async function openLink(url, userID) {
  if (!url) return;
  if (!ui.state?.chats.some((c) => c.user.id === userID)) {
    await sim('POST', '/users', { id: userID, phone_number: phoneOf({ id: userID }) });
  }
  ui.want = { bot: linkBot(url).toLowerCase(), user: userID };
  render();
  view.showResult('#user-result', await sim('POST', `/users/${userID}/open-link`, { url }));
}

function bind() {
  $('#user-id').addEventListener('input', () => { render(); readChoices(); });
  $('#open-link-user').addEventListener('input', () => { $('#open-as').textContent = linkUser(); });

  $('#create-link-token').addEventListener('click', async () => {
    const res = await v1('POST', '/link-token', { user_id: tenantUser() });
    view.showResult('#tenant-result', res);
    if (!res.ok) return;
    ui.deepLink = res.json.deep_link;
    const a = $('#deep-link-url');
    a.textContent = ui.deepLink;
    if (/^https?:\/\//.test(ui.deepLink)) a.href = ui.deepLink;
    $('#deep-link').hidden = false;
    $('#open-link-url').value = ui.deepLink;
  });
  // The deep link opens in the simulated messenger, as the user it is meant for.
  $('#deep-link-url').addEventListener('click', (e) => { e.preventDefault(); openLink(ui.deepLink, linkUser()); });
  $('#open-deep-link').addEventListener('click', () => openLink(ui.deepLink, linkUser()));
  $('#open-link-form').addEventListener('submit', (e) => {
    e.preventDefault();
    openLink($('#open-link-url').value.trim(), linkUser());
  });

  $('#start-verification').addEventListener('click', async () => {
    view.showResult('#tenant-result', await v1('POST', '/phone-verification/start', { user_id: tenantUser() }));
  });
  $('#send-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { user_id: tenantUser(), message: $('#message').value, priority: Number($('#priority').value) };
    // The options go out only when set, so that a plain send stays the request the walkthrough shows.
    if ($('#send-format').value) body.format = $('#send-format').value;
    const buttons = $('#send-buttons').value.split('\n').map((l) => l.trim()).filter(Boolean)
      .map((l) => { const i = l.lastIndexOf('|'); return [{ text: l.slice(0, i).trim(), url: l.slice(i + 1).trim() }]; });
    if (buttons.length) body.buttons = buttons;
    if ($('#send-category').value.trim()) body.category = $('#send-category').value.trim();
    if ($('#send-at').value) body.send_at = new Date($('#send-at').value).toISOString();
    view.showResult('#tenant-result', await v1('POST', '/send', body));
  });

  bindTemplates();

  $('#say-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const chat = selectedChat();
    const text = $('#say-text').value;
    if (!chat || !text) return;
    $('#say-text').value = '';
    view.showResult('#user-result', await sim('POST', `/users/${chat.user.id}/message${ofBot(chat)}`, { text }));
  });
  $('#share-foreign').addEventListener('click', async () => {
    const chat = selectedChat();
    if (!chat) return;
    // Someone else's contact: another user id, another number. Herald must not verify with it.
    const body = { phone_number: '+15559990000', contact_user_id: 999000 + (chat.user.id % 1000) };
    view.showResult('#user-result', await sim('POST', `/users/${chat.user.id}/share-contact${ofBot(chat)}`, body));
  });
  $('#block').addEventListener('click', async () => {
    const chat = selectedChat();
    if (!chat) return;
    view.showResult('#user-result', await sim('POST', `/users/${chat.user.id}/${chat.user.blocked ? 'unblock' : 'block'}${ofBot(chat)}`));
  });
  $('#delete-account').addEventListener('click', async () => {
    const chat = selectedChat();
    if (!chat) return;
    view.showResult('#user-result', await sim('POST', `/users/${chat.user.id}/delete`));
  });

  for (const id of ['#fault-429', '#fault-5xx', '#fault-latency']) {
    $(id).addEventListener('change', async () => {
      const faults = {};
      if ($('#fault-429').checked) Object.assign(faults, { rate_429: 1, retry_after: 2 });
      if ($('#fault-5xx').checked) faults.error_rate_5xx = 1;
      if ($('#fault-latency').checked) faults.latency_ms = 800;
      view.showResult('#user-result', await sim('POST', '/faults', faults));
    });
  }
}

// The Templates card (spec v1-extensions §12): save (PUT), list, preview for the tenant's user, send.
function bindTemplates() {
  const name = () => $('#template-name').value.trim();
  // parsed reads a JSON field; a typo is shown, not sent.
  const parsed = (id) => {
    try {
      return JSON.parse($(id).value || '{}');
    } catch (err) {
      view.showResult('#tenant-result', { method: 'JSON', path: id, status: 0, ok: false, json: null, text: String(err) });
      return undefined;
    }
  };
  const localeOf = () => $('#template-locale').value.trim() || undefined;
  const list = async () => {
    const res = await v1('GET', '/templates');
    if (!res.ok) return;
    fill($('#template-list'), res.json.data.map((t) => el('li', {},
      el('a', { href: '#', onclick: (e) => { e.preventDefault(); load(t.name); } }, t.name),
      ` v${t.version} · ${t.format} · ${t.locale_tags.join(', ')}`)));
  };
  const load = async (n) => {
    const res = await v1('GET', `/templates/${encodeURIComponent(n)}`);
    view.showResult('#tenant-result', res);
    if (!res.ok) return;
    $('#template-name').value = res.json.name;
    $('#template-format').value = res.json.format;
    $('#template-default').value = res.json.default_locale;
    $('#template-locales').value = JSON.stringify(res.json.locales, null, 1);
  };
  $('#template-save').addEventListener('click', async () => {
    const locales = parsed('#template-locales');
    if (locales === undefined) return;
    const body = { format: $('#template-format').value, default_locale: $('#template-default').value.trim(), locales };
    view.showResult('#tenant-result', await v1('PUT', `/templates/${encodeURIComponent(name())}`, body));
    list();
  });
  $('#template-preview').addEventListener('click', async () => {
    const data = parsed('#template-data');
    if (data === undefined) return;
    const res = await v1('POST', `/templates/${encodeURIComponent(name())}/preview`, { data, user_id: tenantUser(), locale: localeOf() });
    view.showResult('#tenant-result', res);
    const box = $('#template-rendered');
    box.hidden = !res.ok;
    if (!res.ok) return;
    // As the chat would show it: html through the same inert rebuild as a bot's message, text as text.
    const p = res.json;
    fill(box.querySelector('.text'), p.format === 'html' ? richBody({ html: p.message }) : p.message);
    box.dataset.locale = p.locale;
  });
  $('#template-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const data = parsed('#template-data');
    if (data === undefined) return;
    view.showResult('#tenant-result', await v1('POST', '/send', { user_id: tenantUser(), template: name(), data, locale: localeOf() }));
  });
  list();
}

function listen() {
  const conn = $('#connection');
  const events = new EventSource('/console/api/events');
  events.addEventListener('open', () => { conn.textContent = 'live'; conn.className = 'connection live'; });
  events.addEventListener('error', () => { conn.textContent = 'reconnecting…'; conn.className = 'connection down'; });
  events.addEventListener('state', (e) => {
    ui.state = JSON.parse(e.data);
    render();
    readChoices();
  });
}

async function main() {
  const s = await session();
  if (s.ok) {
    useKey(s.json.api_key);
    $('#tenant-id').textContent = s.json.tenant;
    $('#openapi-link').href = s.json.openapi;
  }
  bind();
  listen();
}

main();
