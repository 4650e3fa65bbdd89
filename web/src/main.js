// Carve's dashboard: sign in with an API token, then pages routed by the URL's hash. Every figure
// comes from the REST API with that token, so the dashboard shows exactly what the token may see.
import { render } from 'preact';
import { useEffect, useErrorBoundary, useState } from 'preact/hooks';
import { get, onRefused, savedToken, saveToken } from './api.js';
import { html } from './util.js';
import { Overview } from './pages/overview.js';
import { Jobs } from './pages/jobs.js';
import { Job } from './pages/job.js';
import { Nodes, Node } from './pages/nodes.js';
import { Queues } from './pages/queues.js';
import { Audit } from './pages/audit.js';
import './style.css';

function useRoute() {
  const read = () => {
    const hash = window.location.hash.replace(/^#/, '') || '/';
    const [path, search = ''] = hash.split('?');
    return { parts: path.split('/').filter(Boolean), params: new URLSearchParams(search) };
  };
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const f = () => setRoute(read());
    window.addEventListener('hashchange', f);
    return () => window.removeEventListener('hashchange', f);
  }, []);
  return route;
}

function SignIn({ onSignedIn, why }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(why);
  const submit = async (e) => {
    e.preventDefault();
    try {
      const me = await get('/api/v1/whoami', token.trim());
      saveToken(token.trim());
      onSignedIn(me);
    } catch (err) {
      setError(err.status === 401 ? `the server refused this token: ${err.message}` : err.message);
    }
  };
  return html`<main class="signin">
    <h1>Carve</h1>
    <form onSubmit=${submit}>
      <label for="token">API token</label>
      <input id="token" name="token" type="password" autocomplete="off" value=${token}
        onInput=${(e) => setToken(e.target.value)} placeholder="carve tokens create, or the admin.token file" />
      <button type="submit">Sign in</button>
      ${error && html`<div class="error" role="alert">${error}</div>`}
    </form>
    <p class="hint">The dashboard shows what this token may see, as the CLI and the API do. The
      token stays in this tab only.</p>
  </main>`;
}

const PAGES = [
  ['', 'Overview'],
  ['jobs', 'Jobs'],
  ['nodes', 'Nodes'],
  ['queues', 'Queues'],
  ['audit', 'Audit & usage'],
];

// A path part as typed (a malformed %-escape stays as it is).
function decoded(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

// A page that throws shows what broke, with the navigation still there.
function Guarded({ route, me }) {
  const [error, reset] = useErrorBoundary();
  useEffect(() => reset(), [route]);
  if (error) return html`<div class="page"><div class="error" role="alert">this page failed: ${String(error.message || error)}</div></div>`;
  return html`<${Page} route=${route} me=${me} />`;
}

function Page({ route, me }) {
  const [first, second] = route.parts;
  if (first === 'jobs' && second) return html`<${Job} id=${second} me=${me} />`;
  if (first === 'jobs') return html`<${Jobs} key=${route.params.toString()} params=${route.params} me=${me} />`;
  if (first === 'nodes' && second) return html`<${Node} name=${decoded(second)} me=${me} />`;
  if (first === 'nodes') return html`<${Nodes} me=${me} />`;
  if (first === 'queues') return html`<${Queues} me=${me} />`;
  if (first === 'audit') return html`<${Audit} me=${me} />`;
  return html`<${Overview} me=${me} />`;
}

function App() {
  const route = useRoute();
  const [me, setMe] = useState(null);
  const [why, setWhy] = useState('');
  useEffect(() => {
    if (savedToken()) {
      get('/api/v1/whoami')
        .then(setMe)
        .catch((e) => {
          saveToken('');
          setWhy(e.message);
        });
    }
    return onRefused((e) => {
      saveToken('');
      setMe(null);
      setWhy(`signed out: ${e.message}`);
    });
  }, []);
  if (!me) return html`<${SignIn} onSignedIn=${setMe} why=${why} />`;
  const signOut = () => {
    saveToken('');
    setMe(null);
    setWhy('');
  };
  const who = me.role === 'admin' ? 'admin' : `${me.name} (${me.role}${me.tenant ? `, tenant ${me.tenant}` : ''})`;
  return html`<div class="shell">
    <nav>
      <span class="brand">Carve</span>
      ${PAGES.map(([path, label]) => html`<a href=${`#/${path}`}
        class=${(route.parts[0] || '') === path ? 'active' : ''}>${label}</a>`)}
      <span class="me" data-testid="me">${who}</span>
      <button class="link" onClick=${signOut}>Sign out</button>
    </nav>
    <main><${Guarded} route=${route} me=${me} /></main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
