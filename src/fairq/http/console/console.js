// The fairq operator console: pages built from the /v1 JSON API of `fairq serve`.
//
// No framework and no build step. Every string from the database reaches the
// page as a text node (textContent, createTextNode) or an attribute value set
// with setAttribute; nothing is ever parsed as HTML. The bearer token is
// entered once per tab, kept in sessionStorage and sent as an Authorization
// header: never in a URL or a cookie. Filters live in the URL's hash so a link
// can be shared; the page refreshes itself every few seconds until paused.
"use strict";

const REFRESH_MS = 5000;
const TOKEN_KEY = "fairq.token";
const ACTOR_KEY = "fairq.actor";
const PAUSED_KEY = "fairq.paused";
const SVG_NS = "http://www.w3.org/2000/svg";

const state = { info: null, generation: 0, flash: null };

// -- building the DOM (text only) ---------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

// -- the API -------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.error) || "http_error";
    this.body = body || {};
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  const options = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

function query(params) {
  const parts = [];
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== "") parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(v));
  }
  return parts.length ? "?" + parts.join("&") : "";
}

// -- the route: #/page/argument?filters ----------------------------------------------------

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search] = hash.split("?", 2);
  const [page, ...rest] = path.split("/");
  const params = {};
  for (const [k, v] of new URLSearchParams(search || "")) params[k] = v;
  let arg = null;
  try { arg = rest.length ? decodeURIComponent(rest.join("/")) : null; } catch (e) { arg = null; }
  return { page: page || "overview", arg, params };
}

function link(page, arg, params) {
  return "#/" + page + (arg !== null && arg !== undefined ? "/" + encodeURIComponent(arg) : "") + query(params || {});
}

function go(page, arg, params) {
  location.hash = link(page, arg, params);
}

// -- formatting ----------------------------------------------------------------------------

