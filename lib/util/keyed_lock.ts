/** Serializes async work per key: work on one key runs in call order, other keys run freely. */
export class KeyedLock {
  #tails = new Map<string, Promise<void>>();

  async run<R>(key: string, work: () => Promise<R>): Promise<R> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const done = new Promise<void>((resolve) => release = resolve);
    // Tails only ever resolve, so one failed piece of work never poisons the queue.
    const tail = previous.then(() => done);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await work();
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }
}
