// Calls to the real tenant API (/v1, with the demo key) and to the simulator's control API (/sim).

let apiKey = '';

export function useKey(key) { apiKey = key; }

// call answers {method, path, status, ok, json, text}; a network failure is status 0.
async function call(method, path, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (method !== 'GET') {
    // The simulator takes no other kind of request that changes state, body or not (what a page of
    // another site could send without asking).
    init.headers['Content-Type'] = 'application/json';
  }
  if (body !== undefined) {
    init.body = JSON.stringify(body);
  }
  try {
    const res = await fetch(path, init);
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { method, path, status: res.status, ok: res.ok, json, text };
  } catch (err) {
    return { method, path, status: 0, ok: false, json: null, text: String(err) };
  }
}

export const v1 = (method, path, body) => call(method, '/v1' + path, body, { Authorization: 'Bearer ' + apiKey });
export const sim = (method, path, body) => call(method, '/sim' + path, body);
export const session = () => call('GET', '/console/api/session');
