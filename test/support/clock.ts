/**
 * Runs `body` with this process's clock (Date.now and new Date()) moved by `skewMs`, as on an n8n
 * host whose clock is off, while the database (or Redis) keeps its own. Timers keep real time.
 */
export async function withHostClockSkew<T>(skewMs: number, body: () => Promise<T>): Promise<T> {
	const RealDate = Date;
	const realNow = RealDate.now.bind(RealDate);
	class SkewedDate extends RealDate {
		constructor(...args: unknown[]) {
			if (args.length === 0) super(realNow() + skewMs);
			else super(...(args as [number]));
		}
		static now() {
			return realNow() + skewMs;
		}
	}
	globalThis.Date = SkewedDate as DateConstructor;
	try {
		return await body();
	} finally {
		globalThis.Date = RealDate;
	}
}
