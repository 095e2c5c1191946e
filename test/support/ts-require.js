// Lets a plain Node process `require` the TypeScript sources directly (no build, no ts-node):
// every .ts file outside node_modules is transpiled on load with typescript.transpileModule.
// Type errors are not reported here; `tsc --noEmit` covers them.
// Usage: require('<repo>/test/support/ts-require') before requiring a .ts module.
const fs = require('fs');
const ts = require('typescript');

if (!require.extensions['.ts']) {
	require.extensions['.ts'] = function (module, filename) {
		if (filename.includes(`${require('path').sep}node_modules${require('path').sep}`)) {
			throw new Error(`ts-require: will not transpile a dependency: ${filename}`);
		}
		const { outputText } = ts.transpileModule(fs.readFileSync(filename, 'utf8'), {
			fileName: filename,
			compilerOptions: {
				module: ts.ModuleKind.CommonJS,
				target: ts.ScriptTarget.ES2021,
				esModuleInterop: true,
				sourceMap: false,
				inlineSourceMap: true,
			},
		});
		module._compile(outputText, filename);
	};
}
