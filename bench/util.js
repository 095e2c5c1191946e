const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const percentile = (xs, p) => {
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const time = async (fn) => {
	const t0 = process.hrtime.bigint();
	await fn();
	return Number(process.hrtime.bigint() - t0) / 1e6;
};
module.exports = { median, percentile, time };
