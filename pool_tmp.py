import sys, time
from agentunit_gym.core.registry import get_domain
from agentunit_gym.core.domain import import_object
from agentunit_gym.tasks.overlap import find_overlap
name = sys.argv[1]
d = get_domain(name)
g = import_object(d.generator.generate); c = import_object(d.generator.ceiling)
t0=time.time()
tr = g(c("train"), split="train"); te = g(c("test"), split="test")
print(name, "train", len(tr), "test", len(te), f"{time.time()-t0:.1f}s")
t0=time.time()
o = find_overlap(tr, te, d.task_keys); print(o.counts(), f"{time.time()-t0:.1f}s")
A = {t.id: t for t in tr}; B = {t.id: t for t in te}
for s in o.shared["answer"][:8]:
    a = A[s.a_ids[0]]; b = B[s.b_ids[0]]
    print(" ", s.value[:150]); print("    A", a.instruction, getattr(a, "reference_sql", "")); print("    B", b.instruction, getattr(b, "reference_sql", ""))
