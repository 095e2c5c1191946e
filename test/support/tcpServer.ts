import { createServer, type AddressInfo, type Server, type Socket } from 'net';

/** A local TCP server that does `onSocket` with every connection it accepts. */
export async function tcpServer(onSocket: (socket: Socket) => void): Promise<{ port: number; close: () => Promise<void> }> {
	const sockets = new Set<Socket>();
	const server: Server = createServer((socket) => {
		sockets.add(socket);
		socket.on('error', () => undefined);
		onSocket(socket);
	});
	await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
	return {
		port: (server.address() as AddressInfo).port,
		close: async () => {
			for (const s of sockets) s.destroy();
			await new Promise((resolve) => server.close(resolve));
		},
	};
}
