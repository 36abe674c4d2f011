/** Imports the module its argument names, if any, and waits: for bench/import_cost.ts. */
if (Deno.args[0]) await import(Deno.args[0]);
setInterval(() => {}, 60_000);
