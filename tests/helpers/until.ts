/** Polls until `test` holds, for what happens on its own (a watch's event): 400 × 25 ms at most. */
export async function until(what: string, test: () => boolean): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (test()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`never: ${what}`);
}
