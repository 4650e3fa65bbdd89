// The event log read as `carve events` reads it: pages in sequence order, narrowed by the server
// (?job=&type=&since_us=), going on from where the last page's scan ended (X-Carve-Scanned-To).
import { useEffect, useRef, useState } from 'preact/hooks';
import { failure, query, savedToken } from './api.js';

const PAGE = 1000;

async function scan(params, after) {
  const res = await fetch(`/api/v1/events${query({ ...params, after, limit: PAGE })}`, {
    headers: { Authorization: `Bearer ${savedToken()}` },
  });
  const body = await res.json().catch(() => null);
  if (!res.ok) throw failure(res, body);
  const scanned = Number(res.headers.get('X-Carve-Scanned') || 0);
  const to = Number(res.headers.get('X-Carve-Scanned-To') || after);
  return { events: body || [], scanned, to };
}

// The matching events, the newest last, kept up to date every `ms`: each poll reads only what was
// appended since the last one. At most `max` are kept (the newest).
export function useEvents(params, ms = 3000, max = 500) {
  const [state, setState] = useState({ events: [], error: null, done: false });
  const key = JSON.stringify(params);
  const cursor = useRef(0);
  useEffect(() => {
    cursor.current = 0;
    setState({ events: [], error: null, done: false });
    let live = true;
    let timer = 0;
    const poll = async () => {
      try {
        for (;;) {
          const page = await scan(params, cursor.current);
          if (!live) return;
          cursor.current = page.to;
          if (page.events.length) {
            setState((s) => ({ ...s, events: [...s.events, ...page.events].slice(-max), error: null }));
          }
          if (page.scanned < PAGE) break;
        }
        setState((s) => ({ ...s, done: true }));
      } catch (error) {
        if (live) setState((s) => ({ ...s, error }));
      }
      if (live && ms > 0) timer = setTimeout(poll, ms);
    };
    poll();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [key]);
  return state;
}
