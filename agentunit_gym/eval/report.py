"""A self-contained HTML report of a run: no external assets (inline CSS, JS and SVG).

Sections: the headline metrics (the registered domains' headlines among them), the
finish-reason bars (AgentBench's table as stacked bars), rate metrics as a chart with CI
whiskers, the whole catalog, per-domain sections (each domain's description says which),
per-env tables, the judged metrics with the judge's agreement and its criteria (once the run is
judged), and a per-episode trace viewer (the traces embedded as JSON, shown by a few lines of JS;
the judge's verdict and reasons beside each judged episode).
"""

from __future__ import annotations

import html
import json
import time
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.eval.metrics import headlines
from agentunit_gym.eval.runner import RunPaths
from agentunit_gym.eval.summary import load_episodes, load_summary

HEADLINE = ("success_rate", "domain_score", "pass@1", "step_efficiency", "invalid_action_rate",
            "tool_hallucination_rate", "cost_per_success")
"""The catalog metrics every report leads with; :func:`headline_names` adds the domains' headlines."""


def headline_names() -> list[str]:
    """The report's headline rows: :data:`HEADLINE`, then each registered domain's headline."""
    return [*HEADLINE, *(h.name for h in headlines())]


def domain_sections(per_domain: dict[str, Any]) -> str:
    """One block per domain of the run: its title, then a table per report section."""
    out = []
    for name, block in per_domain.items():
        out.append(f"<h3 id='domain-{html.escape(name)}'>{html.escape(block.get('title', name))} "
                   f"({int(block.get('episodes', 0))} episodes)</h3>")
        for section in block.get("sections", []):
            out.append(f"<h4>{html.escape(section['title'])}</h4>")
            if section.get("description"):
                out.append(f"<p>{html.escape(section['description'])}</p>")
            out.append(metrics_table(block["metrics"], list(section["metrics"])))
    return "".join(out)


REPORT_CAP = 600
"""Characters of each action and observation embedded in the report."""

PROMPT_CAP = 4000
"""Characters of each episode's prompt embedded in the report (the task is at its end)."""


def clip(text: str, cap: int) -> str:
    """``text`` cut to about ``cap`` characters at a sentence or line end, saying how much was left out.

    Example: ``clip("One. Two. Three.", 10) == "One. Two. [... 7 more characters]"``.
    """
    if len(text) <= cap:
        return text
    head = text[:cap]
    cut = max(head.rfind(". "), head.rfind(".\n"), head.rfind("\n"))
    if cut >= cap // 2:
        head = head[: cut + 1]
    return f"{head.rstrip()} [... {len(text) - len(head)} more characters]"

FINISH_COLOURS = {
    "Complete": "#3a9d5d", "CLE": "#8e6cc9", "IF": "#e0a030", "IA": "#d9653b", "TLE": "#4a7fd0", "Error": "#777777",
}


def fmt(value: float | None, unit: str = "share") -> str:
    """A metric value for people: shares as percentages, seconds and money with sensible digits."""
    if value is None:
        return "n/a"
    if unit == "share":
        return f"{100 * value:.1f}%"
    if unit == "USD":
        return f"${value:.4f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def _ci(m: dict[str, Any]) -> str:
    if m.get("ci_low") is None:
        return ""
    return f"[{fmt(m['ci_low'], m['unit'])}, {fmt(m['ci_high'], m['unit'])}]"


