// The evoscale dashboard: plain JS over evoscaled's read-only JSON API (/api/v1/). No build
// step, no dependencies. Views are chosen by the URL hash:
//   #/                 studies, with progress
//   #/studies/ID       one study: spec, best-so-far curve, optimal trials, trials (paged)
//   #/workloads        autoscaled workloads with their current recommendation
// The current view reloads every REFRESH_MS. API errors go to the #error banner; a 401 also
// opens the token form (the token is kept in sessionStorage and sent as a Bearer token).
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const TOKEN_KEY = 'evoscale.token';
  const TRIALS_PAGE_SIZE = 50;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  // ---- DOM helpers: every piece of data goes in as text, never as HTML. --------------------

  function h(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }

  function svg(tag, attrs, ...children) {
    return build(document.createElementNS(SVG_NS, tag), attrs, children);
  }

  function build(el, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  // ---- Formatting ---------------------------------------------------------------------------

  function num(x) {
    const n = Number(x);
    if (!Number.isFinite(n)) return String(x);
    if (Number.isInteger(n)) return String(n);
    return String(parseFloat(n.toPrecision(4)));
  }

  function bytes(x) {
    let n = Number(x);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let u = 0;
    while (Math.abs(n) >= 1024 && u < units.length - 1) {
      n /= 1024;
      u++;
    }
    return `${parseFloat(n.toFixed(n >= 100 || u === 0 ? 0 : 1))} ${units[u]}`;
  }

  function time(ts) {
    if (!ts) return '';
    const d = new Date(ts);
    return Number.isNaN(d.getTime()) ? ts : d.toLocaleString();
  }

  function studyId(name) {
    return String(name).replace(/^studies\//, '');
  }

  function paramValue(p) {
    if ('double_value' in p) return num(p.double_value);
    if ('int_value' in p) return String(p.int_value);
    if ('string_value' in p) return p.string_value;
    return '';
  }

  function paramList(params) {
    return (params || []).map((p) => `${p.name}=${paramValue(p)}`).join(', ');
  }

  function metricList(m) {
    const metrics = (m && m.metrics) || {};
    return Object.keys(metrics).sort().map((k) => `${k}=${num(metrics[k])}`).join(', ');
  }

  function badge(state) {
    return h('span', { class: `badge state-${String(state).toLowerCase()}` }, state);
  }

  function progress(study) {
    const done = Number(study.completed_trial_count);
    const max = Number((study.spec && study.spec.max_trials) || 0);
    if (study.state !== 'ACTIVE' || max <= 0) return null;
    return h('span', { class: 'progress' },
      h('progress', { max, value: Math.min(done, max) }), ` ${done} / ${max}`);
  }

  // ---- The API ------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message, path) {
      super(`GET /api/v1${path}: ${status ? status + ' ' : ''}${code}: ${message}`);
      this.status = status;
    }
  }

  async function api(path) {
    const headers = {};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    let res;
    try {
      res = await fetch(`/api/v1${path}`, { headers, cache: 'no-store' });
    } catch (e) {
      throw new ApiError(0, 'UNAVAILABLE', `cannot reach evoscaled (${e.message})`, path);
    }
    const text = await res.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : {};
    } catch (e) {
      // Not JSON: reported below with the raw text.
    }
    if (!res.ok) {
      const err = (body && body.error) || {};
      if (res.status === 401) showTokenForm(true);
      throw new ApiError(res.status, err.code || res.statusText || 'ERROR',
        err.message || text || '(no message)', path);
    }
    if (body === null) throw new ApiError(res.status, 'BAD_RESPONSE', 'the answer is not JSON', path);
    return body;
  }

  // Every page of a list call; `key` names the repeated field.
  async function apiAll(path, key, maxPages = 20) {
    const out = [];
    let token = '';
    for (let i = 0; i < maxPages; i++) {
      const sep = path.includes('?') ? '&' : '?';
      const page = await api(`${path}${sep}page_token=${encodeURIComponent(token)}`);
      out.push(...(page[key] || []));
      token = page.next_page_token || '';
      if (!token) break;
    }
    return out;
  }

  // ---- Studies list -------------------------------------------------------------------------

  const studiesView = {
    mount(view) {
      view.append(
        h('h1', null, 'Studies'),
        h('table', { id: 'studies' },
          h('thead', null, h('tr', null,
            ['Name', 'Display name', 'State', 'Trials', 'Completed', 'Created'].map((t) => h('th', null, t)))),
          h('tbody')),
        h('p', { id: 'studies-empty', class: 'muted', hidden: true },
          'No studies yet: create one with ', h('code', null, 'evoscale study create -f examples/study.yaml'), '.'));
    },
    load() {
      return apiAll('/studies?page_size=1000', 'studies');
    },
    render(studies) {
      document.querySelector('#studies tbody').replaceChildren(...studies.map((s) =>
        h('tr', { 'data-study': s.name },
          h('td', null, h('a', { href: `#/studies/${studyId(s.name)}` }, s.name)),
          h('td', null, s.display_name),
          h('td', null, badge(s.state)),
          h('td', { class: 'num trials' }, s.trial_count),
          h('td', { class: 'num completed' }, s.completed_trial_count, ' ', progress(s)),
          h('td', null, time(s.create_time)))));
      document.getElementById('studies-empty').hidden = studies.length > 0;
    },
  };

  // ---- One study ----------------------------------------------------------------------------

  function paramSpecRows(p, depth, when) {
    let kind = '';
    let domain = '';
    if (p.double_spec) {
      kind = 'double';
      domain = `[${num(p.double_spec.min)}, ${num(p.double_spec.max)}]`;
    } else if (p.integer_spec) {
      kind = 'integer';
      domain = `[${p.integer_spec.min}, ${p.integer_spec.max}]`;
    } else if (p.discrete_spec) {
      kind = 'discrete';
      domain = `{${(p.discrete_spec.values || []).map(num).join(', ')}}`;
    } else if (p.categorical_spec) {
      kind = 'categorical';
      domain = `{${(p.categorical_spec.values || []).join(', ')}}`;
    }
    const scale = p.scale && p.scale !== 'SCALE_TYPE_UNSPECIFIED' ? p.scale : '';
    const rows = [h('tr', null,
      h('td', { style: `padding-left: ${0.5 + depth * 1.5}em` }, p.name),
      h('td', null, kind), h('td', null, domain), h('td', null, scale), h('td', { class: 'muted' }, when))];
    for (const c of p.children || []) {
      const vals = [...(c.parent_discrete_values || []).map(num), ...(c.parent_int_values || []),
        ...(c.parent_categorical_values || [])];
      rows.push(...paramSpecRows(c.parameter_spec || {}, depth + 1, `when ${p.name} ∈ {${vals.join(', ')}}`));
    }
    return rows;
  }

  function specSummary(spec) {
    const metrics = (spec.metrics || []).map((m) => h('li', null, h('strong', null, m.name), ` ${m.goal}`,
      m.safety_threshold !== undefined ? ` (safety ${m.goal === 'MAXIMIZE' ? '≥' : '≤'} ${num(m.safety_threshold)})` : ''));
    const algo = spec.algorithm || {};
    return h('section', { id: 'spec' },
      h('h2', null, 'Spec'),
      h('p', null, `Algorithm ${algo.algorithm || 'default'}`,
        algo.seed && algo.seed !== '0' ? `, seed ${algo.seed}` : '',
        `; max trials ${spec.max_trials ? spec.max_trials : 'unlimited'}`,
        spec.early_stopping && spec.early_stopping.policy && spec.early_stopping.policy !== 'POLICY_UNSPECIFIED'
          ? `; early stopping ${spec.early_stopping.policy}` : ''),
      h('h3', null, 'Metrics'), h('ul', { id: 'spec-metrics' }, metrics),
      h('h3', null, 'Parameters'),
      h('table', { id: 'spec-parameters' },
        h('thead', null, h('tr', null, ['Name', 'Type', 'Domain', 'Scale', ''].map((t) => h('th', null, t)))),
        h('tbody', null, (spec.parameters || []).flatMap((p) => paramSpecRows(p, 0, '')))));
  }

  // Best-so-far of the study's first metric over its succeeded trials (in id order).
  function bestCurve(spec, trials) {
    const metric = (spec.metrics || [])[0];
    const W = 640, H = 220, L = 64, R = 12, T = 12, B = 28;
    const root = svg('svg', { id: 'best-curve', viewBox: `0 0 ${W} ${H}`, role: 'img' });
    if (!metric) return root;
    const maximize = metric.goal === 'MAXIMIZE';
    const values = trials
      .slice().sort((a, b) => Number(a.id) - Number(b.id))
      .map((t) => Number(((t.final_measurement || {}).metrics || {})[metric.name]))
      .filter(Number.isFinite);
    root.setAttribute('data-points', values.length);
    root.setAttribute('aria-label', `best ${metric.name} so far over ${values.length} trials`);
    if (values.length === 0) {
      root.append(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'muted' },
        `no completed trials with ${metric.name} yet`));
      return root;
    }
    const best = [];
    for (const v of values) {
      const prev = best.length ? best[best.length - 1] : v;
      best.push(maximize ? Math.max(prev, v) : Math.min(prev, v));
    }
    let lo = Math.min(...values), hi = Math.max(...values);
    if (lo === hi) { lo -= 0.5 * (Math.abs(lo) || 1); hi += 0.5 * (Math.abs(hi) || 1); }
    const x = (i) => L + (values.length === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (values.length - 1));
    const y = (v) => T + ((hi - v) * (H - T - B)) / (hi - lo);
    let d = `M${x(0).toFixed(1)},${y(best[0]).toFixed(1)}`;
    for (let i = 1; i < best.length; i++) {
      d += ` H${x(i).toFixed(1)} V${y(best[i]).toFixed(1)}`;
    }
    root.append(
      svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }),
      svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }),
      svg('text', { x: L - 6, y: y(hi) + 4, 'text-anchor': 'end', class: 'tick' }, num(hi)),
      svg('text', { x: L - 6, y: y(lo) + 4, 'text-anchor': 'end', class: 'tick' }, num(lo)),
      svg('text', { x: (L + W - R) / 2, y: H - 8, 'text-anchor': 'middle', class: 'tick' },
        `${values.length} completed trials, by id`),
      ...values.map((v, i) => svg('circle', { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 3, class: 'obs' },
        svg('title', null, `${metric.name}=${num(v)}`))),
      svg('path', { d, class: 'best', id: 'best-path' }));
    return root;
  }

  // Requested vs used, for trials that carry a request or a usage (managed trials): memory
  // as "requested / peak", cores as "requested / mean used"; an OOM kill is marked.
  function hasResources(trials) {
    return trials.some((t) => t.usage || (t.resources && Object.keys(t.resources).length));
  }

  function resourceCells(t) {
    const r = t.resources || {};
    const u = t.usage || {};
    const asked = Number(r.memory_bytes || 0);
    const peak = Number(u.peak_memory_bytes || 0);
    const memText = `${asked ? bytes(asked) : '—'} / ${u.peak_memory_bytes ? bytes(peak) : '—'}`;
    const slack = asked && peak ? `${Math.round((100 * (asked - peak)) / asked)}% unused` : '';
    const ooms = Number(u.oom_kills || 0);
    const cpuText = `${r.cpu_cores ? num(r.cpu_cores) : '—'} / ${'mean_cpu_cores' in u ? num(u.mean_cpu_cores) : '—'}`;
    return [
      h('td', { class: 'num mem', title: slack },
        memText, ooms ? h('span', { class: 'oom' }, ` ${ooms} OOM`) : ''),
      h('td', { class: 'num cpu' }, cpuText),
    ];
  }

  function trialRows(trials, resources) {
    return trials.map((t) => h('tr', { 'data-trial-id': t.id },
      h('td', { class: 'num' }, t.id),
      h('td', null, badge(t.state)),
      h('td', { class: 'params' }, paramList(t.parameters)),
      h('td', null, metricList(t.final_measurement),
        t.infeasible_reason ? h('span', { class: 'muted' }, ` ${t.infeasible_reason}`) : ''),
      ...(resources ? resourceCells(t) : []),
      h('td', { class: 'muted' }, t.client_id)));
  }

  function trialTable(id, trials) {
    const resources = hasResources(trials);
    const heads = ['ID', 'State', 'Parameters', 'Final metrics',
      ...(resources ? ['Memory requested / peak', 'CPU requested / used'] : []), 'Client'];
    return h('table', { id },
      h('thead', null, h('tr', null, heads.map((t) => h('th', null, t)))),
      h('tbody', null, trialRows(trials, resources)));
  }

  const studyView = {
    mount(view, route) {
      const st = this.state = { id: route.id, tokens: [''], index: 0, filter: '', next: '' };
      const go = () => refresh();
      view.append(
        h('p', null, h('a', { href: '#/' }, '← Studies')),
        h('div', { id: 'study-head' }, h('h1', null, `studies/${route.id}`)),
        h('div', { id: 'study-spec' }),
        h('section', null, h('h2', null, 'Best so far'), h('div', { id: 'curve' })),
        h('section', null, h('h2', null, 'Optimal trials'), h('div', { id: 'optimal-wrap' })),
        h('section', null,
          h('h2', null, 'Trials'),
          h('div', { class: 'pager' },
            h('label', null, 'State ',
              h('select', {
                id: 'trial-state',
                onchange: (e) => { st.filter = e.target.value; st.tokens = ['']; st.index = 0; go(); },
              }, ['', 'REQUESTED', 'ACTIVE', 'STOPPING', 'SUCCEEDED', 'STOPPED', 'INFEASIBLE', 'FAILED'].map((s) =>
                h('option', { value: s }, s || 'all')))),
            h('button', { id: 'trials-prev', type: 'button', disabled: true,
              onclick: () => { if (st.index > 0) { st.index--; go(); } } }, '← Previous'),
            h('span', { id: 'trials-page' }, 'page 1'),
            h('button', { id: 'trials-next', type: 'button', disabled: true,
              onclick: () => {
                if (!st.next) return;
                st.tokens = st.tokens.slice(0, st.index + 1).concat([st.next]);
                st.index++;
                go();
              } }, 'Next →')),
          h('div', { id: 'trials-wrap' })));
    },
    async load() {
      const st = this.state;
      const base = `/studies/${encodeURIComponent(st.id)}`;
      const filter = st.filter ? `&state=${st.filter}` : '';
      const [study, page, succeeded, optimal] = await Promise.all([
        api(base),
        api(`${base}/trials?page_size=${TRIALS_PAGE_SIZE}${filter}&page_token=${encodeURIComponent(st.tokens[st.index])}`),
        apiAll(`${base}/trials?state=SUCCEEDED&page_size=1000`, 'trials'),
        api(`${base}/optimal`),
      ]);
      return { study, page, succeeded, optimal };
    },
    render({ study, page, succeeded, optimal }) {
      const st = this.state;
      const spec = study.spec || {};
      document.getElementById('study-head').replaceChildren(
        h('h1', null, study.display_name || study.name, ' ', h('span', { class: 'muted' }, study.name)),
        h('p', null, badge(study.state), ' ',
          h('span', { id: 'trial-count' }, study.trial_count), ' trials, ',
          h('span', { id: 'completed-count' }, study.completed_trial_count), ' completed',
          spec.max_trials ? ` of at most ${spec.max_trials}` : '', ' ', progress(study),
          h('span', { class: 'muted' }, ` · created ${time(study.create_time)}`)));
      // The spec never changes: build it once.
      const specEl = document.getElementById('study-spec');
      if (!specEl.firstChild) specEl.append(specSummary(spec));
      document.getElementById('curve').replaceChildren(bestCurve(spec, succeeded));
      const best = optimal.optimal_trials || [];
      document.getElementById('optimal-wrap').replaceChildren(best.length
        ? trialTable('optimal', best)
        : h('p', { id: 'optimal', class: 'muted' }, 'No completed trials yet.'));
      const trials = page.trials || [];
      document.getElementById('trials-wrap').replaceChildren(trials.length
        ? trialTable('trials', trials)
        : h('p', { id: 'trials', class: 'muted' }, 'No trials on this page.'));
      st.next = page.next_page_token || '';
      document.getElementById('trials-prev').disabled = st.index === 0;
      document.getElementById('trials-next').disabled = !st.next;
      document.getElementById('trials-page').textContent = `page ${st.index + 1}`;
    },
  };

  // ---- Workloads ----------------------------------------------------------------------------

  function bounds(b, fmt) {
    if (!b) return '';
    return h('span', null, fmt(b.target || 0),
      h('span', { class: 'muted' }, ` [${fmt(b.lower_bound || 0)} – ${fmt(b.upper_bound || 0)}]`));
  }

  const workloadsView = {
    mount(view) {
      view.append(
        h('h1', null, 'Workloads'),
        h('table', { id: 'workloads' },
          h('thead', null, h('tr', null,
            ['Name', 'Kind', 'Policy', 'Samples', 'CPU cores', 'Memory', 'Replicas', 'Confidence',
              'Explanation'].map((t) => h('th', null, t)))),
          h('tbody')),
        h('p', { id: 'workloads-empty', class: 'muted', hidden: true },
          'No workloads yet: add one with ', h('code', null, 'evoscale workload put NAME'), '.'));
    },
    async load() {
      const { workloads = [] } = await api('/workloads');
      // A workload without a recommendation (no samples yet, say) shows why in its row.
      return Promise.all(workloads.map((w) =>
        api(`/workloads/${w.name.split('/').map(encodeURIComponent).join('/')}/recommendation`)
          .then((rec) => ({ w, rec }), (err) => ({ w, err }))));
    },
    render(rows) {
      document.querySelector('#workloads tbody').replaceChildren(...rows.map(({ w, rec, err }) =>
        h('tr', { 'data-workload': w.name },
          h('td', { class: 'name' }, w.name),
          // Unspecified (or left out of the JSON) means the default (autoscaler.proto):
          // SERVING, EVOSCALE.
          h('td', { class: 'kind' }, !w.kind || w.kind === 'KIND_UNSPECIFIED' ? 'SERVING' : w.kind),
          h('td', { class: 'policy' },
            !w.policy || w.policy === 'POLICY_UNSPECIFIED' ? 'EVOSCALE' : w.policy),
          h('td', { class: 'num samples' }, String(w.sample_count || 0)),
          err ? h('td', { colspan: 5, class: 'error-cell' }, err.message) : [
            h('td', { class: 'bounds' }, bounds(rec.cpu_cores, num)),
            h('td', { class: 'bounds' }, bounds(rec.memory_bytes, bytes)),
            h('td', { class: 'num' }, rec.replicas),
            h('td', { class: 'num' }, `${Math.round(100 * Number(rec.confidence || 0))}%`),
            h('td', { class: 'explanation' }, rec.explanation)])));
      document.getElementById('workloads-empty').hidden = rows.length > 0;
    },
  };

  // ---- Routing, refresh, errors, token ------------------------------------------------------

  function parseRoute() {
    const hash = location.hash.replace(/^#/, '') || '/';
    const m = hash.match(/^\/studies\/([^/]+)\/?$/);
    if (m) return { view: studyView, nav: 'studies', id: decodeURIComponent(m[1]) };
    if (hash === '/workloads') return { view: workloadsView, nav: 'workloads' };
    if (hash === '/' || hash === '/studies') return { view: studiesView, nav: 'studies' };
    return null;
  }

  let generation = 0;  // bumped on every navigation; stale answers are dropped
  let current = null;
  let inflight = null;
  let again = false;

  function showError(message) {
    const el = document.getElementById('error');
    el.textContent = message;
    el.hidden = false;
  }

  function clearError() {
    const el = document.getElementById('error');
    el.hidden = true;
    el.textContent = '';
  }

  async function refreshOnce() {
    if (!current) return;
    const gen = generation;
    const { view } = current;
    try {
      const data = await view.load();
      if (gen !== generation) return;
      view.render(data);
      clearError();
      document.getElementById('refreshed').textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (e) {
      if (gen !== generation) return;
      showError(e.message);
      if (!(e instanceof ApiError)) console.error(e);
    }
  }

  // One load at a time; a request made meanwhile runs once the current one ends.
  function refresh() {
    if (inflight) {
      again = true;
      return inflight;
    }
    inflight = (async () => {
      do {
        again = false;
        await refreshOnce();
      } while (again);
    })().finally(() => { inflight = null; });
    return inflight;
  }

  function navigate() {
    generation++;
    const route = parseRoute();
    const view = document.getElementById('view');
    view.replaceChildren();
    for (const nav of ['studies', 'workloads']) {
      document.getElementById(`nav-${nav}`).classList.toggle('active', route && route.nav === nav);
    }
    if (!route) {
      current = null;
      view.append(h('p', null, 'No such page. ', h('a', { href: '#/' }, 'Studies')));
      return;
    }
    current = route;
    route.view.mount(view, route);
    refresh();
  }

  function showTokenForm(show) {
    document.getElementById('token-form').hidden = !show;
    if (show) document.getElementById('token-input').focus();
  }

  document.getElementById('token-toggle').addEventListener('click', () =>
    showTokenForm(document.getElementById('token-form').hidden));
  document.getElementById('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = document.getElementById('token-input');
    const token = input.value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    input.value = '';
    showTokenForm(false);
    refresh();
  });
  document.getElementById('token-clear').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    refresh();
  });

  window.addEventListener('hashchange', navigate);
  setInterval(refresh, REFRESH_MS);
  navigate();
})();
