// Banyan's dashboard (doc/spec/http.md §6): plain JavaScript over the REST
// API, no framework and nothing fetched from elsewhere. Each view is
// chosen by the URL fragment and refreshes itself while it is shown.
'use strict';

const view = document.getElementById('view');
const statusLine = document.getElementById('status');
let timer = null;
let stream = null;
let sort = {key: 't_submit', desc: true};
let filterText = '';

// The token: given once as /?access_token=T (which also lets the server
// hand out this page when / is not open), then kept for the tab.
function token() {
    const given = new URLSearchParams(location.search).get('access_token');
    if (given) {
        sessionStorage.setItem('banyan-token', given);
        history.replaceState(null, '', location.pathname + (location.hash || '#queue'));
    }
    return sessionStorage.getItem('banyan-token') || '';
}

async function api(path) {
    const headers = token() ? {Authorization: 'Bearer ' + token()} : {};
    const r = await fetch('/api/v1/' + path, {headers});
    const body = await r.json();
    if (r.status === 401)
        askToken(body.message);
    if (!r.ok)
        throw new Error(body.message || r.statusText);
    return body;
}

function askToken(why) {
    const form = document.getElementById('login');
    form.hidden = false;
    statusLine.textContent = why || 'a token is needed';
    form.onsubmit = (e) => {
        e.preventDefault();
        sessionStorage.setItem('banyan-token', document.getElementById('token').value.trim());
        form.hidden = true;
        route();
    };
}

function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
        if (k === 'class')
            e.className = v;
        else if (k.startsWith('on'))
            e.addEventListener(k.slice(2), v);
        else
            e.setAttribute(k, v);
    }
    for (const c of children)
        e.append(c instanceof Node ? c : document.createTextNode(String(c ?? '')));
    return e;
}