function when(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  return new Date(seconds * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function span(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "—";
  const s = Math.abs(seconds);
  const text = s < 1 ? Math.round(s * 1000) + " ms" : s < 120 ? s.toFixed(s < 10 ? 1 : 0) + " s"
    : s < 7200 ? Math.round(s / 60) + " min" : s < 172800 ? (s / 3600).toFixed(1) + " h" : (s / 86400).toFixed(1) + " d";
  return text;
}

function relative(at, now) {
  if (at === null || at === undefined) return "—";
  return at >= now ? "in " + span(at - now) : span(now - at) + " ago";
}

function bound(le) {
  if (le === "+Inf") return "+Inf";
  return le < 1 ? Math.round(le * 1000) + "ms" : le < 60 ? le + "s" : le < 3600 ? le / 60 + "m" : le / 3600 + "h";
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

function stateCell(name) {
  return el("span", { class: "state-" + name }, name);
}

// Why a flow is not moving, in one sentence (as `fairq explain` says it).
function explain(b) {
  const head = `head ${b.event_id} (seq ${b.seq})`;
  const behind = b.backlog > 1 ? `; ${b.backlog - 1} more wait behind it` : "";
  const until = b.until === null || b.until === undefined ? "" : " " + relative(b.until, b.now);
  switch (b.why) {
    case "unknown": return "unknown: no event was ever enqueued in it";
    case "empty": return "empty: every event is acked or discarded";
    case "paused": return `paused${b.actor ? " by " + b.actor : ""} (${b.reason === null ? "no reason given" : b.reason})`
      + `${until ? " since" + until : ""}` + (b.event_id ? `: ${head} waits until the flow is resumed${behind}` : "");
    case "ready": return `not blocked: ${head} is claimable now and waits only for its turn${behind}`;
    case "quarantined": return `blocked: ${head} is quarantined (${b.reason === null ? "no reason given" : b.reason})${behind}`;
    case "delayed": return `waiting: ${head} is delayed until${until}${behind}`;
    case "backing_off": return `backing off: ${head} is retried${until} after attempt ${b.attempts}${behind}`;
    case "leased": return `working: ${head} is leased by ${b.owner} until${until}${behind}`;
    case "expired": return `stalled: ${head}'s lease by ${b.owner} ended${until}; the next claim takes it over${behind}`;
    case "tenant_cap": return `waiting for its tenant ${b.tenant}: ${head} is due, but the tenant has max_inflight events leased`
      + (until ? ` (the first ends${until})` : "") + `; a settle frees a slot${behind}`;
    case "tenant_rate": return `waiting for its tenant ${b.tenant}: ${head} is due, but the tenant's rate limit allows its next claim${until}${behind}`;
    default: return b.why;
  }
}

function problem(error) {
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  return String(error && error.message ? error.message : error);
}

function readOnly() {
  return !!(state.info && state.info.read_only);
}

function actorInput() {
  return el("input", { name: "actor", required: true, placeholder: "your name", maxlength: 255,
                       value: sessionStorage.getItem(ACTOR_KEY) || "" });
}

function rememberActor(actor) {
  sessionStorage.setItem(ACTOR_KEY, actor);
}

// -- the token -----------------------------------------------------------------------------

function tokenPage(message) {
  const main = document.getElementById("main");
  clear(main);
  const input = el("input", { type: "password", name: "token", autocomplete: "off", required: true,
                              placeholder: "bearer token", size: 40 });
  const form = el("form", { class: "stack", id: "token-form", onsubmit: (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    state.info = null;
    render();
  } },
    el("p", {}, "This server needs its bearer token (the one `fairq serve` or `fairq ui` was given). ",
       "It is kept in this tab only and sent as an Authorization header."),
    message ? el("p", { class: "error" }, message) : null,
    input, el("button", { type: "submit", class: "primary" }, "Use token"));
  main.appendChild(el("section", {}, el("h1", {}, "Token"), form));
}

// -- rendering and refresh -----------------------------------------------------------------

const PAGES = { overview, flows, tenants: tenantsPage, quarantine, event: eventPage, schedules };

async function render(quiet) {
  const generation = ++state.generation;
  const { page, arg, params } = route();
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("current", a.dataset.page === page || (page === "event" && a.dataset.page === "quarantine"));
  }
  try {
    if (state.info === null) state.info = await api("GET", "/v1/info");
    document.getElementById("mode").textContent = readOnly() ? "read-only" : "";
    const body = await (PAGES[page] || overview)(arg, params);
    if (generation !== state.generation) return; // a newer render started meanwhile
    // A refresh sent before the operator opened a form, typed in one or paused refresh
    // draws nothing: the page stays as it is under their hands.
    if (quiet && (paused() || busy())) return;
    const main = document.getElementById("main");
    clear(main);
    if (state.flash) main.appendChild(el("p", { class: "ok", id: "flash" }, state.flash));
    state.flash = null;
    main.appendChild(body);
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (error) {
    if (generation !== state.generation) return;
    if (error instanceof ApiError && error.status === 401) {
      const had = sessionStorage.getItem(TOKEN_KEY);
      sessionStorage.removeItem(TOKEN_KEY);
      tokenPage(had ? "That token was not accepted." : null);
      return;
    }
    if (quiet) return; // keep what is shown; the next refresh tries again
    const main = document.getElementById("main");
    clear(main);
    main.appendChild(el("p", { class: "error" }, "Could not load this page: " + problem(error)));
  }
}

function busy() {
  // Do not redraw under the operator's hands: a focused or edited form stays.
  const main = document.getElementById("main");
  return !!(main.querySelector("form.dirty") || (document.activeElement && main.contains(document.activeElement)
    && ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName)) || document.getElementById("token-form"));
}

function paused() {
  return sessionStorage.getItem(PAUSED_KEY) === "1";
}

function showPaused() {
  document.getElementById("refresh-toggle").textContent = paused() ? "Resume refresh" : "Pause refresh";
}

function dirtyOnInput(form) {
  form.addEventListener("input", () => form.classList.add("dirty"));
  return form;
}

// -- Overview ------------------------------------------------------------------------------

async function overview(arg, params) {
  const slo = Number(params.slo) > 0 ? Number(params.slo) : 1;
  const [stats, rates] = await Promise.all([api("GET", "/v1/stats?top=10"), api("GET", "/v1/rates")]);
  const info = state.info;
  const counts = stats.counts;
  const card = (label, n, cls) => el("div", { class: "card" }, el("div", { class: "n " + (cls || "") }, n),
                                     el("div", { class: "label" }, label));
  const sloForm = el("form", { class: "inline", onsubmit: (e) => {
    e.preventDefault();
    go("overview", null, { slo: e.target.elements.slo.value });
  } }, el("label", {}, "SLO (s) ", el("input", { type: "number", name: "slo", min: "0.001", step: "any", value: slo })),
    el("button", { type: "submit" }, "Apply"));
  const totals = el("table", {}, el("tbody", {}, Object.entries(stats.totals).map(([k, n]) =>
    el("tr", {}, el("td", {}, k), el("td", { class: "num" }, n)))));
  const policy = info.policy;
  const policyTable = el("table", {}, el("tbody", {},
    el("tr", {}, el("td", {}, "schema version"), el("td", { class: "num" }, info.schema_version)),
    el("tr", {}, el("td", {}, "policy version"), el("td", { class: "num" }, policy.version)),
    el("tr", {}, el("td", {}, "max attempts"), el("td", { class: "num" }, policy.max_attempts)),
    el("tr", {}, el("td", {}, "lease"), el("td", { class: "num" }, policy.lease_seconds + " s")),
    el("tr", {}, el("td", {}, "backoff"), el("td", { class: "num" },
      `${policy.backoff.base} s × ${policy.backoff.factor}, cap ${policy.backoff.cap} s${policy.backoff.jitter ? ", jitter" : ""}`))));
  const top = stats.top_flows.length ? el("table", {}, el("tbody", {}, stats.top_flows.map(([name, n]) =>
    el("tr", {}, el("td", { class: "wrap" }, name),
       el("td", { class: "num" }, n))))) : el("p", { class: "muted" }, "no named flow has a backlog");
  return el("section", { id: "page-overview" },
    el("h1", {}, "Overview"),
    // What can move comes first: ready events behind a quarantined or paused head are not claimable,
    // so "ready" looks healthy (green) only when no flow is blocked.
    el("div", { class: "cards" },
      card("claimable now", stats.claimable_now, stats.claimable_now ? "state-ready" : ""),
      card("blocked flows", stats.blocked_flows, stats.blocked_flows ? "state-quarantined" : ""),
      card(stats.blocked_flows ? "ready (some behind blocked heads)" : "ready", counts.ready,
           stats.blocked_flows ? "" : "state-ready"),
      card("inflight", counts.inflight, "state-inflight"),
      card("quarantined", counts.quarantined, counts.quarantined ? "state-quarantined" : ""),
      card("acked", counts.acked, "state-acked"), card("discarded", counts.discarded || 0, "state-acked"),
      card("flows with work", stats.flows),
      card("oldest ready", span(stats.oldest_ready_age)), card("tombstones", stats.tombstones)),
    el("div", { class: "grid2" },
      el("div", { class: "panel" }, el("h2", {}, "Claim lag (due → first claim)"),
        el("div", { class: "toolbar" }, sloForm,
          el("span", {}, `median ${span(stats.claim_lag_median)}, p99 ${span(stats.claim_lag_p99)}`)),
        lagChart(stats.claim_lag_buckets, slo)),
      el("div", { class: "panel" }, el("h2", {}, "Claims and acks per minute"), rateChart(rates))),
    el("div", { class: "grid2" },
      el("div", { class: "panel" }, el("h2", {}, "Totals since the file was created"), totals),
      el("div", { class: "panel" }, el("h2", {}, "Schema and stored policy"), policyTable)),
    el("div", { class: "panel" }, el("h2", {}, "Largest backlogs"), top));
}

function lagChart(buckets, slo) {
  const W = 560, H = 190, left = 34, bottom = 22, top = 18;
  const n = buckets.length, bw = (W - left - 4) / n;
  const max = Math.max(1, ...buckets.map((b) => b[1]));
  const total = buckets.reduce((s, b) => s + b[1], 0);
  let within = 0, sloIndex = 0;
  buckets.forEach(([le, count], i) => {
    if (le !== "+Inf" && le <= slo + 1e-12) { within += count; sloIndex = i + 1; }
  });
  const bars = buckets.map(([le, count], i) => {
    const h = (H - bottom - top) * count / max;
    const x = left + i * bw;
    return svg("g", {},
      svg("rect", { class: "bar" + (i >= sloIndex ? " over" : ""), x: x + 1, y: H - bottom - h, width: Math.max(1, bw - 2), height: h },
        svg("title", {}, `≤ ${bound(le)}: ${count}`)),
      i % 2 === 0 ? svg("text", { x: x + bw / 2, y: H - 8, "text-anchor": "middle" }, bound(le)) : null);
  });
  const sx = left + sloIndex * bw;
  const share = total ? (100 * within / total).toFixed(1) + "%" : "—";
  return el("div", {},
    svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "claim lag histogram", id: "lag-chart" },
      svg("line", { class: "axis", x1: left, y1: H - bottom, x2: W, y2: H - bottom }),
      svg("text", { x: left - 4, y: top + 4, "text-anchor": "end" }, max),
      svg("text", { x: left - 4, y: H - bottom, "text-anchor": "end" }, 0),
      bars,
      svg("line", { class: "slo", x1: sx, y1: top - 10, x2: sx, y2: H - bottom }),
      svg("text", { class: "slo-label", x: sx + 4, y: top - 2 }, `SLO ${span(slo)}`)),
    el("p", { class: "muted", id: "slo-share" }, `${share} of first claims within the SLO of ${span(slo)} (${within} of ${total})`));
}

