// The REST API as the dashboard calls it: the same routes, the same authorization as the CLI. The
// token lives in this tab's sessionStorage only (gone when the tab closes), never in a cookie.

const KEY = 'carve.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function savedToken() {
  return sessionStorage.getItem(KEY) || '';
}

export function saveToken(token) {
  if (token) sessionStorage.setItem(KEY, token);
  else sessionStorage.removeItem(KEY);
}

// Listeners told when the server refuses the token (expired, revoked): the app signs out.
const refused = new Set();
export function onRefused(f) {
  refused.add(f);
  return () => refused.delete(f);
}
// The error of an answer that is not OK, from the API's {error: {code, message}} body; a 401
// tells the listeners, whichever helper made the call.
export function failure(res, body) {
  const e = body && body.error ? body.error : {};
  const err = new ApiError(res.status, e.code || String(res.status), e.message || res.statusText);
  if (res.status === 401) refused.forEach((f) => f(err));
  return err;
}

async function call(method, path, body, token = savedToken()) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!res.ok) throw failure(res, data);
  return { data, headers: res.headers };
}

export async function get(path, token) {
  return (await call('GET', path, undefined, token)).data;
}

export async function getPage(path) {
  const { data, headers } = await call('GET', path);
  // Link: </api/v1/jobs?after=123&limit=50>; rel="next"
  const link = headers.get('Link') || '';
  const m = /<([^>]+)>;\s*rel="next"/.exec(link);
  return { items: data, next: m ? m[1] : null };
}

export async function post(path, body = {}) {
  return (await call('POST', path, body)).data;
}

// The answer's bytes as they came (a log page: its offset counts bytes, not characters).
export async function getBytes(path) {
  const res = await fetch(path, { headers: { Authorization: `Bearer ${savedToken()}` } });
  if (!res.ok) throw failure(res, await res.json().catch(() => null));
  return { bytes: new Uint8Array(await res.arrayBuffer()), headers: res.headers };
}

export async function getText(path) {
  const { bytes, headers } = await getBytes(path);
  return { text: new TextDecoder().decode(bytes), headers };
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}
