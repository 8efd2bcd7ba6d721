// The page of `moat ui`: runs, a run, a workflow. Every request carries
// the token of the page's URL; live data comes as server-sent events.
import { h, render } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import dagre from '@dagrejs/dagre';
import './app.css';
import { fold, newEvents } from './fold.js';

const html = htm.bind(h);
const TOKEN = new URLSearchParams(location.search).get('token') || '';
const STATUSES = ['pending', 'running', 'waiting', 'completed', 'failed'];

function api(path, params = {}) {
  const query = new URLSearchParams({ ...params, token: TOKEN });
  return `api/${path}?${query}`;
}

async function getJson(path, params) {
  const response = await fetch(api(path, params));
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  return response.json();
}

async function post(path, body) {
  const response = await fetch(api(path), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body || {}),
  });
  if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);
  return response.json();
}

// ---- formatting

function ago(ms, now) {
  if (!ms) return '-';
  return span(now - ms) + ' ago';
}
function span(ms) {
  if (ms == null || ms < 0) return '-';
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${Math.floor(s % 60)}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}
function duration(run, now) {
  if (!run.startedMs) return '-';
  return span((run.endedMs || now) - run.startedMs);
}
// Usage is cligent's shape (`tokens.totals.input.total`, `cost.amount`
// with its `currency`); events stored before moat wrote it have the
// earlier one (`tokens.input.total`, `cost.usd`), read the same.
function cost(usage, spent) {
  const c = usage?.cost;
  const amount = c?.amount ?? c?.usd ?? spent?.usd;
  if (amount == null) return '-';
  const currency = c?.currency ?? 'USD';
  return currency === 'USD' ? `$${Number(amount).toFixed(4)}` : `${Number(amount).toFixed(4)} ${currency}`;
}
function tokens(usage) {
  const t = usage?.tokens;
  if (!t) return '-';
  const totals = t.totals ?? t;
  const input = totals.input?.total;
  const output = totals.output?.total;
  if (input == null && output == null) return '-';
  return `${input ?? '?'} → ${output ?? '?'}`;
}
function shortId(id) {
  return id ? id.slice(0, 12) : '';
}
function statusOf(run) {
  return run.status === 'failed' && run.reason === 'cancelled' ? 'cancelled' : run.status;
}
function Badge({ status, title }) {
  return html`<span class=${`badge ${status}`} title=${title || status}>${status}</span>`;
}
function brief(value, max = 120) {
  let text = typeof value === 'string' ? value : JSON.stringify(value);
  if (text == null) return '';
  return text.length > max ? text.slice(0, max) + '…' : text;
}

// ---- router

function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  const parts = hash.replace(/^#\/?/, '').split('/');
  return parts;
}

function useNow(every = 1000) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), every);
    return () => clearInterval(timer);
  }, [every]);
  return now;
}

function App() {
  const [page, id, tab = ''] = useRoute();
  let body;
  // Keyed by the run alone: another tab of the same run keeps its live
  // events.
  if (page === 'run' && id) body = html`<${RunPage} key=${id} id=${id} tab=${tab === 'network' ? 'network' : 'events'} />`;
  else if (page === 'workflow' && id) body = html`<${WorkflowPage} key=${id} id=${id} />`;
  else body = html`<${RunsPage} />`;
  return html`
    <header class="top"><a class="brand" href="#/">moat ui</a><a href="#/">Runs</a></header>
    <main>${body}</main>`;
}

// ---- starting a workflow

// Starts (or resumes) a workflow file under the flags of `moat ui`, then
// shows its page: `{file, resume?, fresh?}` as POST /api/workflows takes.
async function startWorkflow(request) {
  const started = await post('workflows', request);
  if (started.run) location.hash = `#/workflow/${started.run}`;
  return started;
}