function rateChart(rates) {
  const minutes = rates.minutes || [];
  if (!minutes.length) {
    return el("p", { class: "muted", id: "rate-chart-empty" }, rates.sample_seconds
      ? `No minute sampled yet: the server samples every ${rates.sample_seconds} s and keeps the last hour.`
      : "This server does not sample its totals.");
  }
  const W = 560, H = 190, left = 34, bottom = 22, top = 10;
  const max = Math.max(1, ...minutes.map((m) => Math.max(m.claimed, m.acked)));
  const first = minutes[0].minute, last = minutes[minutes.length - 1].minute;
  const x = (m) => left + (W - left - 8) * (last === first ? 1 : (m - first) / (last - first));
  const y = (v) => H - bottom - (H - bottom - top) * v / max;
  const points = (key) => minutes.map((m) => `${x(m.minute).toFixed(1)},${y(m[key]).toFixed(1)}`).join(" ");
  const hhmm = (s) => new Date(s * 1000).toISOString().slice(11, 16) + "Z";
  return el("div", {},
    svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "claims and acks per minute", id: "rate-chart" },
      svg("line", { class: "axis", x1: left, y1: H - bottom, x2: W, y2: H - bottom }),
      svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: H - bottom }),
      svg("text", { x: left - 4, y: top + 4, "text-anchor": "end" }, Math.round(max)),
      svg("text", { x: left - 4, y: H - bottom, "text-anchor": "end" }, 0),
      svg("text", { x: left, y: H - 6 }, hhmm(first)),
      svg("text", { x: W - 4, y: H - 6, "text-anchor": "end" }, hhmm(last)),
      svg("polyline", { class: "acks", points: points("acked") }),
      svg("polyline", { class: "claims", points: points("claimed") })),
    el("p", { class: "muted" }, el("span", { class: "legend-claims" }, "— claims"), "  ",
       el("span", { class: "legend-acks" }, "— acks"),
       `  per minute, last ${minutes.length} min (now ${Math.round(minutes[minutes.length - 1].claimed)} claims, `
       + `${Math.round(minutes[minutes.length - 1].acked)} acks)`));
}