function when(t) { return t ? new Date(t * 1000).toLocaleTimeString() : ''; }
// A time that may not be today (an expected start): with its date then.
function whenever(t) {
    const d = new Date(t * 1000);
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

function refresh(fn, ms) {
    fn();
    timer = setInterval(fn, ms);
}

function fail(e) {
    statusLine.textContent = '';
    statusLine.append(el('span', {class: 'error'}, e.message));
}

// The queue: pending and running jobs (and the last inactive ones).
function showQueue() {
    const search = el('input', {type: 'search', placeholder: 'filter: name, user, state, nodes', value: filterText});
    const holder = el('div', {class: 'scroll'});
    search.addEventListener('input', () => {
        filterText = search.value;
        draw();
    });
    view.append(search, holder);
    const columns = [
        ['id', 'Job'], ['user', 'User'], ['name', 'Name'], ['state', 'State'], ['ntasks', 'Tasks'], ['nnodes', 'Nodes'],
        ['nodelist', 'Node list'], ['t_submit', 'Submitted'], ['t_estimate', 'Expected start']
    ];
    let jobs = [];
    function draw() {
        const want = filterText.toLowerCase();
        const shown = jobs.filter((j) => !want || [
            j.id, j.user, j.name, j.state, j.result, j.nodelist
        ].some((v) => String(v ?? '').toLowerCase().includes(want)));
        shown.sort((a, b) => {
            const x = a[sort.key] ?? '', y = b[sort.key] ?? '';
            const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
            return sort.desc ? -c : c;
        });
        const head =
            el('tr', {},
               ...columns.map(
                   ([key, title]) =>
                       el('th', {
                           class: sort.key === key ? 'sorted' + (sort.desc ? ' desc' : '') : '',
                           'data-key': key,
                           onclick: () => {
                               sort = {key, desc: sort.key === key ? !sort.desc : false};
                               draw();
                           },
                       },
                          title)));
        const rows = shown.map(
            (j) =>
                el('tr', {'data-job': j.id, 'data-state': j.state, 'data-result': j.result ?? ''},
                   el('td', {}, el('a', {href: '#job/' + j.id}, j.id)), el('td', {}, j.user), el('td', {}, j.name),
                   el('td', {class: 'state-' + j.state, title: j.reason ?? ''},
                      j.result ? j.state + ' (' + j.result + ')' : j.state),
                   el('td', {}, j.ntasks), el('td', {}, j.nnodes), el('td', {}, j.nodelist ?? ''),
                   el('td', {}, when(j.t_submit)),
                   // The scheduler's reserved start of a pending job (http.md §4).
                   el('td', {class: 'estimate'}, j.t_estimate ? '~' + whenever(j.t_estimate) : '')));
        holder.replaceChildren(el('table', {id: 'jobs'}, el('thead', {}, head), el('tbody', {}, ...rows)));
        statusLine.textContent = `${shown.length} of ${jobs.length} jobs · ${new Date().toLocaleTimeString()}`;
    }
    refresh(async () => {
        try {
            let r;
            try {
                r = await api('jobs?all=1&users=all&count=500');
            } catch (e) {
                r = await api('jobs?all=1&count=500');
            }
            jobs = r.jobs;
            draw();
        } catch (e) {
            fail(e);
        }
    }, 2000);
}

// One job: its summary, R, eventlog (streamed while it runs), output tail.
function showJob(id) {
    const summary = el('pre', {id: 'summary'});
    const events = el('pre', {id: 'eventlog'});
    const output = el('pre', {id: 'output'});
    const R = el('pre', {id: 'R'});
    // A profiled job (--profile-ebpf): where its tasks' time went, over time.
    const profileTitle = el('h3', {hidden: ''}, 'eBPF profile');
    const profile = el('canvas', {id: 'profile', hidden: ''});
    view.append(
        el('h2', {}, 'Job ' + id), summary, profileTitle, profile, el('h3', {}, 'Eventlog'), events,
        el('h3', {}, 'Output (tail)'), output, el('h3', {}, 'Resources (R)'), R);
    let profiled = true;
    const showProfile = async () => {
        if (!profiled)
            return;
        let p;
        try {
            p = await api(`jobs/${encodeURIComponent(id)}/profile`);
        } catch (e) {
            profiled = false;  // not profiled: nothing to plot
            return;
        }
        const samples = p.series.map(([t, s]) => ({t, 'on CPU': s.oncpu, 'run queue': s.runq, 'futex': s.futex_wait,
                                                   'file I/O': s.file_time}));
        profileTitle.hidden = profile.hidden = false;
        plot(profile, samples, [['on CPU', '#1b6ec2'], ['run queue', '#a06000'], ['futex', '#b42318'],
                                ['file I/O', '#2d6a4f']], 'Seconds, all tasks', '(since the job started)');
        profile.dataset.samples = samples.length;
    };
    // Output is read on from `next` until the job is done and all read.
    let next = 0, text = '', done = false;
    const info = async () => {
        const r = await api('jobs/' + encodeURIComponent(id));
        const j = r.job;
        summary.textContent = `${j.name}  ${j.state}${j.result ? ' (' + j.result + ')' : ''}  user ${j.user}  ` +
            `${j.ntasks} tasks on ${j.nnodes || '?'} nodes ${j.nodelist ?? ''}`;
        summary.dataset.state = j.state;
        R.textContent = r.R ? JSON.stringify(r.R, null, 1) : '(not allocated)';
    };
    refresh(async () => {
        try {
            await info();
            await showProfile();
            while (!done) {
                const o = await api(`jobs/${encodeURIComponent(id)}/output?from=${next}`);
                for (const c of o.output)
                    text += c.data;
                if (text.length > 20000)
                    text = text.slice(-20000);
                output.textContent = text;
                next = o.next;
                done = o.done;
                if (o.output.length === 0)
                    break;
            }
        } catch (e) {
            fail(e);
        }
    }, 2000);
    stream = new EventSource(
        `/api/v1/jobs/${encodeURIComponent(id)}/eventlog?follow=1&access_token=` + encodeURIComponent(token()));
    stream.addEventListener('job', (m) => {
        const ev = JSON.parse(m.data);
        events.textContent += `${when(ev.timestamp)} ${ev.name} ${JSON.stringify(ev.context)}\n`;
    });
    stream.addEventListener('end', () => {
        stream.close();
        info().catch(fail);
    });
}

// Nodes as a grid: state by colour, load by the bar, drain reasons shown.
function showNodes() {
    const grid = el('div', {class: 'grid', id: 'nodes'});
    view.append(grid);
    refresh(async () => {
        try {
            const r = await api('resources');
            grid.replaceChildren(...r.nodes.map(
                (n) =>
                    el('div', {
                        class: 'node ' + n.state,
                        'data-host': n.hostname,
                        'data-state': n.state,
                        title: `rank ${n.rank} ${n.properties.join(',')}`,
                    },
                       el('div', {class: 'host'}, n.hostname), el('div', {}, n.state),
                       el('div', {},
                          `${n.cores_used}/${n.cores} cores` + (n.gpus ? `, ${n.gpus_used}/${n.gpus} GPUs` : '')),
                       el('div', {class: 'bar'},
                          el('div', {style: `width:${n.cores ? 100 * n.cores_used / n.cores : 0}%`})),
                       n.reason ? el('div', {class: 'reason'}, n.reason) : '')));
            statusLine.textContent = `${r.nodes.length} nodes · ${new Date().toLocaleTimeString()}`;
        } catch (e) {
            fail(e);
        }
    }, 3000);
}

// The broker tree: rank r's parent is (r - 1) / fanout.
function showTree() {
    const holder = el('div', {id: 'tree'});
    view.append(holder);
    refresh(async () => {
        try {
            const o = await api('overlay');
            const sets = {};
            for (const s of ['online', 'torpid', 'lost', 'offline'])
                sets[s] = expand(o[s] || '');
            const stateOf = (r) => Object.keys(sets).find((s) => sets[s].has(r)) || 'unknown';
            const fanout = o.fanout || 2;
            const node = (r) => {
                const kids = [];
                for (let c = r * fanout + 1; c <= r * fanout + fanout && c < o.size; c++)
                    kids.push(node(c));
                return el(
                    'li', {'data-rank': r, class: 'rank-' + stateOf(r)}, `rank ${r} · ${stateOf(r)}`,
                    kids.length ? el('ul', {}, ...kids) : '');
            };
            holder.replaceChildren(el('ul', {class: 'tree'}, node(0)));
            statusLine.textContent = `${o.size} brokers, fanout ${fanout}`;
        } catch (e) {
            fail(e);
        }
    }, 3000);
}

// "0-3,7" -> Set {0,1,2,3,7}
function expand(ids) {
    const out = new Set();
    for (const part of ids.replace(/[\[\]]/g, '').split(',').filter(Boolean)) {
        const [a, b] = part.split('-').map(Number);
        for (let i = a; i <= (b ?? a); i++)
            out.add(i);
    }
    return out;
}

function plot(canvas, samples, series, title, footer = '(last hour, every 10 s)') {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth * dpr, h = canvas.clientHeight * dpr;
    canvas.width = w;
    canvas.height = h;
    const g = canvas.getContext('2d');
    g.scale(dpr, dpr);
    const W = canvas.clientWidth, H = canvas.clientHeight, pad = 28;
    const max = Math.max(1, ...samples.flatMap((s) => series.map(([key]) => s[key])));
    g.fillStyle = '#1d2330';
    g.font = '12px sans-serif';
    g.fillText(`${title} (max ${max})`, pad, 14);
    const t0 = samples.length ? samples[0].t : 0, t1 = samples.length ? samples[samples.length - 1].t : 1;
    for (const [key, colour] of series) {
        g.strokeStyle = colour;
        g.lineWidth = 2;
        g.beginPath();
        samples.forEach((s, i) => {
            const x = pad + (W - 2 * pad) * (t1 > t0 ? (s.t - t0) / (t1 - t0) : 0);
            const y = H - pad - (H - 2 * pad) * s[key] / max;
            i ? g.lineTo(x, y) : g.moveTo(x, y);
        });
        g.stroke();
    }
    g.fillStyle = '#667085';
    g.fillText(series.map(([k]) => k).join(' · ') + '  ' + footer, pad, H - 8);
}

function showPlots() {
    const depth = el('canvas', {id: 'depth'}), rate = el('canvas', {id: 'throughput'});
    view.append(depth, rate);
    refresh(async () => {
        try {
            const h = await api('activity');
            const perSecond = h.samples.map((s) => ({...s, 'jobs/s': s.completed / h.period}));
            plot(depth, h.samples, [['pending', '#a06000'], ['running', '#1b6ec2']], 'Queue depth');
            plot(rate, perSecond, [['jobs/s', '#2d6a4f']], 'Throughput');
            depth.dataset.samples = h.samples.length;
            statusLine.textContent = `${h.samples.length} samples`;
        } catch (e) {
            fail(e);
        }
    }, 10000);
}

function route() {
    token();
    clearInterval(timer);
    if (stream)
        stream.close();
    stream = null;
    view.replaceChildren();
    const hash = location.hash.slice(1) || 'queue';
    for (const a of document.querySelectorAll('nav a'))
        a.classList.toggle('current', a.hash === '#' + hash.split('/')[0]);
    if (hash.startsWith('job/'))
        return showJob(decodeURIComponent(hash.slice(4)));
    ({nodes: showNodes, tree: showTree, plots: showPlots}[hash] || showQueue)();
}

window.addEventListener('hashchange', route);
route();
