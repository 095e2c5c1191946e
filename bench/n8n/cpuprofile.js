#!/usr/bin/env node
/**
 * Summarise a V8 .cpuprofile written by `node --cpu-prof` (e.g. an `n8n execute` run, see
 * BENCH_PARTS=profile in headToHead.ts): self time by function and by area (this package's
 * dist/, n8n-core, n8n-workflow, n8n-nodes-base, vm2, Node internals, GC, ...).
 *
 *   node bench/n8n/cpuprofile.js <file.cpuprofile> [--window=<regex>] [--top=30]
 *
 * --window restricts the summary to the samples between the first and the last sample whose
 * stack has a frame whose URL matches the regex (default: this package's dist/nodes/DedupeGate
 * or n8n-nodes-base's RemoveDuplicates), so process start-up and shutdown stay out.
 */
const fs = require('fs');

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--'));
const opt = (name, def) => (args.find((a) => a.startsWith(`--${name}=`)) ?? `--${name}=${def}`).split('=').slice(1).join('=');
const windowRe = new RegExp(opt('window', '^(executeDedupeGate|execute)@.*(/dist/nodes/DedupeGate/|RemoveDuplicates)'));
const oursRe = /node_modules\/n8n-nodes-idempotency\/dist\//;
const top = Number(opt('top', 30));
const profile = JSON.parse(fs.readFileSync(file, 'utf8'));

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

function area(url, fn) {
	if (fn === '(garbage collector)') return 'GC';
	if (fn === '(program)' || fn === '(idle)' || fn === '(root)') return fn;
	if (oursRe.test(url)) return 'ours (n8n-nodes-idempotency dist/)';
	if (/vm2/.test(url)) return 'vm2';
	if (/n8n-core/.test(url)) return 'n8n-core';
	if (/n8n-workflow/.test(url)) return 'n8n-workflow';
	if (/n8n-nodes-base/.test(url)) return 'n8n-nodes-base';
	if (/@n8n\/task-runner/.test(url)) return '@n8n/task-runner';
	if (/node_modules\/(pg|pg-protocol|pg-pool)\//.test(url)) return 'pg';
	if (/node_modules\/n8n\/dist/.test(url)) return 'n8n (cli)';
	if (/node_modules\/(typeorm|sqlite3|@sentry)/.test(url)) return url.match(/node_modules\/(@?[^/]+)/)[1];
	if (url.startsWith('node:') || url === '') return 'node internals / native';
	const m = url.match(/.*node_modules\/(@[^/]+\/[^/]+|[^/]+)/);
	return m ? m[1] : url;
}

// Which node ids have a frame of this package's dist/ on their stack
const underOurs = new Map();
function stackUnderOurs(id) {
	if (underOurs.has(id)) return underOurs.get(id);
	const r = oursRe.test(byId.get(id).callFrame.url) || (parent.has(id) && stackUnderOurs(parent.get(id)));
	underOurs.set(id, r);
	return r;
}

// Which node ids are "in window" stacks
const matches = new Map();
function stackMatches(id) {
	if (matches.has(id)) return matches.get(id);
	const n = byId.get(id);
	const r = windowRe.test(`${n.callFrame.functionName}@${n.callFrame.url}`) || (parent.has(id) && stackMatches(parent.get(id)));
	matches.set(id, r);
	return r;
}

const { samples, timeDeltas } = profile;
const times = [];
let t = profile.startTime;
for (let i = 0; i < samples.length; i++) {
	t += timeDeltas[i];
	times.push(t);
}
let first = -1;
let last = -1;
for (let i = 0; i < samples.length; i++)
	if (stackMatches(samples[i])) {
		if (first < 0) first = i;
		last = i;
	}
const all = args.includes('--all') || first < 0;
const [from, to] = all ? [0, samples.length - 1] : [first, last];

const selfByFn = new Map();
const selfByArea = new Map();
const underOursByArea = new Map();
let underOursTotal = 0;
let total = 0;
for (let i = from; i <= to; i++) {
	const dt = (times[i + 1] ?? times[i]) - times[i];
	const n = byId.get(samples[i]);
	const { functionName, url, lineNumber } = n.callFrame;
	const fn = functionName || '(anonymous)';
	const short = url.replace(/^.*node_modules\//, '').replace(/^file:\/\//, '');
	const key = `${fn}  ${short}:${lineNumber + 1}`;
	selfByFn.set(key, (selfByFn.get(key) ?? 0) + dt);
	const a = area(url, fn);
	selfByArea.set(a, (selfByArea.get(a) ?? 0) + dt);
	total += dt;
	if (stackUnderOurs(samples[i])) {
		underOursByArea.set(a, (underOursByArea.get(a) ?? 0) + dt);
		underOursTotal += dt;
	}
}
const ms = (us) => (us / 1000).toFixed(1);
console.log(`${file}\nwindow: ${all ? 'whole profile' : `first to last sample under /${windowRe.source}/`}: ${ms(total)} ms, ${to - from + 1} samples\n`);
console.log('self time by area:');
for (const [a, us] of [...selfByArea].sort((x, y) => y[1] - x[1])) console.log(`  ${ms(us).padStart(8)} ms ${((100 * us) / total).toFixed(1).padStart(5)}%  ${a}`);
console.log(`\nsamples with a frame of this package's dist/ on the stack: ${ms(underOursTotal)} ms, by the area of the self frame:`);
for (const [a, us] of [...underOursByArea].sort((x, y) => y[1] - x[1])) console.log(`  ${ms(us).padStart(8)} ms  ${a}`);
console.log(`\ntop ${top} functions by self time:`);
for (const [k, us] of [...selfByFn].sort((x, y) => y[1] - x[1]).slice(0, top)) console.log(`  ${ms(us).padStart(8)} ms ${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`);