// -- Flows ---------------------------------------------------------------------------------

async function flows(arg, params) {
  const sort = params.sort === "name" ? "name" : "stuck";
  const data = await api("GET", "/v1/flows" + query({ limit: 200, after: params.after }));
  const rows = data.flows.slice();
  const stuckFor = (f) => (f.head ? f.blocked.now - f.head.due_at : -Infinity);
  if (sort === "stuck") rows.sort((a, b) => stuckFor(b) - stuckFor(a) || (a.name < b.name ? -1 : 1));
  const toolbar = el("div", { class: "toolbar" },
    el("span", {}, "Sort: "),
    sort === "stuck" ? el("strong", {}, "stuck longest") : el("a", { href: link("flows", null, { ...params, sort: "stuck" }) }, "stuck longest"),
    sort === "name" ? el("strong", {}, "name") : el("a", { href: link("flows", null, { ...params, sort: "name" }) }, "name"),
    params.after ? el("a", { href: link("flows", null, { sort }) }, "first page") : null,
    data.flows.length === 200 ? el("a", { href: link("flows", null, { sort, after: data.flows[data.flows.length - 1].name }) }, "next page") : null);
  const table = el("table", { id: "flows-table" },
    el("thead", {}, el("tr", {}, ["flow", "tenant", "head", "seq", "state", "gen", "owner", "lease end / next at", "stuck for",
      "backlog", "weight", "why"].map((h, i) => el("th", { class: [3, 5, 9].includes(i) ? "num" : (i === 6 ? "optional" : "") }, h)))),
    el("tbody", {}, rows.map((f) => flowRow(f))));
  return el("section", { id: "page-flows" }, el("h1", {}, "Flows"), toolbar,
    rows.length ? el("div", { class: "scroll" }, table) : el("p", { class: "muted" }, "No named flow yet."),
    el("p", { class: "muted" }, "Stuck for: how long each head has been due. Named flows only; an event enqueued without a flow is a flow of its own. A flow without a tenant (—) is its own tenant."));
}

function flowRow(f) {
  const h = f.head, b = f.blocked, now = b.now;
  const timeCell = !h ? "—" : h.state === "inflight" ? relative(h.lease_until, now) : h.next_at !== null ? relative(h.next_at, now) : "—";
  const weight = readOnly() ? el("span", {}, f.weight) : weightForm(f);
  return el("tr", { "data-flow": f.name },
    el("td", { class: "wrap" }, f.name),
    el("td", { class: "wrap flow-tenant" }, f.tenant === null || f.tenant === undefined ? "—" : f.tenant),
    el("td", { class: "wrap" }, h ? el("a", { href: link("event", h.event_id) }, h.event_id) : "—"),
    el("td", { class: "num" }, h ? h.seq : "—"),
    el("td", {}, h ? stateCell(h.state) : "—"),
    el("td", { class: "num" }, h ? h.generation : "—"),
    el("td", { class: "wrap optional" }, h && h.owner !== null ? h.owner : "—"),
    el("td", {}, timeCell),
    el("td", {}, h ? span(now - h.due_at) : "—"),
    el("td", { class: "num" }, f.backlog),
    el("td", {}, weight),
    el("td", { class: "wrap why-" + b.why }, explain(b),
       readOnly() ? null : el("button", { type: "button", class: "pause-open", onclick: (click) => {
         const row = click.target.closest("tr");
         if (row.nextSibling && row.nextSibling.classList.contains("pause-row")) return;
         const form = pauseForm(f);
         form.querySelector("form").classList.add("dirty"); // an open form is not redrawn away
         row.parentNode.insertBefore(el("tr", { class: "pause-row" }, el("td", { colspan: 12 }, form)), row.nextSibling);
       } }, f.paused ? "Resume…" : "Pause…")));
}

function pauseForm(f) {
  const verb = f.paused ? "resume" : "pause", Verb = f.paused ? "Resume" : "Pause";
  const reason = el("input", { name: "reason", required: !f.paused, maxlength: 4096, size: 30,
                               placeholder: f.paused ? "why (optional, kept in the audit)" : "why (kept in the audit)" });
  const actor = actorInput();
  const message = el("div", { id: "pause-result" });
  const form = el("form", { class: "inline", id: "pause-form", onsubmit: async (e) => {
    e.preventDefault();
    clear(message);
    const ask = f.paused ? `Resume flow ${f.name}? Its head can be claimed again, in its place in the rotation.`
      : `Pause flow ${f.name}? Its head is not claimed until it is resumed (a running lease goes on).`;
    if (!window.confirm(ask)) return;
    rememberActor(actor.value.trim());
    try {
      await api("POST", "/v1/" + verb, { flow: f.name, reason: reason.value.trim() || null, actor: actor.value.trim() });
      form.classList.remove("dirty");
      state.flash = f.paused ? `Resumed: flow ${f.name} can be claimed again.` : `Paused: flow ${f.name} is not claimed until resumed.`;
      render(); // the page as it is now, the result on top
    } catch (error) {
      message.appendChild(el("p", { class: "error" }, "Refused: " + problem(error)));
    }
  } }, reason, actor, el("button", { type: "submit", class: "danger" }, Verb));
  return el("div", { class: "panel" }, el("p", { class: "muted" },
    f.paused ? `Flow ${f.name} is paused. Resuming writes an audit row with your name.`
      : `Pausing flow ${f.name} stops claims of its head until it is resumed. Writes an audit row with your reason and name.`),
    dirtyOnInput(form), message);
}

