// The live view of a testnet: the server's events (GET /events) keep `state` current, and
// every change schedules one redraw on the next animation frame. The page computes the
// selected stream's tree from the nodes' records (each names its parent), so the drawing
// and the tables always agree with what the nodes themselves say.
"use strict";

const state = {
  nodes: new Map(),      // index -> {node, alive, location, peers, streams: {key: {state, parent, children}}}
  highs: new Map(),      // index -> {key: highest packet number}
  streams: new Map(),    // key -> {key, location, name}
  rates: {},             // key -> packets per second
  selected: "",          // the stream key drawn
  picked: null,          // the node index picked by a click
  dirty: false,
  topology: 0,           // bumped by every change the ring shows (packet numbers are not)
};

// What a test or a person measuring can read: time to the first drawing of a snapshot, and
// how long the last drawings took.
const overlayView = (window.overlayView = {
  firstPaintMs: null, drawMs: [], events: 0, snapshots: 0, tree: null,
});

// The token comes in the link `overlay testnet web` printed. It is kept for this tab only
// and taken out of the address bar, so that it is not left in the history or a bookmark.
const token = (() => {
  const given = new URLSearchParams(location.hash.slice(1)).get("token");
  if (given) {
    sessionStorage.setItem("overlay-token", given);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("overlay-token") || "";
})();
const $ = (id) => document.getElementById(id);

// --- events from the server ------------------------------------------------------------

function connect() {
  const source = new EventSource("/events");
  source.onopen = () => setConnection("live");
  source.onerror = () => setConnection("lost");  // the browser reconnects by itself
  source.onmessage = (message) => {
    for (const event of JSON.parse(message.data)) apply(event);
    schedule();
  };
}

function setConnection(text) {
  const el = $("connection");
  el.dataset.state = text;
  el.textContent = text;
}

function apply(event) {
  overlayView.events += 1;
  if (event.type !== "highs" && event.type !== "rates" && event.type !== "log") state.topology += 1;
  switch (event.type) {
    case "snapshot":
      overlayView.snapshots += 1;
      state.nodes.clear();
      for (const record of event.nodes) state.nodes.set(record.node, record);
      state.highs.clear();
      for (const [index, highs] of Object.entries(event.highs)) state.highs.set(Number(index), highs);
      state.streams.clear();
      for (const stream of event.streams) state.streams.set(stream.key, stream);
      $("events").replaceChildren();
      for (const line of event.log) logLine(line);
      if (event.one_node) {
        $("controls").hidden = true;
        $("read-only").hidden = false;
        $("read-only").textContent = `A read-only view of the node at ${event.one_node} (node 0) ` +
          "and its peers, numbered as first seen; each stream's tree as far as that node sees it.";
        $("error").textContent = "";
      }
      break;
    case "node": {
      state.nodes.set(event.node, event);
      const highs = state.highs.get(event.node);
      if (highs) for (const key of Object.keys(highs)) if (!(key in event.streams)) delete highs[key];
      break;
    }
    case "highs":
      for (const [index, highs] of Object.entries(event.highs)) {
        const i = Number(index);
        state.highs.set(i, Object.assign(state.highs.get(i) || {}, highs));
      }
      break;
    case "stream":
      if (event.gone) {
        state.streams.delete(event.key);
        if (state.selected === event.key) state.selected = "";
      } else {
        state.streams.set(event.key, event);
      }
      break;
    case "rates":
      state.rates = event.rates;
      break;
    case "log":
      logLine(event);
      break;
  }
}

function logLine(event) {
  const list = $("events");
  const item = document.createElement("li");
  item.dataset.kind = event.kind;
  if (event.stream) item.dataset.stream = event.stream;
  item.textContent = event.text;
  list.prepend(item);
  while (list.children.length > 200) list.lastChild.remove();
}

function schedule() {
  if (!state.dirty) {
    state.dirty = true;
    requestAnimationFrame(draw);
  }
}

// --- the selected stream's tree ---------------------------------------------------------

function treeOf(key) {
  const members = new Map();
  for (const [index, record] of state.nodes) {
    const stream = record.alive && record.streams[key];
    if (stream) members.set(index, stream);
  }
  const roots = [...members].filter(([, s]) => s.state === "root").map(([i]) => i).sort((a, b) => a - b);
  const children = new Map();
  for (const [index, s] of members) {
    if (s.state !== "root" && s.parent !== null && members.has(s.parent)) {
      if (!children.has(s.parent)) children.set(s.parent, []);
      children.get(s.parent).push(index);
    }
  }
  const depth = new Map();
  const order = [];  // breadth first from the roots
  const walk = (tops) => {
    const from = order.length;
    for (const top of tops) { depth.set(top, 0); order.push(top); }
    for (let k = from; k < order.length; k++) {
      for (const child of (children.get(order[k]) || []).sort((a, b) => a - b)) {
        if (!depth.has(child)) { depth.set(child, depth.get(order[k]) + 1); order.push(child); }
      }
    }
  };
  walk(roots);
  const detached = [...members.keys()].filter((i) => !depth.has(i)).sort((a, b) => a - b);
  const isDetached = new Set(detached);
  // Members no root reaches (a subtree whose root died, or, in a view of one node, its
  // parent) are drawn from their own tops, below the rooted tree.
  const rooted = order.length;
  walk(detached.filter((i) => !members.has(members.get(i).parent)));
  const detachedAt = rooted;
  // The stream's head: the highest number any member holds. Workers report a quarter second
  // apart, so a member may be seen ahead of its root; its lag is then 0, not negative.
  let head = -1;
  for (const index of members.keys()) head = Math.max(head, highOf(index, key));
  const position = new Map(order.map((index, k) => [index, k]));
  return { key, members, roots, children, depth, order, position, detached, isDetached, detachedAt, head };
}

function highOf(index, key) {
  const highs = state.highs.get(index);
  return highs && highs[key] !== undefined ? highs[key] : -1;
}

// --- drawing ----------------------------------------------------------------------------

const COLORS = { node: "#8792a2", member: "#2f6fde", root: "#d63a2f", dead: "#d5d9df", tick: "#e39b16" };

function draw() {
  state.dirty = false;
  const start = performance.now();
  refreshStreams();
  const tree = state.selected ? treeOf(state.selected) : null;
  overlayView.tree = tree && {
    roots: tree.roots, members: tree.members.size, detached: tree.detached, depth: maxDepth(tree),
  };
  // The ring (up to 4,000 chords) is drawn again only when what it shows changed: a batch
  // of packet numbers alone redraws the tree and the tables.
  const ring = `${state.topology}/${state.selected}/${state.picked}/${$("ring").clientWidth}`;
  if (ring !== drawnRing) {
    drawRing(tree);
    drawnRing = ring;
  }
  drawTree(tree);
  refreshStats(tree);
  const took = performance.now() - start;
  overlayView.drawMs.push(took);
  if (overlayView.drawMs.length > 100) overlayView.drawMs.shift();
  if (overlayView.firstPaintMs === null && state.nodes.size) overlayView.firstPaintMs = performance.now();
}

function maxDepth(tree) {  // of the rooted tree
  let d = 0;
  for (const index of tree.order.slice(0, tree.detachedAt)) d = Math.max(d, tree.depth.get(index));
  return d;
}

function fitCanvas(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || canvas.width;
  const height = Math.round(width * (canvas.height / canvas.width));
  if (canvas.width !== Math.round(width * ratio)) {
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(canvas.width / width, 0, 0, canvas.width / width, 0, 0);
  return { ctx, width, height: canvas.height * width / canvas.width };
}

function ringPoint(location, cx, cy, r) {
  const angle = location * 2 * Math.PI - Math.PI / 2;  // location 0 at the top, clockwise
  return [cx + r * Math.cos(angle), cy + r * Math.sin(angle)];
}

let ringGeometry = null;
let drawnRing = "";

function drawRing(tree) {
  const { ctx, width, height } = fitCanvas($("ring"));
  const cx = width / 2, cy = height / 2, r = Math.min(width, height) / 2 - 18;
  ringGeometry = { cx, cy, r };
  ctx.clearRect(0, 0, width, height);
  ctx.strokeStyle = "#c9d0d9";
  ctx.lineWidth = 1;
  ctx.beginPath(); ctx.arc(cx, cy, r, 0, 2 * Math.PI); ctx.stroke();
  const points = new Map();
  for (const [index, record] of state.nodes) points.set(index, ringPoint(record.location, cx, cy, r));

  // Links as chords, thinned to about 4,000 so that 1,000 nodes stay readable and fast.
  let links = 0;
  for (const record of state.nodes.values()) links += record.peers.length;
  const step = Math.max(1, Math.ceil(links / 2 / 4000));
  ctx.strokeStyle = "rgba(60, 72, 90, 0.07)";
  ctx.beginPath();
  let k = 0;
  for (const [index, record] of state.nodes) {
    const a = points.get(index);
    for (const peer of record.peers) {
      if (peer <= index || (k++ % step) !== 0) continue;
      const b = points.get(peer);
      if (!b) continue;
      ctx.moveTo(a[0], a[1]); ctx.lineTo(b[0], b[1]);
    }
  }
  ctx.stroke();

  if (tree) {
    const stream = state.streams.get(tree.key);
    if (stream) {
      const [x0, y0] = ringPoint(stream.location, cx, cy, r - 12);
      const [x1, y1] = ringPoint(stream.location, cx, cy, r + 12);
      ctx.strokeStyle = COLORS.tick; ctx.lineWidth = 3;
      ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); ctx.stroke();
    }
    ctx.strokeStyle = "rgba(47, 111, 222, 0.75)"; ctx.lineWidth = 1.4;
    ctx.beginPath();
    for (const [parent, kids] of tree.children) {
      const a = points.get(parent);
      for (const child of kids) {
        const b = points.get(child);
        ctx.moveTo(a[0], a[1]); ctx.lineTo(b[0], b[1]);
      }
    }
    ctx.stroke();
  }

  const size = state.nodes.size > 300 ? 2.2 : state.nodes.size > 60 ? 3.2 : 5;
  const layers = [[], [], [], []];  // dead, plain, member, root: drawn in that order
  for (const [index, record] of state.nodes) {
    let layer = record.alive ? 1 : 0;
    if (tree && tree.members.has(index)) layer = tree.roots.includes(index) ? 3 : 2;
    layers[layer].push(index);
  }
  const fills = [COLORS.dead, COLORS.node, COLORS.member, COLORS.root];
  layers.forEach((indices, layer) => {
    ctx.fillStyle = fills[layer];
    ctx.beginPath();
    const s = layer === 3 ? size * 2.2 : layer === 2 ? size * 1.3 : layer === 0 ? size * 1.3 : size;
    for (const index of indices) {
      const [x, y] = points.get(index);
      ctx.moveTo(x + s, y); ctx.arc(x, y, s, 0, 2 * Math.PI);
    }
    ctx.fill();
    if (layer === 0) {  // a dead node: greyed, with a dark rim so that it is found
      ctx.strokeStyle = "#5a6472"; ctx.lineWidth = 1; ctx.stroke();
    }
  });
  if (state.nodes.size <= 60) {  // few enough to name each
    ctx.fillStyle = "#5a6472";
    ctx.font = "10px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (const [index, record] of state.nodes) {
      const [x, y] = ringPoint(record.location, cx, cy, r + 11);
      ctx.fillText(String(index), x, y);
    }
    ctx.textAlign = "start";
    ctx.textBaseline = "alphabetic";
  }
  if (state.picked !== null && points.has(state.picked)) {
    const [x, y] = points.get(state.picked);
    ctx.strokeStyle = "#1d2430"; ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.arc(x, y, size * 2.8, 0, 2 * Math.PI); ctx.stroke();
  }
}

