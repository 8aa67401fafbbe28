// Rendering of the state the server pushes. Every function replaces the content of one part of the page.

import { el, fill, $ } from './dom.js';
import { richBody } from './rich.js';

const time = (ts) => (ts ? new Date(ts).toLocaleTimeString([], { hour12: false }) : '');

// stateBadge renders any status string: the class is derived from it, so a state this page has never heard
// of still shows (with the default style), and the lifecycle states have their styles ready.
export function stateBadge(status) {
  const safe = String(status).toLowerCase().replace(/[^a-z0-9_-]/g, '');
  return el('span', { class: `state state-${safe}` }, status);
}

const userName = (u) => [u.first_name, u.last_name].filter(Boolean).join(' ') || `User ${u.id}`;

// renderBots names the simulator's bots: a user has one chat with each.
export function renderBots(bots) {
  fill($('#bots'), bots.length ? [bots.length > 1 ? 'Bots: ' : 'Bot: ',
    bots.map((b, i) => [i ? ', ' : '', el('b', {}, '@' + b.username), b.default ? ' (shared)' : ''])] : '');
}

// chatList renders the chats as a phone's chat list, each with the bot it is with; pick(key) selects one.
export function renderChatList(chats, selected, keyOf, pick) {
  const list = $('#chat-list');
  fill(list, ...chats.map((c) => {
    const last = c.lines[c.lines.length - 1];
    const preview = last ? (last.contact ? 'Shared a contact' : last.text.split('\n').pop()) : 'no messages yet';
    return el('li', { class: keyOf(c) === selected ? 'selected' : '', dataset: { user: c.user.id, bot: c.bot.username } },
      el('button', { type: 'button', onclick: () => pick(keyOf(c)) },
        el('span', { class: 'avatar', 'aria-hidden': 'true' }, userName(c.user).slice(0, 1)),
        el('span', { class: 'who' }, el('b', {}, userName(c.user)), ' ', el('small', {}, `#${c.user.id}`),
          el('span', { class: 'bot' }, `@${c.bot.username}`),
          c.user.blocked ? el('span', { class: 'tag' }, 'blocked the bot') : null,
          c.user.deleted ? el('span', { class: 'tag' }, 'deleted') : null),
        el('span', { class: 'preview' }, preview)));
  }));
}

// currentKeyboard is the reply keyboard the chat shows: the latest one the bot sent, until the bot removes
// it, or the user answers a one-time keyboard.
export function currentKeyboard(lines) {
  let kb = null;
  for (const line of lines) {
    if (line.from === 'bot' && line.reply_markup) {
      if (Array.isArray(line.reply_markup.keyboard)) kb = line.reply_markup;
      else if (line.reply_markup.remove_keyboard) kb = null;
    } else if (line.from === 'user' && kb && kb.one_time_keyboard) {
      kb = null;
    }
  }
  return kb;
}

