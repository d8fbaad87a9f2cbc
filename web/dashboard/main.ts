// The dashboard page: four views (cluster, pressure, deployments, why) drawn from the frames the
// server pushes over one EventSource. Each frame is the whole picture; the visible view is redrawn
// from it, panels the operator opened (an explanation, a diff) and the audit filter stay put.
import type { ActionKind, ActionResult, AuditView, DashboardState, NodeView, PressurePoints, RolloutView } from '../../src/dashboard/wire.js';
import type { DeploymentStatusRow } from '../../src/app/status.js';
import { canaryPhase, type CanaryPhase } from '../../src/api/reasons/rollout.js';
import { Charts } from './charts.js';
import { bytes, cores, duration, esc, h, meter, pct, raw, type Raw } from './html.js';
import './style.css';

type View = 'cluster' | 'pressure' | 'deployments' | 'why';
const VIEWS: View[] = ['cluster', 'pressure', 'deployments', 'why'];
/** Drawing a thousand rows on every frame makes the page sluggish; nobody reads past a few hundred. */
const MAX_REPLICA_ROWS = 200;

/** What the e2e test and the benchmark read: render counts and times. */
interface Probe {
  frames: number;
  renders: number;
  firstRenderMs?: number;
  lastRenderMs: number;
  maxRenderMs: number;
  revision: number;
}
const probe: Probe = { frames: 0, renders: 0, lastRenderMs: 0, maxRenderMs: 0, revision: 0 };
(window as unknown as { __dash: Probe }).__dash = probe;

let state: DashboardState | undefined;
const audit: AuditView[] = [];
const AUDIT_KEEP = 5000;
const charts = new Charts(() => state?.thresholds ?? { trigger: 0.85, dstCap: 0.75 });
const allowActions = document.body.dataset.actions === 'true';
const $ = <T extends HTMLElement = HTMLElement>(sel: string) => document.querySelector<T>(sel)!;

function layout(): void {
  $('#app').innerHTML = h`
<header><h1>jaco</h1><nav>${VIEWS.map((v) => h`<a href="#${v}" data-view="${v}">${v[0]!.toUpperCase() + v.slice(1)}</a>`)}</nav><span id="conn" class="conn">connecting…</span></header>
<main>
  <section id="view-cluster" data-section="cluster"><div class="live"></div></section>
  <section id="view-pressure" data-section="pressure"><p class="hint">Per node: CPU and memory EWMA (the rebalancer's fold, 5-minute window in production) over the last hour kept by this dashboard; the red dashed line is the 0.85 trigger, the amber one the 0.75 destination cap; violet lines are rebalancer moves (→ out, ← in).</p><div class="charts"></div></section>
  <section id="view-deployments" data-section="deployments"><div class="filters"><input id="replica-filter" placeholder="filter replicas: id, node, state, code" size="36"> <small class="hint">at most ${MAX_REPLICA_ROWS} replica rows per deployment are drawn; filter to see others</small></div><div class="live"></div><div id="history-panel" class="panel"></div></section>
  <section id="view-why" data-section="why">
    <div class="card"><h2>Explain a replica</h2><form id="explain-form"><input id="explain-input" placeholder="replica id, e.g. hello-web-0" size="32"> <button>Explain</button></form><div id="explain-panel" class="panel"></div></div>
    <div class="card"><h2>Rebalancer</h2><div class="live"></div></div>
    <div class="card"><h2>Audit log <small>(live)</small></h2><div class="filters"><input id="audit-filter" placeholder="filter: text in any field" size="32"> <select id="audit-type"><option value="">all types</option></select></div><div id="audit-list"></div></div>
  </section>
</main>
<div id="action-result" class="panel"></div>`.html;
}

const view = (): View => (VIEWS.includes(location.hash.slice(1) as View) ? (location.hash.slice(1) as View) : 'cluster');

function actionButton(kind: ActionKind, target: string, label: string = kind): Raw {
  if (!allowActions) return raw('');
  return h`<button class="act" data-action="${kind}" data-target="${target}" title="same as the CLI: ${cliOf(kind, target)}">${label}</button>`;
}

/** What the page shows beside an action (the server answers with the exact command it ran). */
function cliOf(kind: ActionKind, target: string): string {
  if (kind === 'cordon' || kind === 'uncordon' || kind === 'drain') return `jaco node ${kind} ${target}`;
  if (kind === 'rollback') return `jaco rollback ${target}`;
  return `jaco rollout ${kind} ${target} --wait 0`;
}