function weightForm(f) {
  const input = el("input", { type: "number", name: "weight", min: 1, max: 1000, value: f.weight, required: true });
  const message = el("span", {});
  const form = el("form", { class: "inline weight-form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const done = await api("POST", "/v1/set_weight", { flow: f.name, weight: Number(input.value) });
      form.classList.remove("dirty");
      message.textContent = "set to " + done.weight;
      message.className = "ok";
    } catch (error) {
      message.textContent = problem(error);
      message.className = "error";
    }
  } }, input, el("button", { type: "submit" }, "Set"), message);
  return dirtyOnInput(form);
}

// -- Tenants -------------------------------------------------------------------------------

const TENANTS_PAGE = 200;

async function tenantsPage(arg, params) {
  const data = await api("GET", "/v1/tenants" + query({ limit: TENANTS_PAGE, after: params.after }));
  const toolbar = el("div", { class: "toolbar" },
    params.after ? el("a", { href: link("tenants") }, "first page") : null,
    data.next ? el("a", { href: link("tenants", null, { after: data.next }) }, "next page") : null);
  const table = el("table", { id: "tenants-table" },
    el("thead", {}, el("tr", {}, ["tenant", "weight", "max inflight", "rate", "burst", "inflight", "ready", "flows",
      "tokens", "limited by", ""].map((h, i) => el("th", { class: i >= 1 && i <= 8 ? "num" : "" }, h)))),
    el("tbody", {}, data.tenants.map((t) => tenantRow(t))));
  return el("section", { id: "page-tenants" }, el("h1", {}, "Tenants"),
    params.after || data.next ? toolbar : null,
    data.tenants.length ? el("div", { class: "scroll" }, table) : el("p", { class: "muted" }, "No tenant yet."),
    el("p", { class: "muted" }, "Claims rotate over tenants by weight, then over each tenant's flows. "
      + "Max inflight: its events leased at once; rate and burst: its token bucket (claims per second, claims at once); "
      + "0 means no limit. A tenant held back by a limit is skipped without losing its place."));
}

function limitCell(n) {
  return n === 0 ? el("span", { class: "muted" }, "none") : n;
}

function tenantRow(t) {
  const limited = t.limited_by === null ? "—"
    : el("span", { class: "why-limited" }, t.limited_by, t.until === null ? "" : " until " + when(t.until));
  return el("tr", { "data-tenant": t.name },
    el("td", { class: "wrap" }, t.name),
    el("td", { class: "num" }, t.weight),
    el("td", { class: "num" }, limitCell(t.max_inflight)),
    el("td", { class: "num" }, limitCell(t.rate)),
    el("td", { class: "num" }, t.rate === 0 ? "—" : t.burst),
    el("td", { class: "num" }, t.inflight),
    el("td", { class: "num" }, t.ready),
    el("td", { class: "num" }, t.flows),
    el("td", { class: "num" }, t.tokens === null ? "—" : (Math.round(t.tokens * 100) / 100)),
    el("td", {}, limited),
    el("td", {}, readOnly() ? null : el("button", { type: "button", class: "tenant-edit", onclick: (click) => {
      const row = click.target.closest("tr");
      if (row.nextSibling && row.nextSibling.classList.contains("tenant-form-row")) return;
      const form = tenantForm(t);
      form.querySelector("form").classList.add("dirty"); // an open form is not redrawn away
      row.parentNode.insertBefore(el("tr", { class: "tenant-form-row" }, el("td", { colspan: 11 }, form)), row.nextSibling);
    } }, "Edit…")));
}

