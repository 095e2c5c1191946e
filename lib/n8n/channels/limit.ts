/** Runs `fn` over `items` with at most `limit` calls in flight; resolves when all have settled. */
export async function forEachLimit<T>(items: T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
	let next = 0;
	const width = Math.max(1, Math.min(Math.floor(limit) || 1, items.length));
	const errors: unknown[] = [];
	const worker = async () => {
		while (next < items.length) {
			const index = next++;
			try {
				await fn(items[index], index);
			} catch (error) {
				errors.push(error);
			}
		}
	};
	await Promise.all(Array.from({ length: width }, worker));
	if (errors.length > 0) throw errors[0];
}
