const path = require('path');
const { task, src, dest } = require('gulp');

// n8n loads node and credential icons from dist/, next to the compiled .js files.
task('build:icons', () =>
	src(['nodes/**/*.{png,svg}', 'credentials/**/*.{png,svg}', 'nodes/**/*.node.json'], {
		base: '.',
		encoding: false,
	}).pipe(dest(path.resolve('dist'))),
);
