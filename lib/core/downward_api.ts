/**
 * Downward API items rendered the way the kubelet renders them, from the parent pod, so a
 * checkpoint's projected volume holds the same files the parent saw.
 */
import type { Pod } from "./pod.ts";

export type Rendered = { value: string } | { error: string };

/** The kubelet's FormatMap: `key="value"` lines in key order. */
function formatMap(map: Record<string, string> | undefined): string {
  return Object.keys(map ?? {}).sort().map((k) => `${k}=${JSON.stringify(map![k])}`).join("\n");
}

const SUBSCRIPTED = /^metadata\.(labels|annotations)\['(.+)'\]$/;

export function renderFieldRef(pod: Pod, fieldPath: string): Rendered {
  const meta = pod.metadata;
  switch (fieldPath) {
    case "metadata.name":
      return { value: meta.name };
    case "metadata.namespace":
      return { value: meta.namespace };
    case "metadata.uid":
      return { value: meta.uid ?? "" };
    case "metadata.labels":
      return { value: formatMap(meta.labels) };
    case "metadata.annotations":
      return { value: formatMap(meta.annotations) };
  }
  const m = SUBSCRIPTED.exec(fieldPath);
  if (m) return { value: (m[1] === "labels" ? meta.labels : meta.annotations)?.[m[2]] ?? "" };
  return { error: `unsupported fieldPath ${fieldPath}` };
}

const SUFFIXES: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$/;

/** A Kubernetes resource quantity as a number (exact enough for rendering whole units). */
export function parseQuantity(text: string): number | undefined {
  const m = QUANTITY.exec(text.trim());
  if (!m) return undefined;
  const suffix = m[2] ?? "";
  const scale = /^[eE]/.test(suffix) ? 10 ** Number(suffix.slice(1)) : SUFFIXES[suffix];
  return Number(m[1]) * scale;
}

function quantityOf(value: unknown): number | undefined {
  if (typeof value === "number") return value;
  return typeof value === "string" ? parseQuantity(value) : undefined;
}

type Json = Record<string, unknown>;

function field(obj: unknown, key: string): unknown {
  return typeof obj === "object" && obj !== null ? (obj as Json)[key] : undefined;
}

export function renderResourceFieldRef(pod: Pod, ref: Json): Rendered {
  const resource = String(ref.resource ?? "");
  const m = /^(limits|requests)\.(.+)$/.exec(resource);
  if (!m) return { error: `unsupported resource ${resource}` };
  const containers = [
    ...(field(pod.spec, "containers") as unknown[] ?? []),
    ...(field(pod.spec, "initContainers") as unknown[] ?? []),
  ];
  const container = containers.find((c) => field(c, "name") === ref.containerName);
  if (!container) return { error: `no container ${String(ref.containerName)}` };
  const raw = field(field(field(container, "resources"), m[1]), m[2]);
  if (raw === undefined && m[1] === "limits") {
    // The kubelet would fall back to the node's allocatable amount, which the agent cannot know.
    return { error: `${resource} is not set on container ${String(ref.containerName)}` };
  }
  const amount = raw === undefined ? 0 : quantityOf(raw);
  const divisor = ref.divisor === undefined ? 1 : quantityOf(ref.divisor);
  if (amount === undefined || !divisor) return { error: `bad quantity for ${resource}` };
  // CPU is divided in millicores, everything else in whole units, as the kubelet does.
  const value = m[2] === "cpu"
    ? Math.ceil(Math.ceil(amount * 1000) / Math.ceil(divisor * 1000))
    : Math.ceil(Math.ceil(amount) / Math.ceil(divisor));
  return { value: String(value) };
}