// ---------------------------------------------------------------- cluster

function nodeRow(n: NodeView, t: DashboardState['thresholds']): Raw {
  const c = n.capacity;
  const badges = [n.ready ? h`<b class="badge ok">Ready</b>` : h`<b class="badge bad">NotReady</b>`, n.cordoned ? h`<b class="badge warn">cordoned</b>` : raw(''), n.draining ? h`<b class="badge warn">draining</b>` : raw(''), n.degraded ? h`<b class="badge ${n.degraded.trusted ? 'warn' : 'bad'}" title="${n.degraded.causes.map((x) => `${x.cause}: ${x.detail}`).join('\n')}">${n.degraded.trusted ? 'degraded (trusted)' : 'degraded'}</b>` : raw('')];
  const r = n.rebalancer;
  const chips = n.replicas.slice(0, 12).map((x) => h`<span class="chip ${x.state}" title="${x.deployment}/${x.service}: ${x.state}">${x.id}</span>`);
  return h`<tr data-node="${n.name}" data-status="${n.status}">
<td><b>${n.name}</b><br><small>${n.address ?? ''}</small></td>
<td>${badges}${n.unschedulable ? h`<br><small>${n.unschedulable}</small>` : raw('')}</td>
<td>${c ? `${cores(c.cpuMillis)} CPU, ${bytes(c.memoryBytes)}${c.diskBytes !== undefined ? `, ${bytes(c.diskBytes)} disk` : ''}${c.gpus ? `, ${c.gpus} GPU` : ''}` : '?'}${n.disk ? h`<br><small>disk ${pct(n.disk.usedBytes / n.disk.totalBytes)} used${n.disk.capped ? '' : ' (booked, not capped)'}</small>` : raw('')}</td>
<td>${cores(n.booked.cpuMillis)} CPU, ${bytes(n.booked.memoryBytes)}${c?.diskBytes !== undefined ? `, ${bytes(n.booked.diskBytes)} disk` : ''}${n.booked.gpus ? `, ${n.booked.gpus} GPU` : ''}${n.booked.ports.length ? h`<br><small>ports ${n.booked.ports.join(', ')}</small>` : raw('')}</td>
<td>${meter(n.ewma?.cpu, [t.trigger, t.dstCap])} ${pct(n.ewma?.cpu)}<br>${meter(n.ewma?.memory, [t.trigger, t.dstCap])} ${pct(n.ewma?.memory)}</td>
<td>${r ? h`${pct(r.pressure)} · ${r.over} hot cycle(s)${r.cooldownMs !== undefined ? h`<br><small>cooldown: moved in ${duration(r.cooldownMs)} ago</small>` : raw('')}${r.ineligible ? h`<br><small>${r.ineligible}</small>` : raw('')}` : '-'}</td>
<td>${n.replicas.length} ${chips}${n.replicas.length > 12 ? h`<small>+${n.replicas.length - 12}</small>` : raw('')}</td>
<td>${n.drain ? h`${n.drain.state}${n.drain.reason ? ` (${n.drain.reason})` : ''}${n.drain.remaining ? `, ${n.drain.remaining} left` : ''}` : '-'}</td>
${allowActions ? h`<td>${n.cordoned ? actionButton('uncordon', n.name) : actionButton('cordon', n.name)} ${n.draining ? raw('') : actionButton('drain', n.name)}</td>` : raw('')}
</tr>`;
}

function renderCluster(s: DashboardState): Raw {
  const ready = s.nodes.filter((n) => n.ready).length;
  const replicas = s.nodes.reduce((a, n) => a + n.replicas.length, 0);
  return h`<div class="summary"><b>${s.nodes.length}</b> nodes (${ready} Ready) · <b>${replicas}</b> replicas · <b>${s.deployments.length}</b> deployments · etcd revision ${s.revision}</div>
<table class="grid" id="nodes"><thead><tr><th>Node</th><th>Status</th><th>Capacity</th><th>Booked</th><th>Pressure EWMA (CPU / memory)</th><th>Rebalancer sees</th><th>Replicas</th><th>Drain</th>${allowActions ? h`<th>Actions</th>` : raw('')}</tr></thead>
<tbody>${s.nodes.map((n) => nodeRow(n, s.thresholds))}</tbody></table>`;
}

// ---------------------------------------------------------------- deployments

const CANARY_TEXT: Record<CanaryPhase, string> = { starting: 'starting', waiting: 'ready, waiting for promote', promoted: 'promoted' };

