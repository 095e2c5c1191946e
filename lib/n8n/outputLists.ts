import type { INodeExecutionData } from 'n8n-workflow';

/**
 * A node's outputs for a batch of `capacity` items, each item on at most one output. An array of
 * 10,000 items built by push is allocated about three times over (each growth copies it): here
 * an output's array is made once, at the batch's size, when its first item arrives, and cut to
 * what it holds by done(). For 10,000 items that is 80 KB an output instead of about 480.
 */
export class OutputLists {
	private readonly lists: INodeExecutionData[][];
	private readonly counts: number[];

	constructor(
		outputs: number,
		private readonly capacity: number,
	) {
		this.lists = Array.from({ length: outputs }, () => []);
		this.counts = new Array<number>(outputs).fill(0);
	}

	add(output: number, item: INodeExecutionData): void {
		const at = this.counts[output]++;
		if (at === 0) this.lists[output] = new Array<INodeExecutionData>(this.capacity);
		this.lists[output][at] = item;
	}

	/** The outputs, each as long as what it holds. */
	done(): INodeExecutionData[][] {
		for (let k = 0; k < this.lists.length; k++) this.lists[k].length = this.counts[k];
		return this.lists;
	}
}