def metrics_table(metrics: dict[str, dict[str, Any]], names: list[str] | None = None) -> str:
    rows = []
    for name, m in metrics.items():
        if names is not None and name not in names:
            continue
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td class='group'>{html.escape(m['group'])}</td>"
            f"<td class='num'>{fmt(m['value'], m['unit'])}</td><td class='num'>{_ci(m)}</td>"
            f"<td class='num'>{m['n']}</td><td class='group'>{html.escape(str(m.get('ci_method') or ''))}</td></tr>"
        )
    return ("<table><thead><tr><th>metric</th><th>group</th><th>value</th><th>95% CI</th><th>n</th>"
            "<th>CI method</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def finish_bars(rows: list[dict[str, Any]]) -> str:
    """AgentBench's finish-reason table as one stacked bar per (env, agent), plus the numbers."""
    labels = [r.abbreviation for r in FinishReason]
    bar_w, row_h, left = 560, 26, 260
    height = row_h * len(rows) + 10
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{left + bar_w + 20}' height='{height}' "
             "role='img' aria-label='finish reasons'>"]
    for i, row in enumerate(rows):
        y = 5 + i * row_h
        parts.append(f"<text x='0' y='{y + 16}' font-size='12'>{html.escape(row['env'])} / "
                     f"{html.escape(row['agent'])}</text>")
        x = float(left)
        for label in labels:
            w = bar_w * float(row.get(label, 0.0))
            if w > 0:
                parts.append(f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='18' fill='{FINISH_COLOURS[label]}'>"
                             f"<title>{label}: {100 * row[label]:.1f}%</title></rect>")
                x += w
    parts.append("</svg>")
    legend = "<div class='legend'>" + "".join(
        f"<span><i style='background:{FINISH_COLOURS[label]}'></i>{label}</span>" for label in labels) + "</div>"
    head = "".join(f"<th>{label}</th>" for label in labels)
    body = "".join(
        f"<tr><td>{html.escape(r['env'])}</td><td>{html.escape(r['agent'])}</td><td class='num'>{int(r['n'])}</td>"
        + "".join(f"<td class='num'>{100 * r.get(label, 0.0):.1f}%</td>" for label in labels) + "</tr>"
        for r in rows)
    table = f"<table><thead><tr><th>env</th><th>agent</th><th>n</th>{head}</tr></thead><tbody>{body}</tbody></table>"
    return legend + "".join(parts) + table


def ci_chart(metrics: dict[str, dict[str, Any]]) -> str:
    """Every share metric with a value as a horizontal bar with its CI whisker, on [0, 1]."""
    shown = [(n, m) for n, m in metrics.items() if m["unit"] == "share" and m["value"] is not None]
    left, width, row_h = 220, 520, 20
    height = row_h * len(shown) + 30
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{left + width + 60}' height='{height}' "
             "role='img' aria-label='metrics with confidence intervals'>"]
    for tick in range(0, 11, 2):
        x = left + width * tick / 10
        parts.append(f"<line x1='{x}' y1='0' x2='{x}' y2='{height - 20}' stroke='#e3e7ee'/>"
                     f"<text x='{x - 8}' y='{height - 6}' font-size='10'>{tick * 10}%</text>")
    for i, (name, m) in enumerate(shown):
        y = 4 + i * row_h
        value = max(0.0, min(1.0, float(m["value"])))
        parts.append(f"<text x='0' y='{y + 12}' font-size='11'>{html.escape(name)}</text>"
                     f"<rect x='{left}' y='{y + 3}' width='{width * value:.1f}' height='10' fill='#9db8ea'/>")
        if m.get("ci_low") is not None:
            lo, hi = (left + width * max(0.0, min(1.0, float(m[k]))) for k in ("ci_low", "ci_high"))
            parts.append(f"<line x1='{lo:.1f}' y1='{y + 8}' x2='{hi:.1f}' y2='{y + 8}' stroke='#1d2330'/>"
                         f"<line x1='{lo:.1f}' y1='{y + 3}' x2='{lo:.1f}' y2='{y + 13}' stroke='#1d2330'/>"
                         f"<line x1='{hi:.1f}' y1='{y + 3}' x2='{hi:.1f}' y2='{y + 13}' stroke='#1d2330'/>")
        parts.append(f"<text x='{left + width + 6}' y='{y + 12}' font-size='10'>{fmt(m['value'])}</text>")
    parts.append("</svg>")
    return "".join(parts)


def left_out_section(left_out: list[dict[str, str]]) -> str:
    """The tasks the run left out (their env cannot run them here), with the reason; empty
    when none was."""
    if not left_out:
        return ""
    rows = "".join(f"<tr><td>{html.escape(str(lo.get('env', '')))}</td><td>{html.escape(str(lo.get('task', '')))}</td>"
                   f"<td>{html.escape(str(lo.get('reason', '')))}</td></tr>" for lo in left_out)
    return (f"<h2 id='left-out'>Left out ({len(left_out)} tasks, not run and not counted)</h2>"
            "<table><thead><tr><th>env</th><th>task</th><th>reason</th></tr></thead><tbody>"
            f"{rows}</tbody></table>")


