import sys, time
from agentunit_gym.core.registry import get_domain
from agentunit_gym.core.domain import import_object
from agentunit_gym.tasks.overlap import find_overlap
name = sys.argv[1]; n = int(sys.argv[2])
d = get_domain(name)
test_b = d.bundled_tasks("test")
t0 = time.time(); gt = d.generate_tasks(min(n, 3000) if name != "os" else n, seed=0, split="test"); print("gen test", len(gt), f"{time.time()-t0:.1f}s")
sets = []
for seed in (0, 1, 2):
    t0 = time.time()
    tr = d.generate_tasks(n, seed=seed, split="train")
    print(name, "seed", seed, len(tr), f"{time.time()-t0:.1f}s", "vs bundled test", find_overlap(tr, test_b, d.task_keys).counts(), "vs gen test", find_overlap(tr, gt, d.task_keys).counts())
    sets.append(tr)
ids0 = {t.id for t in sets[0]}; ids1 = {t.id for t in sets[1]}
print("seed0/1 shared ids", len(ids0 & ids1), "distinct of 20000:", len(ids0 | ids1))
raw = import_object(d.generator.generate)(n, seed=0, split="train")
print("raw generator vs bundled test:", find_overlap(raw, test_b, d.task_keys).counts())
