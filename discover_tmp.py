import sys, time
from agentunit_gym.core.registry import get_domain
from agentunit_gym.core.domain import import_object
from agentunit_gym.tasks.overlap import find_overlap
for name, n in [(a, None if a in ("db","kg") else 20000) for a in sys.argv[1:]]:
    d = get_domain(name)
    t0 = time.time()
    if n is None:
        n = import_object(d.generator.ceiling)(None)
    pool = import_object(d.generator.generate)(n, seed=0, split=None)
    print(name, "pool", len(pool), f"{time.time()-t0:.1f}s")
    bundled = d.bundled_tasks()
    o = find_overlap(bundled, pool, d.task_keys)
    print(" counts", o.counts())
    bt = {t.id: t for t in bundled}; pt = {t.id: t for t in pool}
    for k, items in o.shared.items():
        for s in items[:40]:
            for a in s.a_ids:
                print(f"  {k}: {a} [{bt[a].split} {bt[a].template}] ~ {[ (b, pt[b].template, pt[b].split) for b in s.b_ids[:3]]} ({len(s.b_ids)})")