function canaryBadge(c: NonNullable<RolloutView['canary']>): Raw {
  const phase = canaryPhase(c);
  return h`<span class="canary" data-canary="${phase}">canary ×${c.replicas}: ${CANARY_TEXT[phase]}${c.promotedBy ? ` (${c.promotedBy})` : ''}</span>`;
}

function rolloutBlock(r: RolloutView): Raw {
  // Canary steps are not steps k of n.
  const done = r.steps.filter((x) => x.result && !x.canary && x.result !== 'reverted').length;
  const live = r.state === 'in_progress' || r.state === 'paused';
  return h`<div class="rollout" data-rollout="${r.deployment}/${r.service}" data-step="${r.currentStep}" data-state="${r.state}">
<b>${r.service}</b>: rollout r${r.fromRevision}→r${r.toRevision} <b class="badge">${r.state}</b> step <b>${r.currentStep}</b> of ${r.totalSteps}${r.failureReason ? ` (${r.failureReason})` : ''}
<span class="progress"><span style="width:${r.totalSteps ? ((100 * done) / r.totalSteps).toFixed(0) : 0}%"></span></span>
${r.canary ? canaryBadge(r.canary) : raw('')}
${live ? h`${actionButton('pause', `${r.deployment}/${r.service}`)} ${actionButton('resume', `${r.deployment}/${r.service}`)} ${actionButton('abort', `${r.deployment}/${r.service}`)}${r.canary && !r.canary.promotedAt ? h` ${actionButton('promote', `${r.deployment}/${r.service}`)}` : raw('')}` : raw('')}
<ol class="steps">${r.steps.map((x) => h`<li class="${x.result ?? 'running'}">${x.canary ? 'canary ' : ''}${x.replica} on ${x.node}: ${x.result ?? 'in progress'}${x.durationMs !== undefined ? ` in ${duration(x.durationMs)}` : ''}</li>`)}</ol></div>`;
}

/** A job's result at its current spec (jaco status' job line): state, exit code, attempts, how long it ran. */
function jobCell(j: DeploymentStatusRow['services'][number]['job']): Raw {
  if (!j) return raw('-');
  const parts = [j.exitCode !== undefined ? `exit ${j.exitCode}` : '', `${j.attempts} attempt${j.attempts === 1 ? '' : 's'}`, j.durationMs !== undefined ? duration(j.durationMs) : ''].filter(Boolean);
  return h`<span class="chip ${j.state}" title="${j.reason ?? j.state} (revision ${j.revision})">${j.state}</span> <span class="job-result">${parts.join(' · ')}</span>`;
}

function renderDeployment(d: DeploymentStatusRow, s: DashboardState, filter: string): Raw {
  const rollouts = s.rollouts.filter((r) => r.deployment === d.name);
  const prog = s.progress[d.name];
  const all = d.services.flatMap((v) => v.replicas.map((r) => ({ v, r })));
  const matching = filter ? all.filter(({ v, r }) => `${r.replica} ${v.name} ${r.node} ${r.state} ${r.code ?? ''}`.toLowerCase().includes(filter)) : all;
  const rows = matching.slice(0, MAX_REPLICA_ROWS);
  return h`<div class="card deployment" data-deployment="${d.name}">
<h2>${d.name} <small>revision ${d.revision}${d.observedGeneration !== undefined && d.observedGeneration !== d.revision ? ` (scheduler at ${d.observedGeneration})` : ''} · age ${d.age}</small>
<button data-history="${d.name}">history &amp; diff</button> ${actionButton('rollback', d.name)}</h2>
<table class="grid"><thead><tr><th>Service</th><th>Mode</th><th>Desired</th><th>Running</th><th>Job</th><th>Moves</th><th>Unschedulable</th></tr></thead><tbody>
${d.services.map((v) => h`<tr data-service="${d.name}/${v.name}" data-running="${v.running}" data-job="${v.job?.state ?? ''}"><td>${v.name}</td><td>${v.mode}</td><td>${v.desired}</td><td>${v.running}</td><td>${jobCell(v.job)}</td><td>${v.moves.map((m) => `${m.replica} ${m.from}→${m.to} (${m.by})`).join(', ') || '-'}</td><td>${v.unschedulable ? `${v.unschedulable.count} ${v.unschedulable.reason}: ${v.unschedulable.message}` : v.waitingForDependency ? `waiting for ${v.waitingForDependency.join(', ')}` : '-'}</td></tr>`)}
</tbody></table>
${prog?.lines.length ? h`<pre class="progress-lines">${prog.lines.map((l) => `${l.service}: ${l.text}\n`).join('')}</pre>` : raw('')}
${rollouts.map(rolloutBlock)}
<table class="grid replicas"><thead><tr><th>Replica</th><th>Service</th><th>Node</th><th>State</th><th>Code</th><th>Restarts</th><th>Revision</th><th>Age</th><th>Move</th><th></th></tr></thead><tbody>
${rows.map(({ v, r }) => h`<tr data-replica="${r.replica}" data-state="${r.state}"><td>${r.replica}</td><td>${v.name}</td><td>${r.node}</td><td><span class="chip ${r.state}">${r.state}</span></td><td>${r.code ?? '-'}</td><td>${r.restarts}</td><td>${r.revision}</td><td>${r.age}</td><td>${r.move ? `from ${r.move.from} (${r.move.by})` : '-'}</td><td><button data-explain="${r.replica}">why here?</button></td></tr>`)}
</tbody></table>${matching.length > rows.length ? h`<p class="hint">${rows.length} of ${matching.length} replicas shown${filter ? ' (filtered)' : ''}: filter to narrow.</p>` : filter ? h`<p class="hint">${matching.length} of ${all.length} replicas match.</p>` : raw('')}</div>`;
}