function tenantForm(t) {
  const number = (name, value, min, max) => el("input", { type: "number", name, min, max, step: 1, value });
  const inputs = { weight: number("weight", t.weight, 1, 1000), max_inflight: number("max_inflight", t.max_inflight, 0),
                   rate: number("rate", t.rate, 0), burst: number("burst", t.burst, 0) };
  const reason = el("input", { name: "reason", required: true, placeholder: "why (kept in the audit)", maxlength: 4096, size: 28 });
  const actor = actorInput();
  const message = el("div", { class: "tenant-result" });
  const form = el("form", { class: "inline", id: "tenant-form", onsubmit: async (e) => {
    e.preventDefault();
    clear(message);
    const settings = {};
    for (const [name, input] of Object.entries(inputs)) {
      const text = input.value.trim();  // left empty: keep the stored setting
      if (text !== "") settings[name] = Number(text);
    }
    const shown = Object.entries(settings).map(([k, v]) => `${k} ${v}`).join(", ") || "nothing";
    if (!window.confirm(`Set tenant ${t.name}: ${shown}?`)) return;
    rememberActor(actor.value.trim());
    try {
      const done = await api("POST", "/v1/set_tenant", { tenant: t.name, ...settings, reason: reason.value,
                                                         actor: actor.value.trim() });
      form.classList.remove("dirty");
      state.flash = `Set tenant ${done.name}: weight ${done.weight}, max inflight ${done.max_inflight}, `
        + `rate ${done.rate}, burst ${done.burst}.`;
      render(); // the page as it is now, the result on top
    } catch (error) {
      const field = error instanceof ApiError && error.body.field ? error.body.field + ": " : "";
      message.appendChild(el("p", { class: "error" }, "Refused: " + field + (field ? error.message : problem(error))));
    }
  } },
    el("label", {}, "weight ", inputs.weight), el("label", {}, "max inflight ", inputs.max_inflight),
    el("label", {}, "rate ", inputs.rate), el("label", {}, "burst ", inputs.burst), reason, actor,
    el("button", { type: "submit", class: "primary" }, "Set"));
  return el("div", { class: "panel" },
    el("p", { class: "muted" }, `Tenant ${t.name}: the new settings take effect from the next claim; 0 means no limit, an empty field keeps the setting. Writes an audit row with your reason and name.`),
    dirtyOnInput(form), message);
}

// -- Quarantine ----------------------------------------------------------------------------

async function quarantine(arg, params) {
  const data = await api("GET", "/v1/events" + query({ state: "quarantined", limit: 500, flow: params.flow, after: params.after }));
  const needle = (params.reason || "").toLowerCase();
  const shown = data.events.filter((e) => !needle || (e.reason || "").toLowerCase().includes(needle));
  const filter = el("form", { class: "inline", id: "quarantine-filter", onsubmit: (e) => {
    e.preventDefault();
    go("quarantine", null, { flow: e.target.elements.flow.value.trim(), reason: e.target.elements.reason.value.trim() });
  } },
    el("label", {}, "flow ", el("input", { name: "flow", value: params.flow || "", placeholder: "any" })),
    el("label", {}, "reason contains ", el("input", { name: "reason", value: params.reason || "", placeholder: "any" })),
    el("button", { type: "submit" }, "Filter"),
    el("a", { href: link("quarantine") }, "clear"));
  const result = el("div", { id: "bulk-result" });
  const table = el("table", { id: "quarantine-table" },
    el("thead", {}, el("tr", {}, ["event", "flow", "seq", "gen", "attempts", "reason", "last owner", ""].map((h, i) =>
      el("th", { class: [2, 3, 4].includes(i) ? "num" : (i === 6 ? "optional" : "") }, h)))),
    el("tbody", {}, shown.map((e) => quarantineRow(e))));
  return el("section", { id: "page-quarantine" }, el("h1", {}, "Quarantine"), filter,
    el("p", { class: "muted" }, `${shown.length} shown of ${data.events.length} quarantined listed`,
       data.events.length === 500 ? " (more: " : "", data.events.length === 500
         ? el("a", { href: link("quarantine", null, { ...params, after: data.events[data.events.length - 1].event_id }) }, "next page") : null,
       data.events.length === 500 ? ")" : ""),
    shown.length ? el("div", { class: "scroll" }, table) : el("p", { class: "muted" }, "Nothing is quarantined here."),
    shown.length && !readOnly() ? bulkForm(shown, result, "redrive") : null,
    shown.length && !readOnly() ? bulkForm(shown, result, "discard") : null, result);
}

function quarantineRow(e) {
  return el("tr", { "data-event": e.event_id },
    el("td", { class: "wrap" }, el("a", { href: link("event", e.event_id) }, e.event_id)),
    el("td", { class: "wrap" }, e.flow === null ? "—" : e.flow),
    el("td", { class: "num" }, e.seq),
    el("td", { class: "num" }, e.generation),
    el("td", { class: "num" }, `${e.attempts} (${e.lifetime_attempts} in all)`),
    el("td", { class: "wrap" }, e.reason === null ? "—" : e.reason),
    el("td", { class: "wrap optional" }, e.owner === null ? "—" : e.owner),
    el("td", {}, readOnly() ? null : [openButton(e, "redrive", "Redrive…"), openButton(e, "discard", "Discard…")]));
}

function openButton(e, verb, label) {
  return el("button", { type: "button", class: verb + "-open", onclick: (click) => {
    const row = click.target.closest("tr");
    if (row.nextSibling && row.nextSibling.classList.contains(verb + "-row")) return;
    const form = fencedForm(e, verb);
    form.querySelector("form").classList.add("dirty"); // an open form is not redrawn away
    row.parentNode.insertBefore(el("tr", { class: verb + "-row" }, el("td", { colspan: 8 }, form)), row.nextSibling);
  } }, label);
}

