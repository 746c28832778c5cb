// The evoscale dashboard: plain JS over evoscaled's read-only JSON API (/api/v1/), charts by
// charts.js on uPlot (from npm, compiled into evoscaled with this file). No build step.
// Views are chosen by the URL hash:
//   #/                        studies, with progress
//   #/studies/ID              one study: history, best vs core-hours and cost vs quality,
//                             learning curves, parallel coordinates, importance, slices,
//                             Pareto front, resources and capacity (all from /analysis,
//                             downsampled by evoscaled), optimal trials, and the trial table
//                             (sorted, filtered and paged by evoscaled)
//   #/studies/ID/trials/T     one trial: its learning curve and usage over time
//   #/workloads               autoscaled workloads with their current recommendation
//   #/workloads/NS/NAME       one workload: usage per pod under its recommendation, replicas
// The current view reloads every REFRESH_MS. API errors go to the #error banner; a 401 also
// opens the token form (the token is kept in sessionStorage and sent as a Bearer token).
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const TOKEN_KEY = 'evoscale.token';
  const TRIALS_PAGE_SIZE = 50;

  // ---- DOM helpers: every piece of data goes in as text, never as HTML. --------------------

  function h(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
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

  // "budget: spent X of Y core-hours", for a study with a budget.
  function budgetText(study) {
    const budget = Number((study.spec && study.spec.budget_core_seconds) || 0);
    if (!(budget > 0)) return null;
    const spent = Number(study.spent_core_seconds || 0);
    return [' · ', h('span', { id: 'study-budget', title: `${num(spent)} of ${num(budget)} core-seconds` },
      `budget: spent ${num(spent / 3600)} of ${num(budget / 3600)} core-hours`)];
  }

  // ---- The API ------------------------------------------------------------------------------

  // What to do about an error, by its HTTP status.
  const HINTS = {
    0: 'Is evoscaled still running? This page tries again every 2 s.',
    401: 'Enter a token with "Token" above (this evoscaled runs with --auth-tokens).',
    403: 'This token\'s role may not read this: ask for a reader token.',
    404: 'It may have been deleted: go back to Studies.',
    503: 'evoscaled is busy or shutting down: this page tries again every 2 s.',
  };

  class ApiError extends Error {
    constructor(status, code, message, path) {
      super(`GET /api/v1${path}: ${status ? status + ' ' : ''}${code}: ${message}` +
        (HINTS[status] ? `\n${HINTS[status]}` : ''));
      this.status = status;
    }
  }

  async function api(path) {
    return JSON.parse(await apiText(path));
  }

  // The answer's text, checked to be JSON: views compare it with the last one and redraw
  // only on a change.
  async function apiText(path) {
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
    return text || '{}';
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
    return h('details', { id: 'spec' },
      h('summary', null, h('h2', null, 'Spec')),
      h('p', null, `Algorithm ${algo.algorithm || 'default'}`,
        algo.seed && algo.seed !== '0' ? `, seed ${algo.seed}` : '',
        `; max trials ${spec.max_trials ? spec.max_trials : 'unlimited'}`,
        spec.early_stopping && spec.early_stopping.policy && spec.early_stopping.policy !== 'POLICY_UNSPECIFIED'
          ? `; early stopping ${spec.early_stopping.policy}` : ''),
      h('h3', null, 'Metrics'), h('ul', { id: 'spec-metrics' }, metrics),
      h('h3', null, 'Parameters'),
      h('div', { class: 'scroll' }, h('table', { id: 'spec-parameters' },
        h('thead', null, h('tr', null, ['Name', 'Type', 'Domain', 'Scale', ''].map((t) => h('th', null, t)))),
        h('tbody', null, (spec.parameters || []).flatMap((p) => paramSpecRows(p, 0, ''))))));
  }

  // Requested vs used, for trials that carry a request or a usage (managed trials): memory
  // as "requested / peak", cores as "requested / mean used"; an OOM kill is marked.
  function hasResources(trials) {
    return trials.some((t) => t.usage || (t.resources && Object.keys(t.resources).some((k) => Number(t.resources[k]))));
  }

  function resourceCells(t) {
    const r = t.resources || {};
    const u = t.usage || {};
    const asked = Number(r.memory_bytes || 0);
    const peak = Number(u.peak_memory_bytes || 0);
    const memText = `${asked ? bytes(asked) : '—'} / ${peak ? bytes(peak) : '—'}`;
    const slack = asked && peak ? `${Math.round((100 * (asked - peak)) / asked)}% unused` : '';
    const ooms = Number(u.oom_kills || 0);
    const cpuText = `${Number(r.cpu_cores) ? num(r.cpu_cores) : '—'} / ${Number(u.wall_seconds) ? num(u.mean_cpu_cores) : '—'}`;
    return [
      h('td', { class: 'num mem', title: slack },
        memText, ooms ? h('span', { class: 'oom' }, ` ${ooms} OOM`) : ''),
      h('td', { class: 'num cpu' }, cpuText),
    ];
  }

  function paramOf(t, name) {
    const p = (t.parameters || []).find((q) => q.name === name);
    return p ? paramValue(p) : '';
  }

  function metricOf(t, name) {
    const v = ((t.final_measurement || {}).metrics || {})[name];
    return v === undefined ? '' : num(v);
  }

  // The optimal trials (a short list: the best, or the Pareto front).
  function trialTable(id, trials, study) {
    const resources = hasResources(trials);
    const heads = ['ID', 'State', 'Parameters', 'Final metrics',
      ...(resources ? ['Memory requested / peak', 'CPU requested / used'] : []), 'Client'];
    return h('table', { id },
      h('thead', null, h('tr', null, heads.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, trials.map((t) => h('tr', { 'data-trial-id': t.id },
        h('td', { class: 'num' }, h('a', { href: `#/studies/${study}/trials/${t.id}` }, t.id)),
        h('td', null, badge(t.state)),
        h('td', { class: 'params' }, paramList(t.parameters)),
        h('td', null, metricList(t.final_measurement),
          t.infeasible_reason ? h('span', { class: 'muted' }, ` ${t.infeasible_reason}`) : ''),
        ...(resources ? resourceCells(t) : []),
        h('td', { class: 'muted' }, t.client_id)))));
  }

  function card(id, title, ...extra) {
    return h('section', { class: 'card', id: `card-${id}` },
      h('h2', null, title, ...extra),
      h('div', { class: 'chart', id: `chart-${id}` }, h('p', { class: 'muted loading' }, 'Loading…')));
  }

  function empty(id, ...text) {
    const el = document.getElementById(`chart-${id}`);
    EvoCharts.reset(el);
    el.append(h('p', { class: 'empty' }, ...text));
    el.dataset.drawn = '1';
    el.dataset.series = '0';
    el.dataset.points = '0';
    el.dataset.empty = '1';
    return el;
  }

  function chartEl(id) {
    const el = document.getElementById(`chart-${id}`);
    delete el.dataset.empty;
    return el;
  }

  const STATES = ['REQUESTED', 'ACTIVE', 'STOPPING', 'SUCCEEDED', 'STOPPED', 'INFEASIBLE', 'FAILED'];

  const studyView = {
    mount(view, route) {
      const st = this.state = {
        id: route.id, metric: '', log: false, order: 'id', desc: false, states: '', filter: null,
        tokens: [''], index: 0, next: '', analysisText: '', importanceText: '', first: true,
        started: performance.now(),
      };
      const sid = route.id;
      view.append(
        h('p', null, h('a', { href: '#/' }, '← Studies')),
        h('div', { id: 'study-head' }, h('h1', null, `studies/${sid}`)),
        h('div', { class: 'toolbar' },
          h('label', null, 'Metric ', h('select', { id: 'metric', onchange: (e) => { st.metric = e.target.value; refresh(); } })),
          h('label', null, h('input', { type: 'checkbox', id: 'log-scale', onchange: (e) => { st.log = e.target.checked; this.redraw(); } }), ' Log scale'),
          h('span', { id: 'analysis-note', class: 'muted' })),
        h('div', { class: 'grid' },
          card('history', 'Optimisation history'),
          card('cost-best', 'Best vs core-hours'),
          card('cost-quality', 'Cost vs quality', h('span', { class: 'legend-stopped' }, ' red: stopped early')),
          card('curves', 'Intermediate values', h('span', { class: 'legend-stopped' }, ' dashed red: stopped early')),
          card('parallel', 'Parallel coordinates'),
          card('importance', 'Parameter importance'),
          h('section', { class: 'card wide', id: 'card-slices' }, h('h2', null, 'Slices'),
            h('div', { id: 'chart-slices', class: 'slices' }, h('p', { class: 'muted loading' }, 'Loading…'))),
          card('pareto', 'Pareto front'),
          card('memory', 'Memory requested vs peak, per trial'),
          card('cpu', 'CPU requested vs used, per trial'),
          card('capacity', 'Capacity held by running trials')),
        h('section', null, h('h2', null, 'Optimal trials'), h('div', { id: 'optimal-wrap', class: 'scroll' })),
        h('section', { id: 'trials-section' },
          h('h2', null, 'Trials'),
          h('form', { class: 'pager', id: 'trial-filter', onsubmit: (e) => { e.preventDefault(); this.applyFilter(); } },
            h('label', null, 'State ',
              h('select', { id: 'trial-state', onchange: () => this.applyFilter() },
                ['', ...STATES].map((s) => h('option', { value: s }, s || 'all')))),
            h('label', null, 'Parameter ', h('select', { id: 'filter-param', onchange: () => this.filterHint() }, h('option', { value: '' }, '—'))),
            h('label', null, 'from ', h('input', { id: 'filter-min', size: 8, inputmode: 'decimal' })),
            h('label', null, 'to ', h('input', { id: 'filter-max', size: 8, inputmode: 'decimal' })),
            h('button', { type: 'submit', id: 'filter-apply' }, 'Filter'),
            h('button', { type: 'button', id: 'filter-clear', onclick: () => this.clearFilter() }, 'Clear')),
          h('div', { class: 'pager' },
            h('button', { id: 'trials-prev', type: 'button', disabled: true,
              onclick: () => { if (st.index > 0) { st.index--; refresh(); } } }, '← Previous'),
            h('span', { id: 'trials-page' }, 'page 1'),
            h('button', { id: 'trials-next', type: 'button', disabled: true,
              onclick: () => {
                if (!st.next) return;
                st.tokens = st.tokens.slice(0, st.index + 1).concat([st.next]);
                st.index++;
                refresh();
              } }, 'Next →')),
          h('div', { id: 'trials-wrap', class: 'scroll' })),
        h('div', { id: 'study-spec' }));
    },
    resetPages() {
      const st = this.state;
      st.tokens = [''];
      st.index = 0;
    },
    applyFilter() {
      const st = this.state;
      st.states = document.getElementById('trial-state').value;
      const name = document.getElementById('filter-param').value;
      const lo = document.getElementById('filter-min').value.trim();
      const hi = document.getElementById('filter-max').value.trim();
      const param = (st.params || []).find((p) => p.name === name);
      st.filter = null;
      if (param && (lo || hi)) {
        // A categorical parameter: "from" holds the categories, separated by commas.
        st.filter = param.type === 'categorical'
          ? `${name}:${lo.split(',').map((s) => s.trim()).filter(Boolean).join('|')}`
          : `${name}:${lo}..${hi}`;
      }
      this.resetPages();
      refresh();
    },
    clearFilter() {
      document.getElementById('trial-state').value = '';
      document.getElementById('filter-param').value = '';
      document.getElementById('filter-min').value = '';
      document.getElementById('filter-max').value = '';
      this.filterHint();
      this.applyFilter();
    },
    filterHint() {
      const name = document.getElementById('filter-param').value;
      const param = (this.state.params || []).find((p) => p.name === name);
      const lo = document.getElementById('filter-min');
      const hi = document.getElementById('filter-max');
      const cat = param && param.type === 'categorical';
      lo.placeholder = cat ? param.categories.join(',') : (param ? num(param.min) : '');
      hi.placeholder = param && !cat ? num(param.max) : '';
      hi.disabled = !!cat;
    },
    sortBy(key) {
      const st = this.state;
      if (st.order === key) st.desc = !st.desc;
      else { st.order = key; st.desc = false; }
      this.resetPages();
      refresh();
    },
    // What the trials table shows: a page loaded under another order, filter or page (a sort
    // clicked while a refresh was in flight) is not drawn; the refresh that follows draws it.
    tableQuery() {
      const st = this.state;
      return JSON.stringify([st.order, st.desc, st.states, st.filter, st.index, st.tokens[st.index]]);
    },
    async load() {
      const st = this.state;
      const base = `/studies/${encodeURIComponent(st.id)}`;
      const tableQuery = this.tableQuery();
      const q = new URLSearchParams({ page_size: String(TRIALS_PAGE_SIZE), order_by: `${st.desc ? '-' : ''}${st.order}` });
      if (st.states) q.set('state', st.states);
      if (st.filter) q.set('param', st.filter);
      q.set('page_token', st.tokens[st.index]);
      const metric = st.metric ? `&metric=${encodeURIComponent(st.metric)}` : '';
      const [study, page, analysisText, importance, optimal] = await Promise.all([
        api(base),
        api(`${base}/trials?${q}`),
        apiText(`${base}/analysis?max_points=2000${metric}`),
        apiText(`${base}/importance?${metric.slice(1)}`),
        api(`${base}/optimal`),
      ]);
      return { study, page, analysisText, importance, optimal, tableQuery };
    },
    render({ study, page, analysisText, importance, optimal, tableQuery }) {
      const st = this.state;
      const spec = study.spec || {};
      st.spec = spec;
      document.getElementById('study-head').replaceChildren(
        h('h1', null, study.display_name || study.name, ' ', h('span', { class: 'muted' }, study.name)),
        h('p', null, badge(study.state), ' ',
          h('span', { id: 'trial-count' }, study.trial_count), ' trials, ',
          h('span', { id: 'completed-count' }, study.completed_trial_count), ' completed',
          spec.max_trials ? ` of at most ${spec.max_trials}` : '', ' ', progress(study),
          budgetText(study),
          h('span', { class: 'muted' }, ` · created ${time(study.create_time)}`)));
      const specEl = document.getElementById('study-spec');
      if (!specEl.firstChild) specEl.append(specSummary(spec));
      // Charts are redrawn only when what they show changed.
      if (analysisText !== st.analysisText || importance !== st.importanceText) {
        st.analysisText = analysisText;
        st.importanceText = importance;
        st.analysis = JSON.parse(analysisText);
        st.importance = JSON.parse(importance);
        this.redraw();
      }
      const best = optimal.optimal_trials || [];
      document.getElementById('optimal-wrap').replaceChildren(best.length
        ? trialTable('optimal', best, st.id)
        : h('p', { id: 'optimal', class: 'muted' }, 'No completed trials yet.'));
      if (tableQuery === this.tableQuery()) this.renderTable(page);
    },
    // Every chart from the last analysis (metric, log scale and size changes come here too).
    redraw() {
      const st = this.state;
      const a = st.analysis;
      if (!a) return;
      const sel = document.getElementById('metric');
      if (sel.options.length !== a.metrics.length) {
        sel.replaceChildren(...a.metrics.map((m) => h('option', { value: m.name }, `${m.name} (${m.goal.toLowerCase()})`)));
      }
      sel.value = a.metric;
      st.params = a.parameters;
      const fp = document.getElementById('filter-param');
      if (fp.options.length !== a.parameters.length + 1) {
        fp.replaceChildren(h('option', { value: '' }, '—'), ...a.parameters.map((p) => h('option', { value: p.name }, p.name)));
      }
      if (a.metric !== st.metric && st.metric) return;  // an answer for the other metric: wait
      const opts = { metric: a.metric, log: st.log, minimize: a.goal === 'MINIMIZE' };
      // A log scale needs positive values.
      const values = a.history.values;
      const logOk = values.length > 0 && values.every((v) => v > 0);
      const logBox = document.getElementById('log-scale');
      logBox.disabled = !logOk;
      logBox.title = logOk ? '' : `a log scale needs ${a.metric} > 0 on every trial`;
      if (!logOk) opts.log = false;
      document.getElementById('analysis-note').textContent =
        a.points.total > a.points.trial_ids.length
          ? `${a.points.trial_ids.length} of ${a.points.total} completed trials drawn (the best, the front, and an even spread)` : '';
      const none = a.history.total === 0;
      const howToComplete = () => ['Values appear as trials complete (CompleteTrial, or ', h('code', null, 'evoscale trial complete NAME metric=value'), ').'];
      if (none) empty('history', `No completed trials with ${a.metric} yet. `, ...howToComplete());
      else EvoCharts.history(chartEl('history'), a.history, opts);

      if (a.curves.lines.length === 0) {
        empty('curves', 'No intermediate values yet: trials report them step by step with AddTrialMeasurement (the SDK\'s ', h('code', null, 'report'), ').');
      } else {
        EvoCharts.curves(chartEl('curves'), a.curves, opts);
      }

      const pts = a.points;
      if (pts.trial_ids.length < 2 || a.parameters.length === 0) {
        empty('parallel', 'Parallel coordinates need two completed trials. ', ...howToComplete());
      } else {
        const axes = [...a.parameters, { name: a.metric, min: 0, max: 1 }];
        const mv = pts.values[a.metric];
        axes[axes.length - 1].min = Math.min(...mv);
        axes[axes.length - 1].max = Math.max(...mv);
        const rows = pts.trial_ids.map((_, i) => [...a.parameters.map((p) => pts.params[p.name][i]), mv[i]]);
        EvoCharts.parallel(chartEl('parallel'), axes, rows, opts);
      }

      const imp = st.importance || {};
      const items = (imp.parameters || []).map((p) => ({ name: p.name, value: Number(p.importance || 0),
        label: `${Math.round(100 * Number(p.importance || 0))}%` }));
      if (!imp.trial_count || items.length === 0) {
        empty('importance', 'Importance needs completed trials: evoscaled estimates each parameter\'s main effect (the share of the variance of ', a.metric, ' it explains) once trials complete.');
      } else {
        EvoCharts.bars(chartEl('importance'), items);
        document.getElementById('chart-importance').dataset.trials = String(imp.trial_count);
      }

      const slices = document.getElementById('chart-slices');
      slices.replaceChildren();
      if (pts.trial_ids.length === 0) {
        slices.append(h('p', { class: 'empty' }, 'Slice plots need completed trials. ', ...howToComplete()));
      } else {
        for (const p of a.parameters) {
          const el = h('div', { class: 'chart slice', 'data-param': p.name });
          slices.append(el);
          EvoCharts.slice(el, p, pts.params[p.name], pts.values[a.metric], opts);
        }
      }
      slices.dataset.drawn = '1';
      slices.dataset.series = String(a.parameters.length);

      const pareto = document.getElementById('card-pareto');
      pareto.hidden = !a.pareto;
      if (a.pareto) {
        const names = a.metrics.filter((m) => m.safety_threshold === undefined).map((m) => m.name).slice(0, 2);
        const front = new Set(a.pareto.trial_ids);
        EvoCharts.pareto(chartEl('pareto'), pts.values[names[0]], pts.values[names[1]],
          pts.trial_ids.map((id) => front.has(id)), names);
        document.getElementById('chart-pareto').dataset.frontTotal = String(a.pareto.trial_ids.length);
      }

      this.drawCost(a, opts);

      const r = a.resources;
      const noResources = () => ['No requests or usage: evoscaled records both for the trials it runs (a study with a ',
        h('code', null, 'trial_template'), '), and a client may send usage with CompleteTrial.'];
      if (r.total === 0) {
        empty('memory', ...noResources());
        empty('cpu', ...noResources());
      } else {
        EvoCharts.lines(chartEl('memory'), r.trial_ids, [
          { label: 'requested', values: r.memory_requested, dots: true, color: EvoCharts.PALETTE[0] },
          { label: 'peak used', values: r.memory_peak, dots: true, color: EvoCharts.PALETTE[1] }],
        { xLabel: 'trial', yLabel: 'memory', format: EvoCharts.bytes });
        EvoCharts.lines(chartEl('cpu'), r.trial_ids, [
          { label: 'requested', values: r.cpu_requested, dots: true, color: EvoCharts.PALETTE[0] },
          { label: 'mean used', values: r.cpu_used, dots: true, color: EvoCharts.PALETTE[1] }],
        { xLabel: 'trial', yLabel: 'CPU cores' });
      }
      const c = a.capacity;
      if (c.times.length === 0) {
        empty('capacity', ...noResources());
      } else {
        const list = [
          { label: 'CPU cores requested', values: c.cpu_cores, step: true, color: EvoCharts.PALETTE[0] },
          { label: 'trials running', values: c.running, step: true, color: EvoCharts.PALETTE[2] }];
        if (c.capacity_cpu_cores > 0) {
          list.push({ label: 'CPU capacity', values: c.times.map(() => c.capacity_cpu_cores), dash: [6, 4], color: EvoCharts.MUTED });
        }
        EvoCharts.lines(chartEl('capacity'), c.times, list, { time: true, xLabel: 'time', yLabel: 'cores / trials' });
        const peakMem = Math.max(...c.memory_bytes);
        document.getElementById('chart-capacity').title = `peak memory requested ${bytes(peakMem)}` +
          (c.capacity_memory_bytes > 0 ? ` of ${bytes(c.capacity_memory_bytes)}` : '');
      }
      if (st.first) {
        st.first = false;
        // Drawn: the next frame has painted every chart above.
        requestAnimationFrame(() => {
          const ms = performance.now() - st.started;
          performance.mark('evoscale-charts-drawn');
          document.body.dataset.chartsMs = String(Math.round(ms));
        });
      }
    },
    // Best vs core-hours and cost vs quality, for a study of one objective whose trials have
    // cost anything (both cards hidden otherwise).
    drawCost(a, opts) {
      const cost = a.cost;
      const costly = !!cost && (Number(a.budget.spent_core_seconds) > 0 || cost.points.core_seconds.some((c) => c > 0));
      for (const id of ['cost-best', 'cost-quality']) document.getElementById(`card-${id}`).hidden = !costly;
      if (!costly) return;
      const values = [...cost.points.values, ...cost.curve.best.filter((v) => v !== null)];
      const costOpts = { metric: cost.metric, log: opts.log && values.every((v) => v > 0) };
      const budgetHours = Number(a.budget.budget_core_seconds) / 3600;
      if (cost.curve.best.every((v) => v === null)) {
        empty('cost-best', `No trial has completed with ${cost.metric} yet: the best so far appears as trials end.`);
      } else {
        EvoCharts.bestVsCost(chartEl('cost-best'), cost.curve, { ...costOpts, budgetHours });
      }
      if (cost.points.trial_ids.length === 0) {
        empty('cost-quality', `No trial has a value of ${cost.metric} yet: each appears at what it cost as it ends.`);
      } else {
        EvoCharts.costQuality(chartEl('cost-quality'), cost.points, cost.front.trial_ids, costOpts);
        document.getElementById('chart-cost-quality').dataset.frontTotal = String(cost.front.total);
      }
    },
    renderTable(page) {
      const st = this.state;
      const spec = st.spec || {};
      const trials = page.trials || [];
      const metrics = (spec.metrics || []).map((m) => m.name);
      const params = (st.params || []).map((p) => p.name);
      const resources = (st.analysis && st.analysis.resources.total > 0) || hasResources(trials);
      const cols = [
        ['id', 'ID'], ['state', 'State'],
        ...metrics.map((m) => [`metric:${m}`, m]),
        ...params.map((p) => [`param:${p}`, p]),
        ...(resources ? [['memory_requested', 'Memory requested'], ['memory_peak', 'Memory peak'],
          ['cpu_requested', 'CPU requested'], ['cpu_used', 'CPU used']] : []),
        ['client', 'Client']];
      const head = h('tr', null, cols.map(([key, label]) => {
        const sorted = st.order === key;
        return h('th', { scope: 'col', 'aria-sort': sorted ? (st.desc ? 'descending' : 'ascending') : 'none', 'data-key': key },
          h('button', { type: 'button', class: 'sort', onclick: () => this.sortBy(key) },
            label, sorted ? (st.desc ? ' ▼' : ' ▲') : ''));
      }));
      const rows = trials.map((t) => {
        const r = t.resources || {};
        const u = t.usage || {};
        const cells = [
          h('td', { class: 'num' }, h('a', { href: `#/studies/${st.id}/trials/${t.id}` }, t.id)),
          h('td', null, badge(t.state)),
          ...metrics.map((m) => h('td', { class: 'num', 'data-col': `metric:${m}` }, metricOf(t, m))),
          ...params.map((p) => h('td', { class: 'num', 'data-col': `param:${p}` }, paramOf(t, p))),
          ...(resources ? [
            h('td', { class: 'num' }, Number(r.memory_bytes) ? bytes(r.memory_bytes) : '—'),
            h('td', { class: 'num' }, Number(u.peak_memory_bytes) ? bytes(u.peak_memory_bytes) : '—',
              Number(u.oom_kills) ? h('span', { class: 'oom' }, ` ${u.oom_kills} OOM`) : ''),
            h('td', { class: 'num' }, Number(r.cpu_cores) ? num(r.cpu_cores) : '—'),
            h('td', { class: 'num' }, Number(u.wall_seconds) ? num(u.mean_cpu_cores) : '—')] : []),
          h('td', { class: 'muted' }, t.client_id)];
        return h('tr', { 'data-trial-id': t.id }, cells);
      });
      document.getElementById('trials-wrap').replaceChildren(trials.length
        ? h('table', { id: 'trials' }, h('thead', null, head), h('tbody', null, rows))
        : h('p', { id: 'trials', class: 'muted' },
          st.states || st.filter ? 'No trials match this filter.' : 'No trials yet: ask for one with evoscale suggest, or let evoscaled run them (trial_template).'));
      st.next = page.next_page_token || '';
      const total = Number(page.total_size || 0);
      const first = st.index * TRIALS_PAGE_SIZE;
      document.getElementById('trials-prev').disabled = st.index === 0;
      document.getElementById('trials-next').disabled = !st.next;
      document.getElementById('trials-page').textContent = total
        ? `${first + 1}–${first + trials.length} of ${total}` : 'none';
    },
  };

  // ---- One trial ----------------------------------------------------------------------------

  const trialView = {
    mount(view, route) {
      this.state = { study: route.id, trial: route.trial, text: '' };
      view.append(
        h('p', null, h('a', { href: `#/studies/${route.id}` }, `← studies/${route.id}`)),
        h('div', { id: 'trial-head' }, h('h1', null, `studies/${route.id}/trials/${route.trial}`)),
        h('div', { class: 'grid' },
          card('trial-curve', 'Intermediate values'),
          card('trial-usage', 'Usage over time')),
        h('section', null, h('h2', null, 'Details'), h('div', { id: 'trial-details', class: 'scroll' })));
    },
    async load() {
      const { study, trial } = this.state;
      const base = `/studies/${encodeURIComponent(study)}/trials/${encodeURIComponent(trial)}`;
      const [t, usage] = await Promise.all([
        api(base),
        api(`${base}/usage`).catch((e) => (e.status === 404 ? { missing: e.message } : Promise.reject(e))),
      ]);
      return { t, usage };
    },
    render({ t, usage }) {
      const st = this.state;
      const text = JSON.stringify([t, usage]);
      if (text === st.text) return;
      st.text = text;
      document.getElementById('trial-head').replaceChildren(
        h('h1', null, t.name, ' ', badge(t.state)),
        h('p', { class: 'muted' }, `client ${t.client_id || '—'} · started ${time(t.start_time)}`,
          t.end_time ? ` · ended ${time(t.end_time)}` : ''));
      const ms = t.measurements || [];
      const names = [...new Set(ms.flatMap((m) => Object.keys(m.metrics || {})))].sort();
      if (ms.length === 0) {
        empty('trial-curve', 'No intermediate values: this trial reported none.');
      } else {
        const steps = ms.map((m) => Number(m.step));
        EvoCharts.lines(chartEl('trial-curve'), steps,
          names.map((n) => ({ label: n, values: ms.map((m) => (m.metrics || {})[n] ?? null), spanGaps: true })),
          { xLabel: 'step', yLabel: names.join(', ') });
      }
      if (usage.missing) {
        empty('trial-usage', usage.missing);
      } else {
        const r = t.resources || {};
        const list = [{ label: 'memory', values: usage.memory_bytes, color: EvoCharts.PALETTE[1] }];
        if (Number(r.memory_bytes)) list.push({ label: 'requested', values: usage.times.map(() => Number(r.memory_bytes)), dash: [6, 4], color: EvoCharts.PALETTE[0] });
        EvoCharts.lines(chartEl('trial-usage'), usage.times, list, { time: true, xLabel: 'time', yLabel: 'memory', format: bytes });
        const el = document.getElementById('chart-trial-usage');
        el.after(h('div', { class: 'chart', id: 'chart-trial-cpu' }));
        document.querySelectorAll('#chart-trial-cpu ~ #chart-trial-cpu').forEach((x) => x.remove());
        const cpu = document.getElementById('chart-trial-cpu');
        const cl = [{ label: 'CPU cores', values: usage.cpu_cores, color: EvoCharts.PALETTE[2] }];
        if (Number(r.cpu_cores)) cl.push({ label: 'requested', values: usage.times.map(() => Number(r.cpu_cores)), dash: [6, 4], color: EvoCharts.PALETTE[0] });
        EvoCharts.lines(cpu, usage.times, cl, { time: true, xLabel: 'time', yLabel: 'CPU cores' });
      }
      document.getElementById('trial-details').replaceChildren(trialTable('trial', [t], st.study));
    },
  };

  // ---- Workloads ----------------------------------------------------------------------------

  function bounds(b, fmt) {
    if (!b) return '';
    const limit = Number(b.limit || 0) > Number(b.target || 0) ? ` · limit ${fmt(b.limit)}` : '';
    return h('span', null, fmt(b.target || 0),
      h('span', { class: 'muted' }, ` [${fmt(b.lower_bound || 0)} – ${fmt(b.upper_bound || 0)}]`), limit);
  }

  function workloadPath(name) {
    return name.split('/').map(encodeURIComponent).join('/');
  }

  const workloadsView = {
    mount(view) {
      view.append(
        h('h1', null, 'Workloads'),
        h('div', { class: 'scroll' }, h('table', { id: 'workloads' },
          h('thead', null, h('tr', null,
            ['Name', 'Kind', 'Policy', 'Samples', 'CPU cores', 'Memory', 'Replicas', 'Confidence',
              'Explanation'].map((t) => h('th', { scope: 'col' }, t)))),
          h('tbody'))),
        h('p', { id: 'workloads-empty', class: 'muted', hidden: true },
          'No workloads yet: add one with ', h('code', null, 'evoscale workload put NAME'), '.'));
    },
    async load() {
      const { workloads = [] } = await api('/workloads');
      // A workload without a recommendation (no samples yet, say) shows why in its row.
      return Promise.all(workloads.map((w) =>
        api(`/workloads/${workloadPath(w.name)}/recommendation`)
          .then((rec) => ({ w, rec }), (err) => ({ w, err }))));
    },
    render(rows) {
      document.querySelector('#workloads tbody').replaceChildren(...rows.map(({ w, rec, err }) =>
        h('tr', { 'data-workload': w.name },
          h('td', { class: 'name' }, h('a', { href: `#/workloads/${workloadPath(w.name)}` }, w.name)),
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

  // One workload: usage per pod with the recommendation band over it, and replicas.
  const workloadView = {
    mount(view, route) {
      this.state = { name: route.name, text: '' };
      view.append(
        h('p', null, h('a', { href: '#/workloads' }, '← Workloads')),
        h('div', { id: 'workload-head' }, h('h1', null, route.name)),
        h('div', { class: 'grid' },
          card('workload-cpu', 'CPU per pod, with the recommendation'),
          card('workload-memory', 'Memory per pod, with the recommendation'),
          card('workload-replicas', 'Replicas: running and recommended'),
          card('workload-load', 'Requests per second, all pods'),
          card('workload-latency', 'Mean latency of a request'),
          card('workload-instances', 'Pods reporting now: what each serves')));
    },
    async load() {
      const path = workloadPath(this.state.name);
      const [hist, rec] = await Promise.all([
        apiText(`/workloads/${path}/history?max_points=720`),
        api(`/workloads/${path}/recommendation`).catch((err) => ({ err })),
      ]);
      return { hist, rec };
    },
    render({ hist, rec }) {
      const st = this.state;
      document.getElementById('workload-head').replaceChildren(
        h('h1', null, st.name),
        rec.err ? h('p', { class: 'error-cell' }, rec.err.message)
          : h('p', { id: 'workload-rec' }, 'Now: CPU ', bounds(rec.cpu_cores, num), ' · memory ', bounds(rec.memory_bytes, bytes),
            ` · ${rec.replicas} replicas · confidence ${Math.round(100 * Number(rec.confidence || 0))}%`,
            h('br'), h('span', { class: 'muted' }, rec.explanation)));
      if (hist === st.text) return;
      st.text = hist;
      const d = JSON.parse(hist);
      if (d.times.length === 0) {
        for (const id of ['workload-cpu', 'workload-memory', 'workload-replicas', 'workload-load', 'workload-latency', 'workload-instances']) {
          empty(id, 'No telemetry yet: send samples with ReportTelemetry (or ', h('code', null, 'evoscale telemetry'), ').');
        }
        return;
      }
      const band = (t, lo, hi, color) => [
        { label: 'recommended upper', values: hi, color, width: 1, dash: [3, 3] },
        { label: 'recommended lower', values: lo, color, width: 1, dash: [3, 3] },
        { label: 'target', values: t, color, width: 2 }];
      // Series 1..3 are the band (upper, lower, target); usage comes after. The y axis ends a
      // little above usage and target: a VPA's upper bound is very wide while its confidence
      // is low, and would flatten everything else.
      const top = (...cols) => 1.5 * Math.max(0, ...cols.flat().filter((v) => v !== null));
      // The limit (where memory is OOM-killed and CPU throttled) gets a line of its own only
      // when requests and limits are apart somewhere in the window.
      const limit = (lim, t) => ((lim || []).some((v, i) => v !== null && t[i] !== null && v > t[i] * (1 + 1e-9))
        ? [{ label: 'limit', values: lim, color: EvoCharts.PALETTE[3], width: 2, dash: [6, 3] }] : []);
      const cpuLimit = limit(d.cpu_limit, d.cpu_target), memoryLimit = limit(d.memory_limit, d.memory_target);
      EvoCharts.lines(chartEl('workload-cpu'), d.times, [
        ...band(d.cpu_target, d.cpu_lower, d.cpu_upper, EvoCharts.PALETTE[0]),
        { label: 'mean per pod', values: d.cpu_cores_mean, color: EvoCharts.PALETTE[1] },
        { label: 'busiest pod', values: d.cpu_cores_max, color: EvoCharts.PALETTE[1], width: 1, dash: [1, 2] },
        ...cpuLimit],
      { time: true, xLabel: 'time', yLabel: 'CPU cores', bands: [{ upper: 1, lower: 2 }],
        yMax: top(d.cpu_target, d.cpu_cores_max, d.cpu_lower, cpuLimit.length ? d.cpu_limit : []) });
      EvoCharts.lines(chartEl('workload-memory'), d.times, [
        ...band(d.memory_target, d.memory_lower, d.memory_upper, EvoCharts.PALETTE[0]),
        { label: 'peak per pod', values: d.memory_bytes_max, color: EvoCharts.PALETTE[1] },
        ...memoryLimit],
      { time: true, xLabel: 'time', yLabel: 'memory', format: bytes, bands: [{ upper: 1, lower: 2 }],
        yMax: top(d.memory_target, d.memory_bytes_max, d.memory_lower, memoryLimit.length ? d.memory_limit : []) });
      EvoCharts.lines(chartEl('workload-replicas'), d.times, [
        { label: 'running', values: d.instances, step: true, color: EvoCharts.PALETTE[1] },
        { label: 'recommended', values: d.replicas_recommended, step: true, color: EvoCharts.PALETTE[0], width: 2 }],
      { time: true, xLabel: 'time', yLabel: 'replicas' });
      EvoCharts.lines(chartEl('workload-load'), d.times, [
        { label: 'requests/s', values: d.qps, color: EvoCharts.PALETTE[1] }],
      { time: true, xLabel: 'time', yLabel: 'requests/s' });
      const latency = d.latency_seconds || [];
      if (latency.every((v) => v === null)) {
        empty('workload-latency', 'No latency reported: samples carry it in ', h('code', null, 'latency_seconds'), '.');
      } else {
        EvoCharts.lines(chartEl('workload-latency'), d.times, [
          { label: 'mean latency', values: latency.map((v) => (v === null ? null : 1000 * v)), color: EvoCharts.PALETTE[2] }],
        { time: true, xLabel: 'time', yLabel: 'ms' });
      }
      this.renderInstances(d.instances_now || []);
      document.getElementById('chart-workload-cpu').dataset.buckets = String(d.times.length);
    },
    // Each pod reporting now, when it last reported and the versions it serves (an online
    // model's replicas: sparse and dense), so a replica that fell behind stands out.
    renderInstances(pods) {
      const names = [...new Set(pods.flatMap((p) => Object.keys(p.versions)))].sort();
      const el = chartEl('workload-instances');
      EvoCharts.reset(el);
      const newest = Object.fromEntries(names.map((n) => [n, Math.max(...pods.map((p) => Number(p.versions[n] ?? -1)))]));
      el.append(h('table', { class: 'instances' },
        h('thead', null, h('tr', null, h('th', null, 'pod'), h('th', null, 'last report'),
          ...names.map((n) => h('th', { class: 'num' }, `${n} version`)))),
        h('tbody', null, ...pods.map((p) => h('tr', null,
          h('td', null, p.instance),
          h('td', null, new Date(1000 * p.time).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z')),
          ...names.map((n) => {
            const v = p.versions[n];
            const behind = v !== undefined && Number(v) < newest[n];
            return h('td', { class: behind ? 'num behind' : 'num', title: behind ? `behind the newest (${newest[n]})` : '' },
              v === undefined ? '—' : String(v));
          }))))));
      if (names.length === 0) el.append(h('p', { class: 'muted' }, 'No versions reported (TelemetrySample.versions).'));
      el.dataset.drawn = '1';
      el.dataset.rows = String(pods.length);
    },
  };

  // ---- Routing, refresh, errors, token ------------------------------------------------------

  function parseRoute() {
    const hash = location.hash.replace(/^#/, '') || '/';
    const m = hash.match(/^\/studies\/([^/]+)\/?$/);
    if (m) return { view: studyView, nav: 'studies', id: decodeURIComponent(m[1]) };
    const t = hash.match(/^\/studies\/([^/]+)\/trials\/([^/]+)\/?$/);
    if (t) return { view: trialView, nav: 'studies', id: decodeURIComponent(t[1]), trial: decodeURIComponent(t[2]) };
    if (hash === '/workloads') return { view: workloadsView, nav: 'workloads' };
    const w = hash.match(/^\/workloads\/(.+)$/);
    if (w) return { view: workloadView, nav: 'workloads', name: w[1].split('/').map(decodeURIComponent).join('/') };
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