function drawTree(tree) {
  const { ctx, width, height } = fitCanvas($("tree"));
  ctx.clearRect(0, 0, width, height);
  const rows = $("members").tBodies[0];
  if (!tree || !tree.members.size) {
    rows.replaceChildren();
    ctx.fillStyle = "#8792a2";
    ctx.fillText(tree ? "no node carries this stream now" : "no stream picked", 12, 20);
    return;
  }
  // A tidy tree: rows by depth, each leaf a column of its own, each parent centred over its
  // children, so a subtree sits under its parent. Detached subtrees follow, below the
  // rooted tree; members in a parent cycle (no top) take a last row.
  const rootedDepth = tree.detachedAt ? maxDepth(tree) + 1 : 0;
  const rowOf = new Map();
  tree.order.forEach((index, k) => rowOf.set(index, tree.depth.get(index) + (k >= tree.detachedAt ? rootedDepth : 0)));
  let depthRows = 0;
  for (const r of rowOf.values()) depthRows = Math.max(depthRows, r + 1);
  const unplaced = tree.detached.filter((i) => !tree.depth.has(i));
  const column = new Map();
  let leaves = 0;
  const place = (index) => {  // iterative post-order: deep trees must not overflow the stack
    const stack = [[index, false]];
    while (stack.length) {
      const [node, done] = stack.pop();
      const kids = (tree.children.get(node) || []).filter((c) => rowOf.get(c) === rowOf.get(node) + 1);
      if (!kids.length) { column.set(node, leaves++); continue; }
      if (done) {
        column.set(node, (column.get(kids[0]) + column.get(kids[kids.length - 1])) / 2);
        continue;
      }
      stack.push([node, true]);
      for (let k = kids.length - 1; k >= 0; k--) stack.push([kids[k], false]);
    }
  };
  tree.order.forEach((index) => { if (tree.depth.get(index) === 0) place(index); });
  unplaced.forEach((index) => { rowOf.set(index, depthRows); column.set(index, leaves++); });
  if (unplaced.length) depthRows += 1;
  const dy = (height - 24) / Math.max(1, depthRows - 1);
  const dx = width / (leaves + 1);
  const at = new Map();
  for (const [index, c] of column) at.set(index, [dx * (c + 1), 12 + rowOf.get(index) * dy]);
  ctx.strokeStyle = "rgba(47, 111, 222, 0.6)"; ctx.lineWidth = 1;
  ctx.beginPath();
  for (const [parent, kids] of tree.children) {
    const a = at.get(parent);
    if (!a) continue;
    for (const child of kids) {
      const b = at.get(child);
      if (b) { ctx.moveTo(a[0], a[1]); ctx.lineTo(b[0], b[1]); }
    }
  }
  ctx.stroke();
  const few = tree.members.size <= 40;
  ctx.font = "11px system-ui, sans-serif";
  for (const [index, [x, y]] of at) {
    const root = tree.roots.includes(index);
    const detached = tree.isDetached.has(index);
    ctx.fillStyle = root ? COLORS.root : detached ? "#aab1bb" : COLORS.member;
    ctx.beginPath(); ctx.arc(x, y, root ? 6 : few ? 4 : 2.5, 0, 2 * Math.PI); ctx.fill();
    if (few) { ctx.fillStyle = "#1d2430"; ctx.fillText(String(index), x + 6, y - 4); }
  }
  // The table: roots first, then by depth, the first 100 members.
  const shown = [...tree.order, ...tree.detached.filter((i) => !tree.depth.has(i))].slice(0, 100);
  rows.replaceChildren(...shown.map((index) => {
    const s = tree.members.get(index);
    const high = highOf(index, tree.key);
    const lag = tree.head >= 0 && high >= 0 ? tree.head - high : "";  // (head: the highest held)
    const row = document.createElement("tr");
    row.dataset.state = s.state;
    row.dataset.node = index;
    const rootedHere = tree.position.has(index) && tree.position.get(index) < tree.detachedAt;
    for (const value of [index, s.state, rootedHere && tree.depth.has(index) ? tree.depth.get(index) : "-",
                         s.children, high >= 0 ? high : "", lag]) {
      const cell = document.createElement("td");
      cell.textContent = value;
      row.append(cell);
    }
    return row;
  }));
}

