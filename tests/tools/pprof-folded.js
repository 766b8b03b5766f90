// Read a gzip-compressed pprof profile with the pprof-format package and print its samples
// as folded stacks ("root;...;leaf value", sorted, equal stacks added), so a test can
// compare them with tracekit's own folded output (a frame is its location's function, the
// one its inlined lines were inlined into). Exits 1 on any inconsistency.
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const path = require('path');
const { Profile } = require(path.join(__dirname, 'node_modules', 'pprof-format'));

const raw = fs.readFileSync(process.argv[2]);
if (raw[0] !== 0x1f || raw[1] !== 0x8b) {
	console.error('not gzip-compressed');
	process.exit(1);
}
const prof = Profile.decode(zlib.gunzipSync(raw));
const strings = prof.stringTable.strings;
if (strings[0] !== '') {
	console.error('string_table[0] is not empty');
	process.exit(1);
}
const fail = (msg) => { console.error(msg); process.exit(1); };
const funcs = new Map(prof.function.map((f) => [Number(f.id), f]));
const locs = new Map(prof.location.map((l) => [Number(l.id), l]));
if (prof.sampleType.length !== 1)
	fail('expected one sample type');
const st = prof.sampleType[0];
console.log(`# ${strings[Number(st.type)]} ${strings[Number(st.unit)]}`);
const out = new Map();
for (const s of prof.sample) {
	const names = s.locationId.map((id) => {
		const l = locs.get(Number(id));
		if (!l || !l.line.length)
			fail(`bad location ${id}`);
		// the frame's function: the last line entry (those before it were inlined into it)
		const f = funcs.get(Number(l.line[l.line.length - 1].functionId));
		if (!f)
			fail(`bad function of location ${id}`);
		return strings[Number(f.name)];
	});
	const key = names.reverse().join(';');
	out.set(key, (out.get(key) || 0n) + BigInt(s.value[0]));
}
for (const k of [...out.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)))
	console.log(`${k} ${out.get(k)}`);
