// Lets a plain Node process `require` the TypeScript sources directly (no build, no ts-node):
// every .ts file outside node_modules is transpiled on load with typescript.transpileModule.
// Output is cached in the temp directory by content hash, so a warm start does not even load
// the compiler. Type errors are not reported here; `tsc --noEmit` covers them.
// Usage: require('<repo>/test/support/ts-require') before requiring a .ts module.
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');

const CACHE = path.join(os.tmpdir(), 'idem-ts-require-cache');
const NODE_MODULES = `${path.sep}node_modules${path.sep}`;
let ts = null;

function transpile(source, filename) {
	ts ??= require('typescript');
	return ts.transpileModule(source, {
		fileName: filename,
		compilerOptions: {
			module: ts.ModuleKind.CommonJS,
			target: ts.ScriptTarget.ES2021,
			esModuleInterop: true,
			inlineSourceMap: true,
		},
	}).outputText;
}

if (!require.extensions['.ts']) {
	require.extensions['.ts'] = function (module, filename) {
		if (filename.includes(NODE_MODULES)) throw new Error(`ts-require: will not transpile a dependency: ${filename}`);
		const source = fs.readFileSync(filename, 'utf8');
		const hash = crypto.createHash('sha1').update(`v1\0${filename}\0${source}`).digest('hex');
		const cached = path.join(CACHE, `${hash}.js`);
		let output;
		try {
			output = fs.readFileSync(cached, 'utf8');
		} catch {
			output = transpile(source, filename);
			try {
				fs.mkdirSync(CACHE, { recursive: true });
				const tmp = `${cached}.${process.pid}.tmp`;
				fs.writeFileSync(tmp, output);
				fs.renameSync(tmp, cached);
			} catch {
				// A cache that cannot be written only costs time.
			}
		}
		module._compile(output, filename);
	};
}
