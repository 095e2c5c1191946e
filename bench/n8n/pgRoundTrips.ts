/**
 * A TCP proxy in front of PostgreSQL that counts round trips: every client message that makes
 * the server answer and wait for the next command, i.e. a simple Query ('Q') or an extended-
 * protocol Sync ('S'). node-postgres sends Parse/Bind/Execute/Sync in one write for a
 * parameterised query, so one statement is one round trip.
 */
import * as net from 'net';

export interface RoundTripCounter {
	port: number;
	/** Round trips since the proxy started. */
	readonly count: number;
	close(): Promise<void>;
}

export async function countingPostgresProxy(target = { host: '127.0.0.1', port: 5432 }): Promise<RoundTripCounter> {
	let count = 0;
	const sockets = new Set<net.Socket>();
	const server = net.createServer((client) => {
		const upstream = net.connect(target.port, target.host);
		sockets.add(client).add(upstream);
		let buffered = Buffer.alloc(0);
		let started = false; // the startup (and SSL request) messages have no type byte
		client.on('data', (chunk: Buffer) => {
			buffered = Buffer.concat([buffered, chunk]);
			for (;;) {
				if (!started) {
					if (buffered.length < 8) break;
					const length = buffered.readInt32BE(0);
					if (buffered.length < length) break;
					const code = buffered.readInt32BE(4);
					buffered = buffered.subarray(length);
					if (code !== 80877103 && code !== 80877104) started = true; // not SSLRequest / GSSENCRequest
					continue;
				}
				if (buffered.length < 5) break;
				const length = buffered.readInt32BE(1);
				if (buffered.length < length + 1) break;
				const type = String.fromCharCode(buffered[0]);
				if (type === 'Q' || type === 'S') count++;
				buffered = buffered.subarray(length + 1);
			}
			upstream.write(chunk);
		});
		upstream.on('data', (chunk) => client.write(chunk));
		const end = () => {
			client.destroy();
			upstream.destroy();
			sockets.delete(client);
			sockets.delete(upstream);
		};
		client.on('close', end).on('error', end);
		upstream.on('close', end).on('error', end);
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
	return {
		port: (server.address() as net.AddressInfo).port,
		get count() {
			return count;
		},
		close: () =>
			new Promise<void>((resolve) => {
				for (const s of sockets) s.destroy();
				server.close(() => resolve());
			}),
	};
}
