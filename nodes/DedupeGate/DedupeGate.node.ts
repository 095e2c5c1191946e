import type { IExecuteFunctions, INodeExecutionData, INodeType, INodeTypeDescription } from 'n8n-workflow';

import { credentialTest } from '../../lib/n8n/ledgerAccess';
import { description } from './description';
import { executeDedupeGate } from './execute';

export class DedupeGate implements INodeType {
	description: INodeTypeDescription = description;

	methods = { credentialTest };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeDedupeGate.call(this);
	}
}