function refreshStats(tree) {
  let alive = 0;
  for (const record of state.nodes.values()) if (record.alive) alive += 1;
  $("stat-nodes").textContent = state.nodes.size;
  $("stat-alive").textContent = alive;
  $("stat-dead").textContent = state.nodes.size - alive;
  $("stat-streams").textContent = state.streams.size;
  $("tree-members").textContent = tree ? tree.members.size : 0;
  $("tree-roots").textContent = tree ? tree.roots.length : 0;
  $("tree-root").textContent = tree && tree.roots.length ? tree.roots.join(", ") : "-";
  $("tree-depth").textContent = tree ? maxDepth(tree) : 0;
  $("tree-rate").textContent = tree ? (state.rates[tree.key] || 0) : 0;
  if (state.picked !== null) {
    const record = state.nodes.get(state.picked);
    if (record) {
      const carried = Object.keys(record.streams).length;
      $("picked").textContent = `node ${record.node}: ${record.alive ? "alive" : "dead"}, ` +
        `location ${record.location.toFixed(4)}, ${record.peers.length} peers, ${carried} streams`;
    }
  }
}

function streamLabel(stream) {
  return stream.name ? `${stream.name} (${stream.key.slice(0, 8)})` : stream.key.slice(0, 12);
}

function refreshStreams() {
  const select = $("stream-select");
  const keys = [...state.streams.keys()].sort();
  const have = [...select.options].map((o) => o.value).filter(Boolean);
  if (keys.join() !== have.join() || [...select.options].some((o) => o.value && o.textContent !== streamLabel(state.streams.get(o.value)))) {
    select.replaceChildren(...(keys.length ? [] : [new Option("(none yet)", "")]),
      ...keys.map((key) => new Option(streamLabel(state.streams.get(key)), key)));
  }
  if (!state.selected && keys.length) state.selected = keys[0];
  select.value = state.selected;
}

