/** A free port below the kernel's ephemeral range, for a server another process binds later (ports.js). */
export function serverPort(options?: { alsoFree?: number[]; taken?: number[] }): Promise<number>;