function renderDeployments(s: DashboardState): Raw {
  if (!s.deployments.length) return h`<p class="hint">No deployments. Try: jaco apply -f examples/hello.yaml</p>`;
  const filter = $<HTMLInputElement>('#replica-filter').value.trim().toLowerCase();
  return h`${s.deployments.map((d) => renderDeployment(d, s, filter))}`;
}

async function showHistory(name: string): Promise<void> {
  const revs = (await (await fetch(`/api/history?deployment=${encodeURIComponent(name)}`)).json()) as { revision: number; appliedAt: string; cause: string; summary: string }[];
  const opts = (sel: number) => revs.map((r) => h`<option value="${r.revision}" ${r.revision === sel ? raw('selected') : raw('')}>${r.revision}</option>`);
  const last = revs.at(-1)?.revision ?? 0;
  const prev = revs.at(-2)?.revision ?? last;
  $('#history-panel').innerHTML = h`<div class="card" data-history-of="${name}"><h2>Revisions of ${name} <small>(jaco rollout history ${name})</small></h2>
<table class="grid"><thead><tr><th>Revision</th><th>Applied</th><th>Cause</th><th>Summary</th></tr></thead><tbody>${revs.map((r) => h`<tr><td>${r.revision}</td><td>${r.appliedAt}</td><td>${r.cause}</td><td>${r.summary}</td></tr>`)}</tbody></table>
<form id="diff-form" data-deployment="${name}">Diff revision <select name="from">${opts(prev)}</select> → <select name="to">${opts(last)}</select> <button>Show diff</button></form><pre id="diff-out" class="diff"></pre></div>`.html;
}

async function showDiff(form: HTMLFormElement): Promise<void> {
  const f = new FormData(form);
  const r = (await (await fetch(`/api/diff?deployment=${encodeURIComponent(form.dataset.deployment!)}&from=${f.get('from')}&to=${f.get('to')}`)).json()) as { diff?: string; error?: string };
  $('#diff-out').innerHTML = esc(r.diff ?? r.error).replace(/^(\+.*)$/gm, '<ins>$1</ins>').replace(/^(-.*)$/gm, '<del>$1</del>');
}

// ---------------------------------------------------------------- why

async function explain(replica: string): Promise<void> {
  location.hash = '#why';
  $<HTMLInputElement>('#explain-input').value = replica;
  const panel = $('#explain-panel');
  panel.textContent = `jaco explain ${replica} …`;
  const r = (await (await fetch(`/api/explain?replica=${encodeURIComponent(replica)}`)).json()) as {
    cli?: string;
    text?: string;
    error?: string;
    decision?: { chosen?: string; verdicts: { node: string; rejected?: { filter: string; detail: string }; score?: { total: number; parts: Record<string, number> } }[] };
  };
  if (!r.decision) {
    panel.innerHTML = h`<p class="error">${r.error}</p>`.html;
    return;
  }
  panel.innerHTML = h`<div data-explained="${replica}"><p><code>$ ${r.cli}</code></p>
<table class="grid verdicts"><thead><tr><th>Node</th><th>Verdict</th><th>Filter / score</th><th>Detail</th></tr></thead><tbody>
${r.decision.verdicts.map((v) => h`<tr class="${v.rejected ? 'rejected' : v.node === r.decision!.chosen ? 'chosen' : 'scored'}" data-verdict="${v.node}"><td>${v.node}</td><td>${v.rejected ? 'rejected' : v.node === r.decision!.chosen ? 'chosen' : 'scored'}</td><td>${v.rejected ? v.rejected.filter : `${v.score!.total} (${Object.entries(v.score!.parts).map(([k, x]) => `${k} ${x}`).join(', ')})`}</td><td>${v.rejected?.detail ?? ''}</td></tr>`)}
</tbody></table><details><summary>as the CLI prints it</summary><pre>${r.text}</pre></details></div>`.html;
}