const FENCED = {
  redrive: { Verb: "Redrive", done: "redriven", Done: "Redriven",
             note: "Each is redriven only if it is still quarantined at the generation shown; the others are listed as refused." },
  discard: { Verb: "Discard", done: "discarded", Done: "Discarded",
             note: "Each is discarded (settled for good: its flow moves on) only if it is still at the generation shown; the others are listed as refused." },
};

function bulkForm(shown, result, verb) {
  const v = FENCED[verb];
  const reason = el("input", { name: "reason", required: true, placeholder: "why (kept in the audit)", maxlength: 4096 });
  const actor = actorInput();
  const form = el("form", { class: "inline", id: "bulk-" + verb, onsubmit: async (e) => {
    e.preventDefault();
    if (!window.confirm(`${v.Verb} the ${shown.length} events shown, each at the generation listed?`)) return;
    clear(result);
    rememberActor(actor.value.trim());
    try {
      const done = await api("POST", `/v1/${verb}_many`, {
        items: shown.map((x) => ({ event_id: x.event_id, expected_generation: x.generation })),
        reason: reason.value, actor: actor.value.trim() });
      form.classList.remove("dirty");
      result.appendChild(el("div", { class: "ok" }, `${v.Done}: ${done[v.done].length}`,
        el("ul", { class: "results" }, done[v.done].map((r) => el("li", {}, `${r.event_id} → generation ${r.generation}`)))));
      if (done.refused.length) {
        result.appendChild(el("div", { class: "error" }, `Refused: ${done.refused.length}`,
          el("ul", { class: "results" }, done.refused.map((r) => el("li", {}, `${r.event_id}: ${r.message}`)))));
      }
      pause(true); // keep the result on screen until the operator resumes
    } catch (error) {
      result.appendChild(el("div", { class: "error" }, "Refused: " + problem(error)));
    }
  } },
    el("strong", {}, `${v.Verb} the ${shown.length} shown:`), reason, actor,
    el("button", { type: "submit", class: "danger" }, `${v.Verb} ${shown.length}`));
  return el("div", { class: "panel" }, dirtyOnInput(form), el("p", { class: "muted" }, v.note));
}

// -- Event ---------------------------------------------------------------------------------

async function eventPage(id) {
  if (id === null) return el("p", { class: "error" }, "No event id in the address.");
  let info;
  try {
    info = await api("GET", "/v1/events/" + encodeURIComponent(id));
  } catch (error) {
    if (error instanceof ApiError && error.code === "unknown_event") {
      return el("section", { id: "page-event" }, el("h1", {}, "Event"), el("p", { class: "error" }, "No event ", id));
    }
    throw error;
  }
  const audit = await api("GET", "/v1/audit" + query({ event_id: id, limit: 500 }));
  const row = (name, value) => [el("dt", {}, name), el("dd", {}, value)];
  const body = info.undecodable_body
    ? el("div", {}, el("p", { class: "error" }, "The stored body does not decode here: ", info.undecodable_body.problem),
         el("pre", { id: "event-body" }, info.undecodable_body.text))
    : el("pre", { id: "event-body" }, json(info.body));
  const fields = el("dl", { class: "fields", id: "event-fields" },
    row("event", info.event_id), row("state", stateCell(info.state)),
    row("flow", info.flow === null ? "(its own)" : info.flow), row("seq", info.seq),
    row("generation", info.generation), row("attempts", `${info.attempts} this round, ${info.lifetime_attempts} in all`),
    row("owner", info.owner === null ? "—" : info.owner), row("lease until", when(info.lease_until)),
    row("next at", when(info.next_at)), row("reason", info.reason === null ? "—" : info.reason),
    row("created", when(info.created_at)), row("due", when(info.due_at)),
    row("first claimed", when(info.first_claimed_at)),
    row(info.state === "discarded" ? "discarded" : "acked", when(info.settled_at)));
  const timeline = audit.audit.length ? el("ol", { class: "timeline", id: "event-audit" }, audit.audit.map((a) =>
    el("li", { "data-action": a.action },
      el("div", { class: "when" }, when(a.at), " · generation ", a.generation === null ? "—" : a.generation),
      el("div", {}, el("strong", {}, a.action), a.actor !== null ? " by " : "", a.actor !== null ? a.actor : "",
         a.reason !== null ? ": " : "", a.reason !== null ? a.reason : ""),
      Object.keys(a.detail).length ? el("div", { class: "muted" }, JSON.stringify(a.detail)) : null)))
    : el("p", { class: "muted", id: "event-audit" }, "No audit rows (retries, quarantines, expired leases and redrives are recorded).");
  return el("section", { id: "page-event" }, el("h1", {}, "Event ", el("span", { id: "event-title" }, info.event_id)),
    el("div", { class: "grid2" },
      el("div", { class: "panel" }, el("h2", {}, "State and lease"), fields),
      el("div", { class: "panel" }, el("h2", {}, "Body"), body)),
    info.state === "quarantined" && !readOnly() ? fencedForm(info, "redrive") : null,
    ["ready", "quarantined"].includes(info.state) && !readOnly() ? fencedForm(info, "discard") : null,
    el("div", { class: "panel" }, el("h2", {}, "Audit timeline"), timeline));
}