function StartWorkflow() {
  const [file, setFile] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const start = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await startWorkflow({ file: file.trim() });
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <form class="filters" id="workflow-form" onSubmit=${start}>
      <label>workflow file
        <input id="workflow-file" size="60" placeholder="/absolute/path/to/workflow.toml" value=${file}
          onInput=${(e) => setFile(e.target.value)} />
      </label>
      <button id="workflow-start" type="submit" disabled=${busy || !file.trim()}>Start</button>
    </form>
    ${error && html`<div class="error-banner" id="workflow-error">${error}</div>`}`;
}

// ---- runs

function RunsPage() {
  const [status, setStatus] = useState('');
  const [adapter, setAdapter] = useState('');
  const [runs, setRuns] = useState(null);
  const [error, setError] = useState(null);
  const [adapters, setAdapters] = useState([]);
  const now = useNow();
  useEffect(() => {
    const params = { limit: '1000' };
    if (status === 'live') params.status = 'pending,running,waiting';
    else if (status) params.status = status;
    if (adapter) params.adapter = adapter;
    const source = new EventSource(api('runs/stream', params));
    source.addEventListener('runs', (message) => {
      const list = JSON.parse(message.data);
      setRuns(list);
      setError(null);
      setAdapters((known) => {
        const all = new Set(known);
        for (const run of list) all.add(run.adapter);
        return all.size === known.length ? known : [...all].sort();
      });
    });
    source.addEventListener('failure', (message) => setError(JSON.parse(message.data)));
    source.onerror = () => setError('the connection to moat ui was lost; retrying…');
    source.onopen = () => setError(null);
    return () => source.close();
  }, [status, adapter]);
  return html`
    <h1>Runs</h1>
    <${StartWorkflow} />
    <div class="filters">
      <label>status
        <select id="filter-status" value=${status} onChange=${(e) => setStatus(e.target.value)}>
          <option value="">any</option>
          <option value="live">live (pending, running, waiting)</option>
          ${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
      </label>
      <label>adapter
        <select id="filter-adapter" value=${adapter} onChange=${(e) => setAdapter(e.target.value)}>
          <option value="">any</option>
          ${adapters.map((a) => html`<option value=${a}>${a}</option>`)}
        </select>
      </label>
      <span class="muted">${runs ? `${runs.length} runs` : 'loading…'}</span>
    </div>
    ${error && html`<div class="error-banner">${String(error)}</div>`}
    <table id="runs">
      <thead><tr>
        <th>run</th><th>status</th><th>adapter</th><th>age</th><th class="num">duration</th>
        <th class="num">cost</th><th class="num">tokens</th><th>parent</th><th>prompt</th>
      </tr></thead>
      <tbody>
        ${(runs || []).map((run) => html`
          <tr key=${run.id} data-run-id=${run.id} data-status=${statusOf(run)}>
            <td class="mono"><a href=${run.workflow ? `#/workflow/${run.id}` : `#/run/${run.id}`}>${shortId(run.id)}</a></td>
            <td><${Badge} status=${statusOf(run)} /></td>
            <td>${run.adapter}</td>
            <td>${ago(run.createdMs, now)}</td>
            <td class="num">${duration(run, now)}</td>
            <td class="num" data-col="cost">${cost(run.usage, run.spent)}</td>
            <td class="num" data-col="tokens">${tokens(run.usage)}</td>
            <td class="mono">${run.parent ? html`<a href=${`#/run/${run.parent}`}>${shortId(run.parent)}</a>` : ''}</td>
            <td class="prompt" title=${run.prompt}>${run.role && html`<b class="role">${run.role}</b> `}${brief(run.prompt, 80)}</td>
          </tr>`)}
      </tbody>
    </table>`;
}

// ---- a run

// The events of a run, folded as they come: the answer's text, the
// other events in order (tool calls with their results).
function useEvents(id) {
  const store = useRef(null);
  const [, setTick] = useState(0);
  if (!store.current) store.current = newEvents();
  useEffect(() => {
    const s = store.current;
    let scheduled = false;
    const redraw = () => {
      if (scheduled) return;
      scheduled = true;
      requestAnimationFrame(() => { scheduled = false; setTick((t) => t + 1); });
    };
    const source = new EventSource(api(`runs/${encodeURIComponent(id)}/events`));
    source.addEventListener('events', (message) => {
      for (const event of JSON.parse(message.data)) fold(s, event);
      redraw();
    });
    source.addEventListener('end', () => { s.ended = true; source.close(); redraw(); });
    source.addEventListener('failure', (message) => { s.error = JSON.parse(message.data); source.close(); redraw(); });
    source.onerror = () => { if (!s.ended) { s.error = 'the live stream was interrupted; reconnecting…'; redraw(); } };
    source.onopen = () => { s.error = null; };
    return () => source.close();
  }, [id]);
  return store.current;
}

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

function EventItem({ item }) {
  const p = item.payload || {};
  switch (item.kind) {
    case 'tool': {
      const use = item.use;
      const status = item.result ? item.result.status : 'running';
      return html`<div class="ev tool"><details>
        <summary><b>${use.toolName}</b> ${use.description || brief(use.input, 100)}
          <span class="muted"> · ${status}${item.result?.durationMs != null ? ` · ${span(item.result.durationMs)}` : ''}</span></summary>
        <pre class="json">${JSON.stringify(use.input, null, 2)}</pre>
        ${item.result && html`<pre class="json">${typeof item.result.output === 'string' ? item.result.output : JSON.stringify(item.result.output, null, 2)}</pre>`}
      </details></div>`;
    }
    case 'thinking':
      return html`<div class="ev thinking">${p.summary}</div>`;
    case 'error':
      return html`<div class="ev error"><b>${p.code || 'error'}</b>${p.recoverable ? ' (recoverable)' : ''}: ${p.message}</div>`;
    case 'permission_request':
      return html`<div class="ev permission">asks to use <b>${p.toolName}</b>${p.reason ? `: ${p.reason}` : ''}</div>`;
    case 'init':
      return html`<div class="ev muted">started${p.model ? ` · model ${p.model}` : ''}${p.cwd ? ` · ${p.cwd}` : ''}</div>`;
    case 'done': {
      const u = p.usage || {};
      return html`<div class=${`ev done ${p.status === 'success' ? '' : 'bad'}`} id="done">done: ${p.status}
        <span class="muted"> · ${span(p.durationMs)} · ${plural(u.toolUses ?? 0, 'tool call', 'tool calls')} · tokens ${tokens(u)} · cost ${cost(u)}</span></div>`;
    }
    default:
      return html`<div class="ev"><details><summary class="muted">${item.kind}</summary><pre class="json">${JSON.stringify(p, null, 2)}</pre></details></div>`;
  }
}

function Tree({ nodes, root }) {
  if (!nodes || nodes.length === 0) return root ? html`<p class="muted">no children</p>` : null;
  return html`<ul class=${root ? 'tree root' : 'tree'}>${nodes.map((n) => html`
    <li key=${n.id}><a class="mono" href=${n.workflow ? `#/workflow/${n.id}` : `#/run/${n.id}`}>${shortId(n.id)}</a>
      ${' '}<${Badge} status=${statusOf(n)} /> ${n.adapter}
      <${Tree} nodes=${n.children} /></li>`)}</ul>`;
}

function useRecord(id, every = 1000) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const [again, setAgain] = useState(0);
  useEffect(() => {
    let stop = false;
    let timer;
    const load = async () => {
      try {
        const next = await getJson(`runs/${encodeURIComponent(id)}`);
        if (stop) return;
        setData(next);
        setError(null);
        // Ended: read once more later (children may still end), then stop.
        const ended = ['completed', 'failed'].includes(next.record.status);
        const live = next.children.some(function walk(n) { return !['completed', 'failed'].includes(n.status) || n.children.some(walk); });
        if (!ended || live) timer = setTimeout(load, every);
      } catch (e) {
        if (!stop) { setError(e.message); timer = setTimeout(load, every * 3); }
      }
    };
    load();
    return () => { stop = true; clearTimeout(timer); };
  }, [id, again]);
  return [data, error, () => setAgain((n) => n + 1)];
}

function RunPage({ id, tab }) {
  const [data, error, reload] = useRecord(id);
  const events = useEvents(id);
  const [acting, setActing] = useState(null);
  const now = useNow();
  if (!data) return error ? html`<div class="error-banner">${error}</div>` : html`<p class="muted">loading…</p>`;
  const r = data.record;
  const status = statusOf(r);
  const ended = ['completed', 'failed'].includes(r.status);
  const act = async (what, call) => {
    setActing(what);
    try { await call(); } catch (e) { alert(e.message); }
    setActing(null);
    reload();
  };
  return html`
    <h1>run <span class="mono">${r.id}</span> <${Badge} status=${status} title=${r.reason || r.status} /></h1>
    <p><span id="run-status" data-status=${status}>${status}${r.reason && r.reason !== 'cancelled' ? ` (${r.reason})` : ''}</span>
      ${' · '}${r.adapter} · started ${ago(r.createdMs, now)} · ${duration(r, now)}
      ${r.parent && html` · parent <a class="mono" href=${`#/run/${r.parent}`}>${shortId(r.parent)}</a>`}
      ${data.workflow && html` · <a id="workflow-link" href=${`#/workflow/${r.id}`}>workflow graph</a>`}
      ${' '}<button id="cancel" class="danger" disabled=${ended || acting}
        onClick=${() => act('cancel', () => post(`runs/${encodeURIComponent(r.id)}/cancel`))}>Cancel</button></p>
    ${error && html`<div class="error-banner">${error}</div>`}
    <div class=${tab === 'network' ? 'grid wide' : 'grid'}>
      <section>
        <${Approvals} data=${data} act=${act} acting=${acting} />
        <${Tabs} id=${r.id} tab=${tab} />
        ${tab === 'network' ? html`<${Network} id=${r.id} live=${!ended} />` : html`
        <h2>Answer</h2>
        <div id="answer" class="answer">${events.answer || html`<span class="muted">nothing yet</span>`}</div>
        <h2>Events <span class="muted" id="event-count" data-count=${events.count}>${events.count}${events.ended ? '' : ' · live'}</span></h2>
        ${events.error && html`<div class="error-banner">${String(events.error)}</div>`}
        <div class="events">${events.items.map((item, i) => html`<${EventItem} key=${i} item=${item} />`)}</div>
        ${data.diffAvailable && html`<${Diff} id=${r.id} />`}`}
      </section>
      <aside>
        <div class="panel"><h2 style="margin-top:0">Record</h2><${Record} r=${r} /></div>
        <div class="panel" style="margin-top:16px"><h2 style="margin-top:0">Children</h2><${Tree} nodes=${data.children} root /></div>
      </aside>
    </div>`;
}

// The run's tabs: its answer and events (the default), its network.
function Tabs({ id, tab }) {
  const link = (name, label, hash) => html`<a id=${`tab-${name}`} class=${tab === name ? 'active' : ''}
    href=${`#/run/${id}${hash}`}>${label}</a>`;
  return html`<nav class="tabs">${link('events', 'Events', '')}${link('network', 'Network', '/network')}</nav>`;
}

function Approvals({ data, act, acting }) {
  const list = data.approvals || [];
  if (list.length === 0 && !data.approvalsError) return null;
  const id = encodeURIComponent(data.record.id);
  return html`<h2>Approvals</h2>
    ${data.approvalsError && html`<div class="error-banner">${data.approvalsError}</div>`}
    <div class="panel" id="approvals">${list.map((a) => html`
      <div class="approval" data-number=${a.number}>
        <span class="mono">${a.number}.</span>
        <span class="what"><b>${a.request?.kind ?? 'request'}</b> ${a.request?.reason ?? brief(a.request, 200)}</span>
        ${a.answer
          ? html`<span class="muted">${a.answer.approved ? 'approved' : 'denied'} by ${a.answer.by}</span>`
          : html`<button class="ok" disabled=${acting} onClick=${() => act('approve', () => post(`runs/${id}/approvals/${a.number}`, { decision: 'approve' }))}>Approve</button>
                 <button class="danger" disabled=${acting} onClick=${() => act('deny', () => post(`runs/${id}/approvals/${a.number}`, { decision: 'deny', reason: 'denied in moat ui' }))}>Deny</button>`}
      </div>`)}</div>`;
}

function Record({ r }) {
  const json = (v) => html`<pre class="json">${JSON.stringify(v, null, 2)}</pre>`;
  const workspace = r.options?.workspace;
  return html`<dl class="record">
    <dt>adapter</dt><dd>${r.adapter}</dd>
    <dt>component</dt><dd class="mono">${brief(r.componentSha256, 24)}</dd>
    <dt>trust</dt><dd>${r.trust ?? '-'}</dd>
    <dt>where</dt><dd>${r.worker ? `worker ${r.worker}` : r.ownerPid ? `pid ${r.ownerPid}` : '-'}</dd>
    <dt>prompt</dt><dd>${brief(r.prompt, 400)}</dd>
    ${workspace && html`<dt>workspace</dt><dd>${json(workspace)}</dd>`}
  </dl>
  <details><summary>grants</summary>${json(r.grants)}</details>
  <details><summary>limits</summary>${json(r.limits)}</details>
  <details><summary>options</summary>${json(r.options)}</details>
  ${r.done && html`<details><summary>done</summary>${json(r.done)}</details>`}`;
}

function Diff({ id }) {
  const [diff, setDiff] = useState(null);
  const load = async () => {
    try { setDiff(await getJson(`runs/${encodeURIComponent(id)}/diff`)); } catch (e) { setDiff({ error: e.message }); }
  };
  return html`<h2>Workspace</h2>
    ${!diff && html`<button id="show-diff" onClick=${load}>Show the workspace diff</button>`}
    ${diff && diff.error && html`<div class="error-banner">${diff.error}</div>`}
    ${diff && !diff.error && diff.diff == null && html`<p class="muted">this run has no workspace</p>`}
    ${diff && diff.diff != null && html`<pre class="diff">${diff.diff === '' ? 'no changes' : diff.diff.split('\n').map((line) => html`<div class=${line.startsWith('@@') ? 'hunk' : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : ''}>${line}</div>`)}</pre>
      ${diff.truncated && html`<p class="muted">truncated: \`moat diff ${id}\` shows all of it</p>`}`}`;
}

// ---- a run's network

// The run's traffic (GET /api/runs/ID/traffic): read again every
// `every` ms while the run is live, and once more when it has ended (the
// rows of its last moments).
function useTraffic(id, live, every = 2000) {
  const [traffic, setTraffic] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let stop = false;
    let timer;
    const load = async () => {
      try {
        const next = await getJson(`runs/${encodeURIComponent(id)}/traffic`);
        if (stop) return;
        setTraffic(next);
        setError(null);
      } catch (e) {
        if (!stop) setError(e.message);
      }
      if (!stop && live) timer = setTimeout(load, every);
    };
    load();
    return () => { stop = true; clearTimeout(timer); };
  }, [id, live]);
  return [traffic, error];
}

function bytes(n) {
  if (n == null) return '-';
  if (n < 1000) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(1)} GB`;
}
// A row's time of day, to the millisecond (rows are often milliseconds
// apart).
function clock(ms) {
  if (ms == null) return '-';
  const at = new Date(ms);
  const two = (n) => String(n).padStart(2, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
}
// What a row asked for: `POST http://host:port/path`, `CONNECT host:port`.
function asked(row) {
  const destination = `${row.host}:${row.port}`;
  if (row.kind === 'tunnel') return `CONNECT ${destination}`;
  return `${row.method ?? ''} ${row.scheme ?? 'http'}://${destination}${row.path ?? ''}`;
}
// What moat read a run's model calls used, beside what its adapter
// reported (`moat show`'s metered line).
function spendLine(metered, reported) {
  const total = (u) => (u.inputTokens || 0) + (u.outputTokens || 0);
  const unknown = metered.usageUnknown ? ` (${metered.usageUnknown} of unknown usage)` : '';
  const told = total(reported) === 0 && !reported.calls ? 'nothing' : `${total(reported)} tokens`;
  return `metered ${total(metered)} tokens in ${plural(metered.calls, 'model call', 'model calls')}${unknown}; the adapter reported ${told}`;
}

// A refused row's reason and the flag that would have allowed it.
function Refused({ row }) {
  const flag = row.unmetered ? '--allow-unmetered' : row.wouldAllow ? `--allow-net=${row.wouldAllow}` : null;
  return html`<span class="refused"><b>REFUSED</b>: ${row.refused}</span>${' '}
    ${flag && html`<div class="muted">allow with <code class="flag">${flag}</code></div>`}`;
}

function TrafficRow({ row }) {
  let outcome;
  if (row.refused != null) outcome = html`<${Refused} row=${row} />`;
  else if (row.error != null) outcome = html`${row.status != null ? `${row.status} ` : ''}<span class="refused">failed: ${row.error}</span>`;
  else outcome = html`<span class=${row.status >= 400 ? 'refused' : ''}>${row.status ?? '-'}</span>`;
  const usage = row.usage ? `${row.usage.inputTokens ?? '?'} → ${row.usage.outputTokens ?? '?'}` : row.vendor ? 'unknown' : '';
  return html`<tr data-kind=${row.kind} data-who=${row.who} data-refused=${row.refused != null ? 'true' : 'false'}>
    <td class="mono" title=${row.at ? new Date(row.at).toISOString() : ''}>${clock(row.at)}</td>
    <td data-col="who">${row.program != null && row.pid != null
      ? html`<span class="mono">${row.program}</span> <span class="muted">pid ${row.pid}</span>`
      : row.who}</td>
    <td class="mono what" data-col="what">${asked(row)}${row.secret != null && html` <span class="muted">(secret ${row.secret})</span>`}</td>
    <td data-col="outcome">${outcome}</td>
    <td class="num">${bytes(row.sent)}</td>
    <td class="num">${bytes(row.received)}</td>
    <td class="num">${row.ms != null ? `${row.ms} ms` : '-'}</td>
    <td data-col="model">${row.vendor != null ? `${row.vendor} ${row.model ?? ''}` : ''}</td>
    <td class="num" data-col="tokens">${usage}</td>
    <td class="mono" data-col="allowed-by">${row.allowedBy ?? ''}</td>
  </tr>`;
}

// Every request and connection the run made through moat, allowed or
// refused. Every string here comes from the run: shown as text (never
// markup, never a link).
function Network({ id, live }) {
  const [traffic, error] = useTraffic(id, live);
  if (!traffic) return error ? html`<div class="error-banner">${error}</div>` : html`<p class="muted">loading…</p>`;
  const rows = traffic.rows || [];
  const overflow = Object.entries(traffic.overflow || {});
  return html`
    <h2>Network <span class="muted" id="traffic-count" data-count=${rows.length}>${plural(rows.length, 'row', 'rows')}${live ? ' · live' : ''}</span></h2>
    ${error && html`<div class="error-banner">${error}</div>`}
    ${traffic.metered?.calls > 0 && html`<p id="traffic-metered">${spendLine(traffic.metered, traffic.reported || {})}</p>`}
    ${rows.length === 0 && overflow.length === 0
      ? html`<p class="muted" id="traffic-none">no requests or connections through moat</p>`
      : html`<div class="scroll"><table id="traffic">
      <thead><tr>
        <th>time</th><th>who</th><th>request</th><th>status</th><th class="num">sent</th><th class="num">received</th>
        <th class="num">took</th><th>model</th><th class="num">tokens</th><th>allowed by</th>
      </tr></thead>
      <tbody>${rows.map((row, i) => html`<${TrafficRow} key=${i} row=${row} />`)}</tbody>
    </table></div>`}
    ${overflow.length > 0 && html`
      <h2>Past the rows kept <span class="muted">counted per destination</span></h2>
      <table id="traffic-overflow">
        <thead><tr><th>destination</th><th class="num">allowed</th><th class="num">refused</th><th class="num">sent</th><th class="num">received</th></tr></thead>
        <tbody>${overflow.map(([destination, c]) => html`<tr key=${destination}>
          <td class="mono">${destination}</td><td class="num">${c.allowed ?? 0}</td><td class="num">${c.refused ?? 0}</td>
          <td class="num">${bytes(c.sent)}</td><td class="num">${bytes(c.received)}</td></tr>`)}</tbody>
      </table>`}`;
}

// ---- a workflow

const TASK_COLOURS = {
  completed: ['#e3f4ea', '#1f8a4c'], failed: ['#fbe5e4', '#c4302b'],
  running: ['#e4ecfb', '#2457c5'], pending: ['#f1f1ee', '#7a7f85'],
};

function WorkflowPage({ id }) {
  const [record] = useRecord(id, 1000);
  const [flow, setFlow] = useState(null);
  const [error, setError] = useState(null);
  const now = useNow();
  useEffect(() => {
    let stop = false;
    let timer;
    const load = async () => {
      try {
        const next = await getJson(`runs/${encodeURIComponent(id)}/workflow`);
        if (stop) return;
        setFlow(next);
        setError(null);
        if (next.status !== 'completed' && next.status !== 'failed' && next.status !== 'cancelled') timer = setTimeout(load, 1000);
      } catch (e) {
        if (!stop) { setError(e.message); timer = setTimeout(load, 3000); }
      }
    };
    load();
    return () => { stop = true; clearTimeout(timer); };
  }, [id]);
  const layout = useMemo(() => flow && lay(flow.tasks), [flow && flow.tasks.map((t) => t.id + t.dependsOn.join()).join('|')]);
  if (!flow) return error ? html`<div class="error-banner">${error}</div>` : html`<p class="muted">loading…</p>`;
  const r = record?.record;
  const open = (task) => {
    const run = task.state?.run || task.state?.runs?.[task.state.runs.length - 1];
    if (run) location.hash = `#/run/${run}`;
  };
  // Once its record has ended: resumed where its state says (completed
  // tasks skipped), or run again from the start.
  const ended = r && ['completed', 'failed'].includes(r.status);
  const again = async (request) => {
    try {
      await startWorkflow({ file: flow.file, ...request });
    } catch (e) {
      setError(e.message);
    }
  };
  return html`
    <h1>workflow ${flow.name} <span id="workflow-status" data-status=${flow.status || 'pending'}><${Badge} status=${flow.status || 'pending'} /></span></h1>
    <p class="muted">${flow.file}${flow.startedAt ? ` · started ${flow.startedAt}` : ''}${flow.endedAt ? ` · ended ${flow.endedAt}` : ''}
      ${r && html` · record <a class="mono" href=${`#/run/${r.id}`}>${shortId(r.id)}</a>`}</p>
    ${ended && html`<div class="filters">
      ${flow.status !== 'completed' && html`<button id="workflow-resume" onClick=${() => again({ resume: true })}>Resume</button>`}
      <button id="workflow-again" onClick=${() => again({ fresh: true })}>Run again</button>
    </div>`}
    ${flow.changed && html`<div class="error-banner">the workflow file changed since this run: its tasks may differ from those that ran</div>`}
    ${error && html`<div class="error-banner">${error}</div>`}
    <div class="dag" id="dag">
      <svg width=${layout.width} height=${layout.height} viewBox=${`0 0 ${layout.width} ${layout.height}`}>
        <defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#9aa0a6" /></marker></defs>
        ${layout.edges.map((e) => html`<path d=${e.path} fill="none" stroke="#9aa0a6" stroke-width="1.5" marker-end="url(#arrow)" />`)}
        ${flow.tasks.map((task) => {
          const n = layout.nodes[task.id];
          const st = (task.state?.status || 'PENDING').toLowerCase();
          const [fill, stroke] = TASK_COLOURS[st] || TASK_COLOURS.pending;
          const s = task.state || {};
          const runs = s.runs?.length || 0;
          return html`<g class="node" data-task=${task.id} data-status=${st} transform=${`translate(${n.x - n.width / 2},${n.y - n.height / 2})`} onClick=${() => open(task)}>
            <title>${task.id}: ${st}${s.error ? ` — ${s.error}` : ''}</title>
            <rect width=${n.width} height=${n.height} fill=${fill} stroke=${stroke} />
            <text class="title" x="12" y="21" fill=${stroke}>${task.id}</text>
            <text x="12" y="40" fill="#44484c">${st} · ${task.adapter}</text>
            <text x="12" y="57" fill="#6b7075">${runs} run${runs === 1 ? '' : 's'} · ×${s.iterations || 0} · ${s.duration_ms ? span(s.duration_ms) : '-'}</text>
          </g>`;
        })}
      </svg>
    </div>
    <h2>Tasks</h2>
    <table id="tasks"><thead><tr><th>task</th><th>status</th><th>adapter</th><th class="num">iterations</th><th class="num">attempt</th><th class="num">duration</th><th class="num">tokens</th><th class="num">cost</th><th>runs</th><th>note</th></tr></thead>
      <tbody>${flow.tasks.map((task) => {
        const s = task.state || {};
        return html`<tr data-task=${task.id}><td>${task.id}</td><td><${Badge} status=${(s.status || 'PENDING').toLowerCase()} /></td><td>${task.adapter}</td>
          <td class="num">${s.iterations ?? 0}</td><td class="num">${s.attempts ?? 0}</td><td class="num">${s.duration_ms ? span(s.duration_ms) : '-'}</td>
          <td class="num">${tokens(s.usage)}</td><td class="num">${cost(s.usage)}</td>
          <td class="mono">${[...(s.runs || []), ...(s.run && !(s.runs || []).includes(s.run) ? [s.run] : [])].map((run) => html`<a href=${`#/run/${run}`}>${shortId(run)}</a> `)}</td>
          <td class="muted">${s.blocked_by ? `blocked by ${s.blocked_by}` : brief(s.error || '', 80)}</td></tr>`;
      })}</tbody></table>
    <p class="muted">${now && ''}</p>`;
}

function lay(tasks) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 24, ranksep: 56, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const task of tasks) g.setNode(task.id, { width: 200, height: 66 });
  for (const task of tasks) for (const dep of task.dependsOn) if (g.hasNode(dep)) g.setEdge(dep, task.id);
  dagre.layout(g);
  const nodes = {};
  for (const id of g.nodes()) nodes[id] = g.node(id);
  const edges = g.edges().map((e) => {
    const points = g.edge(e).points;
    return { path: points.map((p, i) => `${i ? 'L' : 'M'}${p.x},${p.y}`).join(' ') };
  });
  const graph = g.graph();
  return { nodes, edges, width: Math.max(graph.width || 0, 200), height: Math.max(graph.height || 0, 80) };
}

render(html`<${App} />`, document.getElementById('app'));
