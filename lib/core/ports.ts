/**
 * The ports a pod declares, as the kubelet reads them: the host ports its admission compares
 * between pods (the NodePorts predicate refuses a pod declaring a host port an admitted pod
 * already declares), and the port names its probes and lifecycle handlers resolve against.
 * A checkpoint declares no ports at all, so the returning parent is admitted beside it.
 */
import { asArray, isObject, type Json } from "./json.ts";
import type { Pod } from "./pod.ts";

export const CONTAINER_LISTS = ["initContainers", "containers", "ephemeralContainers"] as const;

export type ContainerList = (typeof CONTAINER_LISTS)[number];

export interface HostPort {
  list: ContainerList;
  container: string;
  /** As declared; the kubelet reads "" as TCP. */
  protocol: string;
  /** "" binds every address. */
  hostIP: string;
  hostPort: number;
  containerPort: number;
}

/**
 * Host ports as the API server stores the pod and the kubelet reads a static one: in a
 * hostNetwork pod every port of a container or init container without a hostPort gets its
 * containerPort (SetDefaults_Pod, pkg/apis/core/v1/defaults.go).
 */
export function declaredHostPorts(
  pod: Pod,
  lists: readonly ContainerList[] = CONTAINER_LISTS,
): HostPort[] {
  const spec: Json = isObject(pod.spec) ? pod.spec : {};
  const hostNetwork = spec.hostNetwork === true;
  const ports: HostPort[] = [];
  for (const list of lists) {
    const defaulted = hostNetwork && list !== "ephemeralContainers";
    for (const container of asArray(spec[list])) {
      for (const port of asArray(container.ports)) {
        const containerPort = positive(port.containerPort) ?? 0;
        const hostPort = positive(port.hostPort) ?? (defaulted ? containerPort : 0);
        if (!hostPort) continue;
        ports.push({
          list,
          container: String(container.name),
          protocol: typeof port.protocol === "string" ? port.protocol : "",
          hostIP: typeof port.hostIP === "string" ? port.hostIP : "",
          hostPort,
          containerPort,
        });
      }
    }
  }
  return ports;
}

function positive(value: unknown): number | undefined {
  return typeof value === "number" && value > 0 ? value : undefined;
}

const PROBES = ["livenessProbe", "readinessProbe", "startupProbe"] as const;
const HOOKS = ["postStart", "preStop"] as const;
/** Handlers whose port may be a name; a gRPC probe's port is always a number. */
const PORT_ACTIONS = ["httpGet", "tcpSocket"] as const;

/**
 * Removes every container's `ports` from a pod spec (in place). A probe or lifecycle handler
 * that names a port gets the number the container declared under that name, as the kubelet
 * would have resolved it (within the container's own ports); a name that resolves to nothing is
 * left as it is and said.
 */
export function dropPortDeclarations(spec: Json): string[] {
  const warnings: string[] = [];
  for (const list of CONTAINER_LISTS) {
    for (const container of asArray(spec[list])) {
      const numbers = new Map<string, unknown>();
      for (const port of asArray(container.ports)) {
        if (typeof port.name === "string") numbers.set(port.name, port.containerPort);
      }
      for (const { where, handler } of portHandlers(container)) {
        for (const action of PORT_ACTIONS) {
          const target = handler[action];
          if (!isObject(target) || typeof target.port !== "string") continue;
          const number = numbers.get(target.port);
          if (typeof number === "number") {
            target.port = number;
          } else {
            warnings.push(
              `container ${String(container.name)}: ${where} ${action} port ${target.port} ` +
                "names no port the container declares; left as it is",
            );
          }
        }
      }
      delete container.ports;
    }
  }
  return warnings;
}

function portHandlers(container: Json): { where: string; handler: Json }[] {
  const handlers: { where: string; handler: Json }[] = [];
  for (const probe of PROBES) {
    const handler = container[probe];
    if (isObject(handler)) handlers.push({ where: probe, handler });
  }
  const lifecycle = container.lifecycle;
  for (const hook of HOOKS) {
    const handler = isObject(lifecycle) ? lifecycle[hook] : undefined;
    if (isObject(handler)) handlers.push({ where: `lifecycle.${hook}`, handler });
  }
  return handlers;
}
