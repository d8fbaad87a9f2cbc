// The pressure charts: one uPlot per node, CPU and memory EWMA over the last hour with the
// rebalancer's trigger (0.85) and destination cap (0.75) drawn, and each rebalancer move marked.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { PressurePoints } from '../../src/dashboard/wire.js';

const HOUR = 3_600_000;

export interface Move {
  t: number;
  src: string;
  dst: string;
  replica: string;
}

export class Charts {
  private readonly points = new Map<string, [number, number, number][]>();
  private readonly plots = new Map<string, uPlot>();
  private moves: Move[] = [];

  constructor(private readonly thresholds: () => { trigger: number; dstCap: number }) {}

  add(p: PressurePoints): void {
    const cutoff = Date.now() - HOUR;
    for (const [node, pts] of Object.entries(p)) {
      const list = this.points.get(node) ?? [];
      list.push(...pts);
      while (list.length && list[0]![0] < cutoff) list.shift();
      this.points.set(node, list);
    }
  }

  addMove(m: Move): void {
    this.moves.push(m);
  }

  nodes(): string[] {
    return [...this.points.keys()].sort();
  }

  private data(node: string): uPlot.AlignedData {
    const pts = this.points.get(node) ?? [];
    return [pts.map((p) => p[0] / 1000), pts.map((p) => p[1]), pts.map((p) => p[2])];
  }

  /** Draws (or updates) the chart of every node listed into `host`, which holds one div per node. */
  draw(host: HTMLElement, nodes: string[]): void {
    for (const node of nodes) {
      const el = host.querySelector<HTMLElement>(`[data-chart="${CSS.escape(node)}"]`);
      if (!el) continue;
      const have = this.plots.get(node);
      if (have && have.root.parentElement === el) {
        have.setData(this.data(node));
        continue;
      }
      have?.destroy();
      this.plots.set(node, new uPlot(this.options(node, Math.max(300, el.clientWidth || 420)), this.data(node), el));
    }
  }

  private options(node: string, width: number): uPlot.Options {
    const moves = () => this.moves.filter((m) => m.src === node || m.dst === node);
    return {
      title: node,
      width,
      height: 180,
      // At least the last five minutes wide: a chart of one or two samples stays readable.
      scales: { x: { range: (_u, min, max) => [Math.min(min, max - 300), max] }, y: { range: [0, 1.1] } },
      axes: [{}, { values: (_u, vals) => vals.map((v) => `${Math.round(v * 100)}%`) }],
      series: [
        {},
        { label: 'CPU EWMA', stroke: '#2563eb', width: 2, value: (_u, v) => (v === null ? '-' : `${(v * 100).toFixed(1)}%`) },
        { label: 'memory EWMA', stroke: '#16a34a', width: 2, value: (_u, v) => (v === null ? '-' : `${(v * 100).toFixed(1)}%`) },
      ],
      hooks: {
        // The thresholds across the whole width, then the rebalancer moves touching this node: a
        // vertical line each, labelled out (→) or in (←).
        draw: [
          (u) => {
            const ctx = u.ctx;
            ctx.save();
            // uPlot leaves the axes' text alignment on the context.
            ctx.textAlign = 'left';
            ctx.textBaseline = 'alphabetic';
            const t = this.thresholds();
            for (const [v, color, dash, label] of [
              [t.trigger, '#dc2626', [6, 4], 'trigger'],
              [t.dstCap, '#d97706', [2, 4], 'dst cap'],
            ] as const) {
              const y = u.valToPos(v, 'y', true);
              ctx.strokeStyle = color;
              ctx.setLineDash(dash.map((d) => d * devicePixelRatio));
              ctx.lineWidth = devicePixelRatio;
              ctx.beginPath();
              ctx.moveTo(u.bbox.left, y);
              ctx.lineTo(u.bbox.left + u.bbox.width, y);
              ctx.stroke();
              ctx.fillStyle = color;
              ctx.font = `${10 * devicePixelRatio}px sans-serif`;
              ctx.fillText(`${label} ${v}`, u.bbox.left + 4, y - 3 * devicePixelRatio);
            }
            ctx.setLineDash([]);
            for (const m of moves()) {
              const x = u.valToPos(m.t / 1000, 'x', true);
              if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
              ctx.strokeStyle = '#7c3aed';
              ctx.lineWidth = 2;
              ctx.beginPath();
              ctx.moveTo(x, u.bbox.top);
              ctx.lineTo(x, u.bbox.top + u.bbox.height);
              ctx.stroke();
              ctx.fillStyle = '#7c3aed';
              ctx.font = `${12 * devicePixelRatio}px sans-serif`;
              ctx.fillText(`${m.src === node ? '→' : '←'} ${m.replica}`, x + 4, u.bbox.top + 14 * devicePixelRatio);
            }
            ctx.restore();
          },
        ],
      },
    };
  }
}