function renderPlan(s: DashboardState): Raw {
  const p = s.plan;
  if (!p) return h`<p class="hint">No plan read yet.</p>`;
  const pl = p.plan;
  const m = pl.move;
  return h`<p>${p.source === 'leader' ? `Plan of the rebalancer leader (${p.identity}) at ${pl.at}, cycle ${pl.cycle}` : `Recomputed from the store (${p.reason})`} · <code>$ jaco rebalance plan</code></p>
<p class="verdict" data-stopped-by="${pl.stoppedBy}">${m ? `Move: ${m.replica} ${m.src} → ${m.dst} (${m.trigger})` : h`No move this cycle: the first gate that held is <b>${pl.stoppedBy}</b> — ${pl.gates.find((g) => g.gate === pl.stoppedBy)?.detail ?? ''}`}</p>
<table class="grid gates"><thead><tr><th>Gate</th><th>Holds</th><th>Detail</th></tr></thead><tbody>${pl.gates.map((g) => h`<tr class="${g.gate === pl.stoppedBy ? 'held' : ''}"><td>${g.gate}</td><td>${g.holds === null ? '-' : g.holds ? 'yes' : 'no'}</td><td>${g.detail}</td></tr>`)}</tbody></table>
${pl.candidates.length ? h`<table class="grid"><thead><tr><th>Candidate</th><th>Service</th><th>Relief</th><th>Score</th><th>Verdict</th><th>Dst</th><th>Detail</th></tr></thead><tbody>${pl.candidates.map((c) => h`<tr><td>${c.replica}</td><td>${c.deployment}/${c.service}</td><td>${c.relief?.toFixed(2)}</td><td>${c.score?.toFixed(2)}</td><td>${c.verdict}${c.reason ? `: ${c.reason}` : ''}${c.refusal ? `: ${c.refusal}` : ''}</td><td>${c.dst ?? '-'}</td><td>${c.detail}</td></tr>`)}</tbody></table>` : raw('')}
${pl.inFlight.length ? h`<p>In flight: ${pl.inFlight.map((x) => `${x.replica} ${x.src}→${x.dst}`).join(', ')}</p>` : raw('')}`;
}

function auditText(e: AuditView): string {
  return `${e.time} ${e.type} ${e.actor} ${e.deployment ?? ''} ${Object.entries(e.payload).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ')}`;
}

