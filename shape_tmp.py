from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.db.generate import candidates
from agentunit_gym.domains.db.keys import sql_shape
shapes = {}
for c in candidates():
    shapes.setdefault((c.table, sql_shape(c.sql), c.sql.split("LIMIT")[-1] if "LIMIT" in c.sql else ""), set()).add(c.template)
out = {}
for t in get_domain("db").bundled_tasks():
    sql = " ; ".join(t.reference_sql)
    fams = shapes.get((t.tables[0].name, sql_shape(sql), sql.split("LIMIT")[-1] if "LIMIT" in sql else ""))
    if fams:
        assert len(fams) == 1, (t.id, fams)
        out[t.id] = min(fams)
print(len(out)); print(out)
import re
from pathlib import Path
for f in Path("agentunit_gym/domains/db/suite").glob("*.yaml"):
    text = f.read_text()
    for tid, fam in out.items():
        text, n = re.subn(rf"^(- id: {re.escape(tid)}\n)", rf"\1  template: {fam}\n", text, flags=re.M)
    f.write_text(text)