def judge_section(block: dict[str, Any] | None) -> str:
    """The judged run: who judged, the agreement with the env's check, the judged metrics, and
    per (domain, category) the criteria kept and the ones the verifier dropped with the reason."""
    if not block:
        return "<p>Not judged (<code>agentunit-gym judge RUN_DIR --judge openai:MODEL</code> adds it).</p>"
    a = block["agreement"]
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(block.get("unjudged_reasons", {}).items()))
    out = [f"<p>Judge <strong>{html.escape(str(block['judge']))}</strong>: {block['judged']} episodes judged, "
           f"{block['unjudged']} unjudged{' (' + html.escape(reasons) + ')' if reasons else ''}, "
           f"{block.get('not_yet_judged', 0)} not yet judged. Unjudged episodes are left out, never scored.</p>",
           f"<p class='agreement'>Agreement with the env's own check (judged <em>achieved</em> equals "
           f"<code>score.success</code>): <strong>{fmt(a['value'])}</strong> {_ci(a)} over {a['n']} episodes; "
           f"judged achieved but failed the check: {a['judged_achieved_env_failed']}, judged not achieved but "
           f"passed: {a['judged_failed_env_succeeded']}.</p>",
           metrics_table(block["metrics"])]
    for item in block.get("criteria", []):
        out.append(f"<h4>{html.escape(item['domain'])} / {html.escape(item['category'])} "
                   f"(criteria: {html.escape(item['source'])})</h4>")
        rows = []
        for c in item.get("criteria", []):
            v = item.get("verification", {}).get(c["name"], {})
            rows.append(f"<tr><td>{html.escape(c['name'])}</td><td>{html.escape(c['description'])}</td>"
                        f"<td>{html.escape(' < '.join(c['accepted_values']))}</td><td>kept</td>"
                        f"<td>{html.escape(_verification(v))}</td></tr>")
        for d in item.get("dropped", []):
            c = d["criterion"]
            rows.append(f"<tr class='dropped'><td>{html.escape(c['name'])}</td><td>{html.escape(c['description'])}"
                        f"</td><td>{html.escape(' < '.join(c['accepted_values']))}</td><td>dropped</td>"
                        f"<td>{html.escape(d['reason'])}</td></tr>")
        if rows:
            out.append("<table><thead><tr><th>criterion</th><th>description</th><th>accepted values</th>"
                       "<th>verifier</th><th>why</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
        for note in item.get("notes", []):
            out.append(f"<p class='group'>{html.escape(note)}</p>")
    return "".join(out)


def _verification(v: dict[str, Any]) -> str:
    parts = []
    if v.get("stability") is not None:
        parts.append(f"stability {100 * v['stability']:.0f}%")
    if v.get("separation") is not None:
        parts.append(f"separation {v['separation']:+.2f}")
    return ", ".join(parts) or "not verified"


def _judged_by_episode(run_dir: Path) -> dict[str, dict[str, Any]]:
    from agentunit_gym.eval.judge.run import read_judged

    out = {}
    for line in read_judged(run_dir).values():
        if line.status == "judged":
            out[line.episode_id] = {"fidelity": line.goal_fidelity, "achieved": line.achieved,
                                    "values": line.values, "reason": line.reason[:REPORT_CAP]}
        else:
            out[line.episode_id] = {"unjudged": f"{line.error_kind}: {line.error[:200]}"}
    return out


def _trace_data(run_dir: Path) -> list[dict[str, Any]]:
    records, episodes = load_episodes(run_dir)
    judged = _judged_by_episode(run_dir)
    out = []
    for e in episodes:
        t = e.trace
        out.append({
            "judge": judged.get(t.episode_id),
            "key": f"{t.env_id or t.domain} {t.task_id} run {e.run}",
            "success": bool(t.score and t.score.success),
            "reward": t.score.reward if t.score else 0.0,
            "finish": t.finish_reason.abbreviation if t.finish_reason else "?",
            "detail": clip(t.finish_detail, REPORT_CAP),
            "prompt": clip(t.prompt, PROMPT_CAP),
            "steps": [{"index": s.index, "action": clip(s.raw_action, REPORT_CAP),
                       "observation": clip(s.observation, REPORT_CAP),
                       "flags": [f.value for f in s.flags]} for s in t.steps],
        })
    return out


MODEL_SETTING_LABELS: tuple[tuple[str, str], ...] = (
    ("temperature", "temperature"), ("top_p", "top_p"), ("max_tokens", "max_tokens"),
    ("request_timeout_s", "request timeout s"), ("turn_deadline_s", "turn deadline s"))


def model_settings_line(settings: dict[str, Any]) -> str:
    """The model settings a run set (``config.agent_settings``), as ``model: temperature 0.7, ... | ``;
    empty when it set none (the defaults of :class:`~agentunit_gym.eval.model_client.OpenAIConfig`)."""
    parts = [f"{label} {settings[key]:g}" if isinstance(settings[key], float) else f"{label} {settings[key]}"
             for key, label in MODEL_SETTING_LABELS if settings.get(key) is not None]
    parts += [f"{key}={json.dumps(value)}" for key, value in (settings.get("extra_body") or {}).items()]
    return f"model: {', '.join(parts)} | " if parts else ""


def prompt_source_line(config: dict[str, Any]) -> str:
    """Where a ``--protocol agentbench`` run's prompts came from: the AgentBench checkout, or our own."""
    root = config.get("agentbench_root")
    return (f"AgentBench's, read from the checkout {root}" if root
            else "agentunit-gym's own (no AgentBench checkout was given)")


def write_report(run_dir: Path) -> Path:
    """Write ``report.html`` for the run in ``run_dir``.

    Returns:
        The report's path.

    Raises:
        ConfigError: ``run_dir`` is not a run directory.
    """
    summary = load_summary(run_dir)
    overall = summary["overall"]["metrics"]
    config = summary.get("config", {})
    title = f"{config.get('agent', '?')} on {', '.join(config.get('envs', []))}"
    statuses = summary.get("status") or {}
    apart = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()) if status != "done" and n)
    meta = (f"{summary['episodes']} episodes" + (f" ({html.escape(apart)}; endpoint_error and infra_error left "
                                                  "out of the metrics)" if apart else "")
            + f" | agent {html.escape(str(config.get('agent')))} | "
            f"protocol {html.escape(str(config.get('protocol', 'agentunit')))} (invalid action: "
            f"{html.escape(str(config.get('invalid_action', 'continue')))}) | "
            + (f"prompts: {html.escape(prompt_source_line(config))} | " if config.get("protocol") == "agentbench"
               else "")
            + f"network {'on' if config.get('network') else 'off'} | "
            f"{html.escape(model_settings_line(config.get('agent_settings') or {}))}"
            f"backends {html.escape(', '.join(summary.get('backends', [])))} | agentunit-gym "
            f"{html.escape(summary['package_version'])} | git {html.escape(str(summary.get('git_revision')))} | "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(summary['created_at']))}")
    names = headline_names()
    per_env = domain_sections(summary.get("per_domain", {})) + "".join(
        f"<h3>{html.escape(env)}</h3>" + metrics_table(t["metrics"], names) for env, t in summary["per_env"].items())
    # Any "<" in the embedded JSON could end the script element early ("</script>") or switch
    # the parser's state ("<!--"); as \u003c it is the same JSON string and inert HTML.
    traces = json.dumps(_trace_data(run_dir)).replace("<", "\\u003c")
    template = Template(resources.files("agentunit_gym.eval").joinpath("templates/report.html").read_text("utf-8"))
    page = template.safe_substitute(
        title=html.escape(title), meta=meta, headline=metrics_table(overall, names),
        finish=finish_bars(summary["finish_reasons"]), chart=ci_chart(overall), metrics=metrics_table(overall),
        per_env=per_env, traces=traces, judge=judge_section(summary.get("judge")),
        left_out=left_out_section(summary.get("left_out", [])),
    )
    path = RunPaths(run_dir).report
    path.write_text(page, encoding="utf-8")
    return path