function renderAudit(): void {
  const el = document.querySelector<HTMLElement>('#audit-list');
  if (!el) return;
  const text = $<HTMLInputElement>('#audit-filter').value.trim().toLowerCase();
  const type = $<HTMLSelectElement>('#audit-type').value;
  const shown: AuditView[] = [];
  for (let i = audit.length - 1; i >= 0 && shown.length < 300; i--) {
    const e = audit[i]!;
    if ((!type || e.type === type) && (!text || auditText(e).toLowerCase().includes(text))) shown.push(e);
  }
  el.innerHTML = h`<table class="grid audit"><tbody>${shown.map((e) => h`<tr data-audit="${e.type}"><td><small>${e.time}</small></td><td><b>${e.type}</b></td><td>${e.actor}</td><td>${e.deployment ?? ''}</td><td><small>${Object.entries(e.payload).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ')}</small></td></tr>`)}</tbody></table>`.html;
  const sel = $<HTMLSelectElement>('#audit-type');
  const types = [...new Set(audit.map((e) => e.type))].sort();
  if (sel.options.length - 1 !== types.length) sel.innerHTML = h`<option value="">all types</option>${types.map((t) => h`<option ${t === type ? raw('selected') : raw('')}>${t}</option>`)}`.html;
}

// ---------------------------------------------------------------- drawing

function render(): void {
  const s = state;
  if (!s) return;
  const t0 = performance.now();
  const v = view();
  for (const sec of document.querySelectorAll<HTMLElement>('[data-section]')) sec.hidden = sec.dataset.section !== v;
  for (const a of document.querySelectorAll<HTMLElement>('[data-view]')) a.classList.toggle('active', a.dataset.view === v);
  if (v === 'cluster') put('#view-cluster .live', renderCluster(s));
  if (v === 'deployments') put('#view-deployments .live', renderDeployments(s));
  if (v === 'why') put('#view-why .live', renderPlan(s));
  if (v === 'pressure') drawCharts();
  const ms = performance.now() - t0;
  probe.renders++;
  probe.lastRenderMs = ms;
  probe.maxRenderMs = Math.max(probe.maxRenderMs, ms);
  probe.revision = s.revision;
  probe.firstRenderMs ??= performance.now();
  document.body.dataset.revision = String(s.revision);
}

const drawn = new Map<string, string>();
/** Replaces an element's content only when it changed: an unchanged view costs no layout. */
function put(sel: string, html: Raw): void {
  if (drawn.get(sel) === html.html) return;
  drawn.set(sel, html.html);
  $(sel).innerHTML = html.html;
}

function drawCharts(): void {
  const host = $('#view-pressure .charts');
  const nodes = charts.nodes();
  if (host.dataset.nodes !== nodes.join(',')) {
    host.innerHTML = h`${nodes.map((n) => h`<div class="chart" data-chart="${n}"></div>`)}`.html;
    host.dataset.nodes = nodes.join(',');
  }
  charts.draw(host, nodes);
}

let pending = false;
/** Draw at most once per animation frame, however fast frames arrive. */
function schedule(): void {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    render();
  });
}

async function act(kind: ActionKind, target: string): Promise<void> {
  if ((kind === 'drain' || kind === 'rollback' || kind === 'abort') && !confirm(`${cliOf(kind, target)}?`)) return;
  const res = await fetch(`/api/actions/${kind}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ target }) });
  const r = (await res.json()) as ActionResult & { error?: string };
  $('#action-result').innerHTML = h`<div class="card ${r.ok ? '' : 'error'}"><code>$ ${r.cli || cliOf(kind, target)}</code><pre>${r.text ?? r.error}</pre><button data-close>close</button></div>`.html;
}

function connect(): void {
  const es = new EventSource('/events');
  const conn = $('#conn');
  es.addEventListener('open', () => ((conn.textContent = 'live'), (conn.className = 'conn live')));
  es.addEventListener('error', () => ((conn.textContent = 'reconnecting…'), (conn.className = 'conn down')));
  es.addEventListener('state', (e) => {
    state = JSON.parse((e as MessageEvent<string>).data) as DashboardState;
    probe.frames++;
    schedule();
  });
  es.addEventListener('pressure', (e) => {
    charts.add(JSON.parse((e as MessageEvent<string>).data) as PressurePoints);
    if (view() === 'pressure') schedule();
  });
  es.addEventListener('audit', (e) => {
    const fresh = JSON.parse((e as MessageEvent<string>).data) as AuditView[];
    for (const a of fresh) {
      if (audit.some((x) => x.key === a.key)) continue;
      audit.push(a);
      if (a.type === 'rebalance_moved') charts.addMove({ t: Date.parse(a.time), src: String(a.payload.src), dst: String(a.payload.dst), replica: String(a.payload.replica) });
    }
    if (audit.length > AUDIT_KEEP) audit.splice(0, audit.length - AUDIT_KEEP);
    if (view() === 'why') renderAudit();
  });
}

layout();
window.addEventListener('hashchange', () => {
  render();
  if (view() === 'why') renderAudit();
});
document.addEventListener('click', (e) => {
  const t = (e.target as HTMLElement).closest<HTMLElement>('[data-explain],[data-history],[data-action],[data-close]');
  if (!t) return;
  if (t.dataset.explain) void explain(t.dataset.explain);
  else if (t.dataset.history) void showHistory(t.dataset.history);
  else if (t.dataset.action) void act(t.dataset.action as ActionKind, t.dataset.target!);
  else $('#action-result').innerHTML = '';
});
document.addEventListener('submit', (e) => {
  e.preventDefault();
  const f = e.target as HTMLFormElement;
  if (f.id === 'explain-form') void explain($<HTMLInputElement>('#explain-input').value.trim());
  if (f.id === 'diff-form') void showDiff(f);
});
$('#audit-filter').addEventListener('input', renderAudit);
$('#audit-type').addEventListener('change', renderAudit);
$('#replica-filter').addEventListener('input', schedule);
connect();