// safeLink is a url button's link when the page may open it (http or https), else null: a bot's links are
// outside input.
const safeLink = (url) => (/^https?:\/\//i.test(url || '') ? url : null);

// inlineKeyboard renders a message's inline keyboard under it, as the platform does: a callback button taps
// through the simulator (tap), a url button is a link.
function inlineKeyboard(c, line, tap) {
  const rows = line.reply_markup && line.reply_markup.inline_keyboard;
  if (!Array.isArray(rows)) return null;
  return el('div', { class: 'inline-keys' }, rows.map((row) => el('div', { class: 'keys' }, row.map((button) => {
    if (button.url) {
      const href = safeLink(button.url);
      return href
        ? el('a', { class: 'inline url', href, target: '_blank', rel: 'noopener noreferrer', title: button.url }, button.text, ' ↗')
        : el('span', { class: 'inline url', title: button.url }, button.text, ' ↗');
    }
    return el('button', { type: 'button', class: 'inline', dataset: { callbackData: button.callback_data }, onclick: () => tap(c, line.message_id, button) },
      button.text);
  }))));
}

// renderNotice shows the bot's answer to the user's latest tap (answerCallbackQuery): the notice the
// platform shows at the top of the chat, or an alert; while the bot has not answered, that it has not.
function renderNotice(c) {
  const notice = $('#notice');
  const last = c && c.taps && c.taps[c.taps.length - 1];
  notice.hidden = !last;
  if (!last) return;
  const answer = last.answer;
  notice.classList.toggle('alert', !!(answer && answer.show_alert));
  notice.classList.toggle('waiting', !answer);
  fill(notice, !answer ? 'The bot has not answered the tap yet…' : answer.text || 'The bot answered the tap (no notice).');
}

// renderChat renders one chat as the platform shows it: the bot's messages on the left (the brand line
// first, an inline keyboard under the text, "edited" once the bot edited it), the user's on the right, the
// bot's answer to the latest tap, and the reply keyboard as buttons under the chat.
export function renderChat(c, press, tap) {
  const lines = $('#chat-lines');
  const stick = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 8;
  if (!c) {
    fill($('#chat-title'), 'No chat yet');
    fill($('#chat-bot'), '');
    fill(lines, el('li', { class: 'hint' }, 'Create a link token, then open its deep link as a user: their chat with the bot appears here.'));
    $('#keyboard').hidden = true;
    renderNotice(null);
    return;
  }
  fill($('#chat-title'), el('b', {}, userName(c.user)), ` #${c.user.id}`,
    c.user.phone_number ? el('small', {}, ` ${c.user.phone_number}`) : null,
    c.user.blocked ? el('span', { class: 'tag' }, 'blocked the bot') : null,
    c.user.deleted ? el('span', { class: 'tag' }, 'account deleted') : null);
  fill($('#chat-bot'), 'with ', el('b', {}, `@${c.bot.username}`));
  fill(lines, ...c.lines.map((line) => {
    let body;
    if (line.contact) {
      const who = [line.contact.first_name, line.contact.last_name].filter(Boolean).join(' ');
      const own = line.contact.user_id === c.user.id;
      body = el('span', { class: 'contact' }, own ? 'Shared my contact: ' : 'Shared a contact: ', el('b', {}, who || 'someone'), ` ${line.contact.phone_number}`);
    } else if (line.from === 'bot' && line.html) {
      body = richBody(line);
    } else if (line.from === 'bot') {
      const [first, ...rest] = line.text.split('\n');
      body = first.startsWith('A message from ')
        ? [el('span', { class: 'brand' }, first), rest.length ? '\n' + rest.join('\n') : '']
        : line.text;
    } else {
      body = line.text;
    }
    return el('li', { class: `bubble ${line.from}`, dataset: line.edited_at ? { id: line.message_id, edited: 'true' } : { id: line.message_id } },
      el('span', { class: 'text' }, body),
      line.from === 'bot' ? inlineKeyboard(c, line, tap) : null,
      el('time', { title: line.edited_at ? `edited ${time(line.edited_at)}` : null }, line.edited_at ? 'edited ' : '', time(line.time)));
  }));
  if (stick) lines.scrollTop = lines.scrollHeight;
  renderNotice(c);

  const kb = currentKeyboard(c.lines);
  const keyboard = $('#keyboard');
  keyboard.hidden = !kb;
  fill(keyboard, ...(kb ? kb.keyboard.map((row) => el('div', { class: 'keys' },
    row.map((key) => {
      const button = typeof key === 'string' ? { text: key } : key;
      return el('button', { type: 'button', dataset: button.request_contact ? { requestContact: 'true' } : {}, onclick: () => press(c, button) },
        button.text);
    }))) : []));
}

export function renderUsers(users) {
  fill($('#users tbody'), ...users.map((u) => el('tr', { dataset: { user: u.user_id } },
    el('td', {}, u.user_id),
    el('td', {}, u.messenger_user_id ? `#${u.messenger_user_id}` : '—'),
    el('td', {}, u.verification, u.phone_last4 ? ` ··${u.phone_last4}` : ''),
    el('td', {}, u.prompt ? promptText(u.prompt) : '—'),
    el('td', {}, u.sent),
    el('td', {}, u.delivered))));
}

const promptText = (p) => [stateBadge(p.status), p.last_error_code ? ` ${p.last_error_code} ${p.last_error_message || ''}` : ''];

// renderChoices is what the tenant's user stopped, as GET /v1/users/{id} says (opted_out,
// opted_out_categories, blocked); nothing when the answer has none of them.
export function renderChoices(user) {
  const out = $('#choices');
  const known = user && ['opted_out', 'opted_out_categories', 'blocked'].some((k) => k in user);
  out.hidden = !known;
  if (!known) return;
  const categories = Array.isArray(user.opted_out_categories) ? user.opted_out_categories : [];
  const parts = [];
  if (user.opted_out) parts.push(el('span', { class: 'tag' }, 'stopped this tenant\'s messages'));
  if (categories.length) parts.push(el('span', { class: 'tag' }, `stopped ${categories.join(', ')}`));
  if (user.blocked) parts.push(el('span', { class: 'tag' }, 'blocked the bot'));
  fill(out, 'The user\'s choices: ', parts.length ? parts : 'receives every message');
}

// renderVerification is the tenant's view of its user's verification, the prompt's fate included.
export function renderVerification(user) {
  const out = $('#verification');
  if (!user) { fill(out, 'This user has not asked for a link token yet.'); return; }
  if (!user.messenger_user_id) { fill(out, 'Not linked yet: open the deep link first.'); return; }
  fill(out, el('b', {}, user.verification), user.phone_last4 ? ` (phone ··${user.phone_last4})` : '',
    user.prompt ? [' · prompt ', ...promptText(user.prompt)] : '');
}

export const walkthroughSteps = [
  ['step-link-token', (u) => !!u],
  ['step-deep-link', (u) => !!u && !!u.messenger_user_id],
  ['step-verification', (u) => !!u && (!!u.prompt || u.verification !== 'unverified')],
  ['step-contact', (u) => !!u && u.verification === 'verified'],
  ['step-sent', (u) => !!u && u.sent > 0],
  ['step-delivered', (u) => !!u && u.delivered > 0],
];

export function renderWalkthrough(userID, user) {
  $('#walk-user').textContent = userID;
  for (const [id, done] of walkthroughSteps) {
    $('#' + id).classList.toggle('done', done(user));
  }
}

export function renderNotifications(ns) {
  const now = Date.now();
  fill($('#notifications tbody'), ...ns.map((n) => {
    let error = n.last_error_code ? `${n.last_error_code} ${n.last_error_message || ''}` : '';
    if (n.status === 'retrying' && n.next_attempt_at) {
      const secs = Math.max(0, Math.round((Date.parse(n.next_attempt_at) - now) / 1000));
      error += ` · next try in ${secs} s`;
    }
    // A held one (send_at, quiet hours, a digest's window) says when it goes; a digest's items say which
    // digest, and once it went how many items its one message held.
    if (n.status === 'scheduled' && n.send_at) error += `${error ? ' · ' : ''}goes at ${time(n.send_at)}`;
    if (n.digest_key) {
      error += `${error ? ' · ' : ''}digest ${n.digest_key}` + (n.digest_size ? ` (one message of ${n.digest_size})` : '');
    }
    return el('tr', { dataset: { id: n.tracking_id, status: n.status } },
      // The whole id: UUIDv7s share their first characters (a timestamp), so a prefix collides.
      el('td', { class: 'mono id' }, n.tracking_id,
        el('button', { type: 'button', class: 'copy', title: 'copy the tracking id', 'aria-label': 'copy the tracking id',
          onclick: () => navigator.clipboard?.writeText(n.tracking_id) }, '⧉')),
      el('td', {}, n.user_id),
      el('td', {}, n.priority),
      // An edit of its replace_key's message (§13) says so, and a message deleted on request too.
      el('td', {}, stateBadge(n.status), n.delivered_as === 'edited' ? ' edited' : '', n.message_deleted_at ? ' · message deleted' : ''),
      el('td', {}, n.attempts),
      el('td', { class: 'error' }, error),
      el('td', {}, time(n.updated_at)));
  }));
}

export function renderFaults(faults, stats) {
  $('#faults').hidden = !faults;
  if (!faults) return;
  $('#fault-429').checked = (faults.rate_429 || 0) >= 1;
  $('#fault-5xx').checked = (faults.error_rate_5xx || 0) >= 1;
  $('#fault-latency').checked = (faults.latency_ms || 0) > 0;
  $('#sim-stats').textContent = stats
    ? `sendMessage calls ${stats.sends} · delivered ${stats.delivered} · injected 429 ${stats.injected_429} · injected 5xx ${stats.injected_5xx} · refused ${stats.rejected}`
    : '';
}

// showResult prints an API answer: the request line, the status and the body.
export function showResult(target, res) {
  const body = res.json ? JSON.stringify(res.json, null, 2) : res.text;
  $(target).textContent = `${res.method} ${res.path} → ${res.status || 'no answer'}\n${body}`;
  $(target).classList.toggle('failed', !res.ok);
}