// --- controls -------------------------------------------------------------------------

async function act(action, body) {
  $("error").textContent = "";
  let answer;
  try {
    const response = await fetch(`/api/${action}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-overlay-token": token },
      body: JSON.stringify(body),
    });
    answer = await response.json();
  } catch (error) {
    answer = { ok: false, error: `the web view did not answer: ${error}` };
  }
  if (!answer.ok) {
    $("error").textContent = answer.error;
    return null;
  }
  $("command").textContent = answer.command || "";
  return answer;
}

function streamName() { return $("stream-name").value.trim(); }

function pickedNode() {
  const text = $("node-input").value;
  return text === "" ? null : Number(text);
}

function selectByName(name) {
  for (const [key, stream] of state.streams) if (stream.name === name) state.selected = key;
  schedule();
}

$("subscribe").onclick = async () => {
  const name = streamName();
  if (await act("subscribe", { stream: name, count: Number($("subscribe-count").value) })) selectByName(name);
};
$("publish").onclick = async () => {
  const name = streamName();
  if (await act("publish", { stream: name, rate: Number($("publish-rate").value), count: 0 })) selectByName(name);
};
$("stop").onclick = () => act("stop", {});
$("kill").onclick = () => act("kill", { node: pickedNode() });
$("restart").onclick = () => act("restart", { node: pickedNode() });
$("kill-root").onclick = () => {
  const tree = state.selected ? treeOf(state.selected) : null;
  if (!tree || tree.roots.length === 0) {
    $("error").textContent = "the picked stream has no root to kill";
    return;
  }
  $("node-input").value = tree.roots[0];
  return act("kill", { node: tree.roots[0] });
};
$("stream-select").onchange = (event) => { state.selected = event.target.value; schedule(); };
$("ring").onclick = (event) => {
  if (!ringGeometry) return;
  const box = event.target.getBoundingClientRect();
  const x = event.clientX - box.left, y = event.clientY - box.top;
  let best = null, bestDistance = 10;
  for (const [index, record] of state.nodes) {
    const [px, py] = ringPoint(record.location, ringGeometry.cx, ringGeometry.cy, ringGeometry.r);
    const distance = Math.hypot(px - x, py - y);
    if (distance < bestDistance) { best = index; bestDistance = distance; }
  }
  if (best !== null) {
    state.picked = best;
    $("node-input").value = best;
    schedule();
  }
};
window.addEventListener("resize", schedule);

if (!token) $("error").textContent = "no token in this page's address: the controls will be refused (open the link `overlay testnet web` printed)";
connect();
