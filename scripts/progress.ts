/**
 * Progress of a long phase of `npm start` (scripts/start.ts): each line the work reports, with the
 * time since the start, and a "still at" line every `everyMs` in between, so a first start that
 * installs for minutes is never silent for more than that.
 */
export interface Progress {
	/** Reports a new phase (a line of the installer). */
	phase(line: string): void;
	/** Runs `work`, repeating the current phase every `everyMs` until it settles. */
	during<T>(work: () => Promise<T>): Promise<T>;
}

export function progressPrinter(say: (line: string) => void, everyMs = 30_000, started = Date.now()): Progress {
	let current = '';
	const elapsed = () => {
		const s = Math.round((Date.now() - started) / 1000);
		return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
	};
	return {
		phase(line) {
			current = line.replace(/ \(.*$/, '');
			say(`${elapsed()}  ${line}`);
		},
		async during(work) {
			const timer = setInterval(() => {
				if (current) say(`${elapsed()}  still at: ${current}`);
			}, everyMs);
			try {
				return await work();
			} finally {
				clearInterval(timer);
			}
		},
	};
}
