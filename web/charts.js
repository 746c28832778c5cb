// Charts for the evoscale dashboard: line and scatter charts on uPlot (npm, compiled into
// evoscaled), parallel coordinates on a canvas of our own, importance as plain bars.
// Every chart records what it drew on its container, for people (aria-label) and for the
// browser test: data-series (lines drawn), data-points (points with a value), data-drawn.
'use strict';

window.EvoCharts = (() => {
  const PALETTE = ['#2463eb', '#e8590c', '#0ca678', '#ae3ec9', '#f59f00', '#1098ad', '#d6336c',
    '#5c940d', '#495057', '#7048e8'];
  const MUTED = '#9aa4b5';
  const BAD = '#b42318';
  const HEIGHT = 240;

  function bytes(x) {
    let n = Number(x);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let u = 0;
    while (Math.abs(n) >= 1024 && u < units.length - 1) { n /= 1024; u++; }
    return `${parseFloat(n.toFixed(n >= 100 || u === 0 ? 0 : 1))} ${units[u]}`;
  }

  function short(x) {
    if (x === null || x === undefined || !Number.isFinite(x)) return '';
    if (x !== 0 && (Math.abs(x) >= 1e5 || Math.abs(x) < 1e-3)) return x.toExponential(1);
    return String(parseFloat(x.toPrecision(4)));
  }

  // Replaces a chart container's chart (destroying the old uPlot and its observer).
  function reset(el) {
    if (el._uplot) { el._uplot.destroy(); el._uplot = null; }
    if (el._observer) { el._observer.disconnect(); el._observer = null; }
    el.replaceChildren();
  }

  function record(el, series, points, label) {
    el.dataset.series = String(series);
    el.dataset.points = String(points);
    el.dataset.drawn = '1';
    el.setAttribute('role', 'img');
    el.setAttribute('tabindex', '0');
    el.setAttribute('aria-label', label);
  }

  function width(el) {
    return Math.max(240, Math.floor(el.clientWidth || (el.parentElement && el.parentElement.clientWidth) || 480));
  }

  // One uPlot in `el`, resized with it. `data` is uPlot's: [xs, ys1, ys2, ...].
  function plot(el, opts, data) {
    reset(el);
    // A legend of labels only: live values under the cursor make it jump as the mouse moves.
    const legend = { live: false, ...(opts.legend || {}) };
    const u = new uPlot({ ...opts, legend, width: width(el), height: opts.height || HEIGHT }, data, el);
    el._uplot = u;
    if (window.ResizeObserver) {
      let last = width(el);
      el._observer = new ResizeObserver(() => {
        if (!el.isConnected) return;  // the view was left
        const w = width(el);
        if (w !== last) { last = w; u.setSize({ width: w, height: opts.height || HEIGHT }); }
      });
      el._observer.observe(el);
    }
    return u;
  }

  const dots = (color, size = 5) => ({
    stroke: color, fill: color, width: 0, paths: () => null, points: { show: true, size, fill: color, stroke: color },
  });

  function countValues(arr) {
    let n = 0;
    for (const v of arr) if (v !== null && v !== undefined && Number.isFinite(v)) n++;
    return n;
  }

  // Sorted copies of parallel arrays by xs (uPlot wants x ascending).
  function sortBy(xs, ...cols) {
    const idx = xs.map((_, i) => i).filter((i) => xs[i] !== null && xs[i] !== undefined);
    idx.sort((a, b) => xs[a] - xs[b]);
    return [idx.map((i) => xs[i]), ...cols.map((c) => idx.map((i) => c[i]))];
  }

  // Optimisation history: every trial's value (dots) and the best so far (a step line).
  function history(el, h, { metric, log }) {
    const u = plot(el, {
      scales: { x: { time: false }, y: log ? { distr: 3, log: 10 } : {} },
      axes: [{ label: 'trial' }, { label: metric, values: (_, ts) => ts.map(short), size: 60 }],
      series: [{ label: 'trial' }, { label: metric, ...dots(MUTED, 4) },
        { label: 'best so far', stroke: PALETTE[0], width: 2, paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } }],
    }, [h.trial_ids, h.values, h.best]);
    record(el, 2, h.values.length,
      `Optimisation history of ${metric}: ${h.values.length} of ${h.total} trials drawn, best ${short(h.best[h.best.length - 1])}`);
    return u;
  }

  // Learning curves: one line per trial; trials stopped early in red, dashed, their last
  // value marked.
  function curves(el, c, { metric, log }) {
    const tables = c.lines.map((l) => [l.steps, l.values]);
    const data = tables.length ? uPlot.join(tables) : [[]];
    const series = [{ label: 'step' }];
    let stopped = 0;
    c.lines.forEach((l, i) => {
      const early = l.state === 'STOPPED';
      if (early) stopped++;
      series.push({
        label: `trial ${l.id}${early ? ' (stopped early)' : ''}`,
        stroke: early ? BAD : PALETTE[i % PALETTE.length],
        width: early ? 1.5 : 1,
        dash: early ? [4, 3] : undefined,
        spanGaps: true,
        points: { show: false },
      });
    });
    plot(el, {
      legend: { show: false },
      scales: { x: { time: false }, y: log ? { distr: 3, log: 10 } : {} },
      axes: [{ label: 'step' }, { label: metric, values: (_, ts) => ts.map(short), size: 60 }],
      series,
    }, data);
    el.dataset.stopped = String(stopped);
    let points = 0;
    for (const l of c.lines) points += l.values.length;
    record(el, c.lines.length, points,
      `Intermediate values of ${metric}: ${c.lines.length} of ${c.total} trials' curves, ${stopped} stopped early`);
  }

  // Value against one parameter (slice plot); categories on their own ticks.
  function slice(el, param, xs, ys, { metric, log }) {
    const [sx, sy] = sortBy(xs, ys);
    const cats = param.categories;
    plot(el, {
      height: 180,
      legend: { show: false },
      scales: {
        x: { time: false, ...(param.log ? { distr: 3, log: 10 } : {}),
          ...(cats ? { range: [-0.5, cats.length - 0.5] } : {}) },
        y: log ? { distr: 3, log: 10 } : {},
      },
      axes: [
        { label: param.name, ...(cats ? { splits: () => cats.map((_, i) => i), values: (_, ts) => ts.map((t) => cats[t] ?? '') } : { values: (_, ts) => ts.map(short) }) },
        { values: (_, ts) => ts.map(short), size: 50 },
      ],
      series: [{ label: param.name }, { label: metric, ...dots(PALETTE[0], 4) }],
    }, [sx, sy]);
    record(el, 1, countValues(sy), `${metric} against ${param.name}: ${countValues(sy)} trials`);
  }

  // Pareto front of two metrics: every trial, the front joined by a line.
  function pareto(el, xs, ys, front, names) {
    const [sx, sy, sf] = sortBy(xs, ys, front);
    const frontY = sy.map((y, i) => (sf[i] ? y : null));
    plot(el, {
      scales: { x: { time: false } },
      axes: [{ label: names[0], values: (_, ts) => ts.map(short) }, { label: names[1], values: (_, ts) => ts.map(short), size: 60 }],
      series: [{ label: names[0] }, { label: 'trials', ...dots(MUTED, 4) },
        { label: 'Pareto front', stroke: PALETTE[1], width: 2, spanGaps: true, points: { show: true, size: 6, fill: PALETTE[1] } }],
    }, [sx, sy, frontY]);
    const onFront = countValues(frontY);
    el.dataset.front = String(onFront);
    record(el, 2, countValues(sy), `Pareto front of ${names[0]} and ${names[1]}: ${onFront} of ${countValues(sy)} trials on the front`);
  }

  // A dashed vertical line at x = `at` across the plot, labelled to its left (uPlot draw hook).
  function marker(u, at, label, color) {
    const dpr = window.devicePixelRatio || 1;
    const x = Math.round(u.valToPos(at, 'x', true));
    const { top, height } = u.bbox;
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 1.5 * dpr;
    ctx.setLineDash([6 * dpr, 4 * dpr]);
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    ctx.textAlign = 'right';
    ctx.fillText(label, x - 4 * dpr, top + 12 * dpr);
    ctx.restore();
  }

  // The best value so far against the core-hours spent by the trials ended by then (a step
  // line), with the budget as a dashed vertical line when there is one (the x axis reaches it).
  function bestVsCost(el, curve, { metric, log, budgetHours = 0 }) {
    plot(el, {
      scales: {
        x: { time: false, range: (_, lo, hi) => [0, (Math.max(hi, budgetHours) || 1) * 1.04] },
        y: log ? { distr: 3, log: 10 } : {},
      },
      axes: [{ label: 'core-hours spent', values: (_, ts) => ts.map(short) },
        { label: `best ${metric}`, values: (_, ts) => ts.map(short), size: 60 }],
      series: [{ label: 'core-hours' },
        { label: 'best so far', stroke: PALETTE[0], width: 2, paths: uPlot.paths.stepped({ align: 1 }) }],
      hooks: budgetHours > 0 ? { draw: [(u) => marker(u, budgetHours, 'budget', BAD)] } : {},
    }, [curve.core_hours, curve.best]);
    const n = countValues(curve.best);
    const last = curve.core_hours.length ? curve.core_hours[curve.core_hours.length - 1] : 0;
    el.dataset.budget = String(budgetHours);
    record(el, 1, n, `Best ${metric} against core-hours: ${curve.core_hours.length} of ${curve.total} ended trials drawn, ` +
      `best ${short(curve.best[curve.best.length - 1])} after ${short(last)} core-hours` +
      (budgetHours > 0 ? `, budget ${short(budgetHours)} core-hours` : ''));
  }

  // Each trial's core-hours against its value: the trials that ran to the end, those stopped
  // early (red), and the cost-quality front joined as a staircase.
  function costQuality(el, points, frontIds, { metric, log }) {
    const hours = points.core_seconds.map((c) => c / 3600);
    const front = new Set(frontIds);
    const ids = points.trial_ids;
    const [sx, sv, sid, sstate] = sortBy(hours, points.values, ids, points.states);
    const full = sv.map((v, i) => (sstate[i] === 'STOPPED' ? null : v));
    const early = sv.map((v, i) => (sstate[i] === 'STOPPED' ? v : null));
    const onFront = sv.map((v, i) => (front.has(sid[i]) ? v : null));
    plot(el, {
      // From no cost, with room past the dearest trial: a point on the edge is hard to see.
      scales: { x: { time: false, range: (_, lo, hi) => [0, (hi || 1) * 1.05] }, y: log ? { distr: 3, log: 10 } : {} },
      axes: [{ label: 'core-hours', values: (_, ts) => ts.map(short) },
        { label: metric, values: (_, ts) => ts.map(short), size: 60 }],
      series: [{ label: 'core-hours' }, { label: 'trials', ...dots(MUTED, 6) },
        { label: 'stopped early', ...dots(BAD, 6) },
        { label: 'cost-quality front', stroke: PALETTE[1], width: 2, spanGaps: true,
          paths: uPlot.paths.stepped({ align: 1 }), points: { show: true, size: 7, fill: PALETTE[1] } }],
    }, [sx, full, early, onFront]);
    const n = countValues(sv);
    const f = countValues(onFront);
    el.dataset.front = String(f);
    el.dataset.stopped = String(countValues(early));
    record(el, 3, n, `${metric} against core-hours: ${n} of ${points.total} trials drawn, ${f} on the cost-quality front`);
  }

  // Series over a shared x: [{label, values, color, dots, dash, step}], optional bands
  // [{upper, lower}] (series indices from 1), x as unix seconds when `time`.
  // `yMax`: the top of the y axis (a series above it, e.g. an early, wide upper bound, runs
  // off the chart rather than flattening the rest).
  function lines(el, xs, list, { time = false, xLabel = '', yLabel = '', format = short, bands = [], height, yMax } = {}) {
    const series = [{ label: xLabel }];
    list.forEach((s, i) => {
      const color = s.color || PALETTE[i % PALETTE.length];
      series.push(s.dots ? { label: s.label, ...dots(color, 5) } : {
        label: s.label, stroke: color, width: s.width || 1.5, dash: s.dash, spanGaps: !!s.spanGaps,
        fill: s.fill, points: { show: false },
        paths: s.step ? uPlot.paths.stepped({ align: 1 }) : undefined,
        value: (_, v) => (v === null || v === undefined ? '—' : format(v)),
      });
    });
    plot(el, {
      height,
      scales: { x: { time }, ...(yMax > 0 ? { y: { range: (_, lo) => [Math.min(0, lo), yMax] } } : {}) },
      axes: [{ label: xLabel, ...(time ? {} : { values: (_, ts) => ts.map(short) }) },
        { label: yLabel, values: (_, ts) => ts.map(format), size: 70 }],
      series,
      bands: bands.map((b) => ({ series: [b.upper, b.lower], fill: 'rgba(36, 99, 235, 0.12)' })),
    }, [xs, ...list.map((s) => s.values)]);
    let points = 0;
    for (const s of list) points += countValues(s.values);
    record(el, list.length, points, `${yLabel} over ${xLabel}: ${list.map((s) => s.label).join(', ')}`);
  }

  // Parallel coordinates: one axis per parameter and one for the metric; one polyline per
  // trial, coloured from best (dark blue) to worst (light). A conditional parameter a trial
  // does not have breaks its line at that axis.
  function parallel(el, axes, rows, { metric, minimize }) {
    reset(el);
    const canvas = document.createElement('canvas');
    const w = width(el), h = 300;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = w * dpr;
    canvas.height = h * dpr;
    canvas.style.width = `${w}px`;
    canvas.style.height = `${h}px`;
    el.append(canvas);
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    const L = 40, R = 60, T = 28, B = 24;
    const xAt = (i) => L + (axes.length === 1 ? 0 : (i * (w - L - R)) / (axes.length - 1));
    // Each axis maps its value to 0..1 (log axes in log space; categories by index).
    const scale = axes.map((a) => {
      let lo = a.min, hi = a.max;
      const f = a.log ? (v) => Math.log10(v) : (v) => v;
      if (a.log) { lo = Math.log10(lo); hi = Math.log10(hi); }
      if (a.categories) { lo = -0.5; hi = a.categories.length - 0.5; }
      if (!(hi > lo)) { lo -= 1; hi += 1; }
      return (v) => (f(v) - lo) / (hi - lo);
    });
    const yAt = (t) => T + (1 - t) * (h - T - B);
    const m = axes.length - 1;  // the metric's axis
    const values = rows.map((r) => r[m]);
    let vlo = Math.min(...values), vhi = Math.max(...values);
    if (!(vhi > vlo)) { vlo -= 1; vhi += 1; }
    // Worst first, so the best lines are drawn last, on top.
    const order = rows.map((_, i) => i).sort((a, b) => (minimize ? values[b] - values[a] : values[a] - values[b]));
    ctx.lineWidth = 1;
    let drawn = 0;
    for (const i of order) {
      const q = minimize ? (vhi - values[i]) / (vhi - vlo) : (values[i] - vlo) / (vhi - vlo);  // 1 = best
      ctx.strokeStyle = `hsla(${220 - 40 * q}, 80%, ${75 - 40 * q}%, ${0.25 + 0.6 * q})`;
      ctx.beginPath();
      let pen = false;
      rows[i].forEach((v, k) => {
        if (v === null || v === undefined) { pen = false; return; }
        const x = xAt(k), y = yAt(scale[k](v));
        if (pen) ctx.lineTo(x, y); else ctx.moveTo(x, y);
        pen = true;
      });
      ctx.stroke();
      drawn++;
    }
    ctx.strokeStyle = '#8a94a6';
    ctx.fillStyle = '#1d2430';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'center';
    axes.forEach((a, k) => {
      const x = xAt(k);
      ctx.beginPath();
      ctx.moveTo(x, T);
      ctx.lineTo(x, h - B);
      ctx.stroke();
      ctx.fillText(a.name, x, T - 12);
      const top = a.categories ? a.categories[a.categories.length - 1] : short(a.max);
      const bottom = a.categories ? a.categories[0] : short(a.min);
      ctx.fillText(String(top), x, T - 1);
      ctx.fillText(String(bottom), x, h - B + 13);
    });
    el.dataset.lines = String(drawn);
    record(el, drawn, drawn, `Parallel coordinates of ${axes.length - 1} parameters and ${metric}: ${drawn} trials`);
  }

  // Importance as bars, largest first.
  function bars(el, items) {
    reset(el);
    const max = Math.max(1e-12, ...items.map((p) => p.value));
    const list = document.createElement('ol');
    list.className = 'bars';
    for (const p of items) {
      const li = document.createElement('li');
      const name = document.createElement('span');
      name.className = 'bar-name';
      name.textContent = p.name;
      const track = document.createElement('span');
      track.className = 'bar-track';
      const bar = document.createElement('span');
      bar.className = 'bar';
      bar.style.width = `${(100 * p.value) / max}%`;
      track.append(bar);
      const val = document.createElement('span');
      val.className = 'bar-value';
      val.textContent = p.label;
      li.append(name, track, val);
      list.append(li);
    }
    el.append(list);
    record(el, items.length, items.length, `Parameter importance: ${items.map((p) => `${p.name} ${p.label}`).join(', ')}`);
  }

  return { history, curves, slice, pareto, bestVsCost, costQuality, lines, parallel, bars, bytes, short, reset, PALETTE, BAD, MUTED };
})();
