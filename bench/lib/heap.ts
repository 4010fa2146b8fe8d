/**
 * @module Summarises a V8 `.heapsnapshot` (written by `node
 * --heapsnapshot-signal`): the live JS heap by what holds the bytes, with
 * plain objects that carry a protobuf-es `$typeName` grouped by message type,
 * as Markdown. The snapshot is taken after a full GC, so it counts live
 * objects only.
 */

/** The parts of a heap snapshot this reads. */
interface HeapSnapshot {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: readonly string[];
      readonly node_types: readonly [readonly string[], ...unknown[]];
      readonly edge_fields: readonly string[];
      readonly edge_types: readonly [readonly string[], ...unknown[]];
    };
  };
  readonly nodes: readonly number[];
  readonly edges: readonly number[];
  readonly strings: readonly string[];
}

/** Live bytes and objects of one group. */
export interface HeapGroup {
  readonly name: string;
  readonly bytes: number;
  readonly count: number;
}

/** Bytes per MiB. */
const BYTES_PER_MIB = 1024 * 1024;
/** Rows of the table. */
const TOP_GROUPS = 25;

/** Groups the nodes of a snapshot by type and constructor (or protobuf-es message type). */
export function summariseHeap(json: string): { total: number; groups: HeapGroup[] } {
  const snap = JSON.parse(json) as HeapSnapshot;
  const { meta } = snap.snapshot;
  const nf = meta.node_fields.length;
  const ef = meta.edge_fields.length;
  const typeField = meta.node_fields.indexOf('type');
  const nameField = meta.node_fields.indexOf('name');
  const sizeField = meta.node_fields.indexOf('self_size');
  const edgeCountField = meta.node_fields.indexOf('edge_count');
  const edgeTypeField = meta.edge_fields.indexOf('type');
  const edgeNameField = meta.edge_fields.indexOf('name_or_index');
  const edgeToField = meta.edge_fields.indexOf('to_node');
  const nodeTypes = meta.node_types[0];
  const propertyEdge = meta.edge_types[0].indexOf('property');
  const typeNameString = snap.strings.indexOf('$typeName');
  const { nodes, edges, strings } = snap;
  const groups = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  let edgeIndex = 0;
  for (let n = 0; n < nodes.length; n += nf) {
    const type = nodeTypes[nodes[n + typeField] as number] ?? 'unknown';
    const name = strings[nodes[n + nameField] as number] ?? '';
    const size = nodes[n + sizeField] as number;
    const edgeCount = nodes[n + edgeCountField] as number;
    let key: string;
    if (type === 'object' || type === 'native') {
      key = name;
      if (name === 'Object' && typeNameString >= 0) {
        for (let e = edgeIndex; e < edgeIndex + edgeCount * ef; e += ef) {
          if (
            edges[e + edgeTypeField] === propertyEdge &&
            edges[e + edgeNameField] === typeNameString
          ) {
            const target = edges[e + edgeToField] as number;
            key = `Object $typeName=${strings[nodes[target + nameField] as number] ?? '?'}`;
            break;
          }
        }
      }
    } else if (type.includes('string')) {
      key = '(strings)';
    } else {
      key = `(${type})`;
    }
    edgeIndex += edgeCount * ef;
    total += size;
    const g = groups.get(key) ?? { bytes: 0, count: 0 };
    g.bytes += size;
    g.count += 1;
    groups.set(key, g);
  }
  return {
    total,
    groups: [...groups.entries()]
      .map(([name, g]) => ({ name, ...g }))
      .sort((a, b) => b.bytes - a.bytes),
  };
}

/** Renders the heap summary as Markdown; `perUnit` divides bytes by a count (such as hooks). */
export function heapMarkdown(
  summary: { total: number; groups: HeapGroup[] },
  perUnit?: { label: string; count: number },
): string {
  const mib = (b: number) => (b / BYTES_PER_MIB).toFixed(2);
  const lines = [
    `Live JS heap after a full GC: ${mib(summary.total)} MiB.`,
    '',
    `| what (type or constructor) | objects | MiB | % of heap |${perUnit ? ` bytes per ${perUnit.label} |` : ''}`,
    `| --- | ---: | ---: | ---: |${perUnit ? ' ---: |' : ''}`,
  ];
  for (const g of summary.groups.slice(0, TOP_GROUPS)) {
    const share = ((100 * g.bytes) / summary.total).toFixed(1);
    const per = perUnit ? ` ${(g.bytes / perUnit.count).toFixed(0)} |` : '';
    lines.push(
      `| ${g.name.replaceAll('|', '\\|')} | ${g.count} | ${mib(g.bytes)} | ${share}% |${per}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
