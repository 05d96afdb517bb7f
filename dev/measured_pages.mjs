// The four pages the page benchmarks measure: the board, /arena, a collection's page and a run's
// page, on an arena with the HF stand-in (ARENA_TEST_* as dev/lib.sh's start_test_stack sets):
// publishes and submits a collection, and launches a run of it on the simulated local challenge.
import { BASE, publish, submit, token } from '../end2end/support.mjs';

export async function measuredPages() {
  const id = await submit(publish('heidi', 'good'), 'Measured collection', 'heidi');
  const launched = await fetch(`${BASE}/api/challenges/local-demo/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token('heidi')}` },
    body: JSON.stringify({ request_id: `measured-${Date.now()}`, environment_id: id }),
  });
  const run = (await launched.json()).run?.run_id;
  if (!run) throw new Error(`the run was not launched: ${launched.status}`);
  return ['/', '/arena', `/arena/submissions/${id}`, `/arena/runs/${run}`];
}