const FENCED_FORM = {
  redrive: { confirm: null, flash: (d) => `Redriven: ${d.event_id} is ready again at generation ${d.generation}.`,
             note: "Gives the event a new round of attempts, only if it is still quarantined at the expected generation. Writes an audit row with your reason and name." },
  discard: { confirm: (id) => `Discard ${id}? It is settled for good and its flow moves on to its next event.`,
             flash: (d) => `Discarded: ${d.event_id} is settled for good at generation ${d.generation}; its flow moves on.`,
             note: "Settles the event for good (for one no handler will ever accept), only if it is still at the expected generation and not leased; its flow moves on to its next event. Writes an audit row with your reason and name." },
};

function fencedForm(info, verb) {
  const v = FENCED[verb], f = FENCED_FORM[verb];
  const generation = el("input", { type: "number", name: "expected_generation", min: 0, required: true, value: info.generation });
  const reason = el("input", { name: "reason", required: true, placeholder: "why (kept in the audit)", maxlength: 4096, size: 30 });
  const actor = actorInput();
  const message = el("div", { id: verb + "-result" });
  const form = el("form", { class: "inline", id: verb + "-form", onsubmit: async (e) => {
    e.preventDefault();
    clear(message);
    if (f.confirm && !window.confirm(f.confirm(info.event_id))) return;
    rememberActor(actor.value.trim());
    try {
      const done = await api("POST", "/v1/" + verb, { event_id: info.event_id, expected_generation: Number(generation.value),
                                                      reason: reason.value, actor: actor.value.trim() });
      form.classList.remove("dirty");
      state.flash = f.flash(done);
      render(); // the page as it is now, the result on top
    } catch (error) {
      message.appendChild(el("p", { class: "error" }, "Refused: " + problem(error)));
    }
  } },
    el("label", {}, "expected generation ", generation), reason, actor,
    el("button", { type: "submit", class: "danger" }, v.Verb));
  return el("div", { class: "panel" }, el("h2", {}, v.Verb), el("p", { class: "muted" }, f.note),
    dirtyOnInput(form), message);
}

// -- Schedules -----------------------------------------------------------------------------

async function schedules(arg, params) {
  const data = await api("GET", "/v1/schedules" + query({ limit: 100, after: params.after }));
  const misfires = await Promise.all(data.schedules.map((s) =>
    api("GET", "/v1/schedules/" + encodeURIComponent(s.name) + "/misfires?limit=20")));
  const rows = data.schedules.map((s, i) => scheduleRow(s, misfires[i].misfires));
  const table = el("table", { id: "schedules-table" },
    el("thead", {}, el("tr", {}, ["schedule", "every / cron", "flow", "next slot", "last slot", "misfire policy",
      "recent misfires", "state", ""].map((h, i) => el("th", { class: i === 2 ? "optional" : "" }, h)))),
    el("tbody", {}, rows));
  const pages = el("div", { class: "toolbar" },
    params.after ? el("a", { href: link("schedules") }, "first page") : null,
    data.next ? el("a", { href: link("schedules", null, { after: data.next }) }, "next page") : null);
  return el("section", { id: "page-schedules" }, el("h1", {}, "Schedules"),
    params.after || data.next ? pages : null,
    rows.length ? el("div", { class: "scroll" }, table) : el("p", { class: "muted" }, "No schedule yet."));
}

function scheduleRow(s, misfires) {
  const cadence = s.every !== null ? `every ${span(s.every)}` : `${s.cron} (${s.tz})`;
  const recent = misfires.length
    ? el("span", { title: misfires[0].reason || "" }, `${misfires.length >= 20 ? "20+" : misfires.length}, last: `,
         misfires[0].reason === null ? "" : misfires[0].reason)
    : "none";
  const message = el("span", {});
  const action = async () => {
    try {
      await api("POST", "/v1/schedules/" + encodeURIComponent(s.name) + (s.paused ? "/resume" : "/pause"), {});
      render();
    } catch (error) {
      message.textContent = problem(error);
      message.className = "error";
    }
  };
  return el("tr", { "data-schedule": s.name },
    el("td", { class: "wrap" }, s.name), el("td", { class: "wrap" }, cadence),
    el("td", { class: "wrap optional" }, s.flow === null ? "—" : s.flow),
    el("td", {}, when(s.next_slot)), el("td", {}, when(s.last_slot)),
    el("td", {}, s.misfire + (s.grace !== null ? ` (grace ${span(s.grace)})` : "")),
    el("td", { class: "wrap" }, recent),
    el("td", {}, s.paused ? el("strong", {}, "paused") : "running"),
    el("td", {}, readOnly() ? null : el("button", { type: "button", class: "schedule-toggle", onclick: action },
      s.paused ? "Resume" : "Pause"), message));
}

// -- start ---------------------------------------------------------------------------------

function pause(on) {
  sessionStorage.setItem(PAUSED_KEY, on ? "1" : "0");
  showPaused();
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("refresh-toggle").addEventListener("click", () => { pause(!paused()); if (!paused()) render(); });
  document.getElementById("forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    state.info = null;
    render();
  });
  window.addEventListener("hashchange", () => render());
  showPaused();
  render();
  setInterval(() => { if (!paused() && !busy() && !document.hidden) render(true); }, REFRESH_MS);
});
