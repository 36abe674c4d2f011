/**
 * How a source tells the daemon that something a pass depends on has changed (a pod of this node,
 * a watched secret or configmap, the API server lost or back, a manifest dir touched), so that a
 * pass runs now instead of at the next poll. A change carries no data: the pass that follows
 * observes everything again, so a lost or repeated notice costs at most a pass, never a decision.
 */

/** `reason`: a few words for logs and metrics (`pod changed`, `apiserver lost`). */
export type ChangeListener = (reason: string) => void;

/** The reasons told when the API server can no longer be followed (a failover may be due), and
 *  when it can again (a withdrawal may be). */
export const API_LOST = "apiserver lost";
export const API_BACK = "apiserver back";
export const REACHABILITY: ReadonlySet<string> = new Set([API_LOST, API_BACK]);

export interface ChangeFeed {
  /** Returns a function that stops the listener. */
  subscribe(listener: ChangeListener): () => void;
}

/** A feed its owner emits on; listeners that throw do not stop the others. */
export class ChangeFanout implements ChangeFeed {
  readonly #listeners = new Set<ChangeListener>();

  subscribe(listener: ChangeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  emit(reason: string): void {
    for (const listener of this.#listeners) {
      try {
        listener(reason);
      } catch {
        // A listener's failure is its own; the source must go on telling the others.
      }
    }
  }
}
