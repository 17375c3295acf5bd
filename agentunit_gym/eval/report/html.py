"""A self-contained HTML report of a run: no external assets (inline CSS, JS and SVG).

Sections: the headline metrics (the registered domains' headlines among them), the
finish-reason bars (AgentBench's table as stacked bars), rate metrics as a chart with CI
whiskers, the whole catalog, per-domain sections (each domain's description says which),
per-env tables, the judged metrics with the judge's agreement and its criteria (once the run is
judged), and a per-episode trace viewer (the traces embedded as JSON, shown by a few lines of JS;
the judge's verdict and reasons beside each judged episode).

The page is ``templates/report.html``, rendered by Jinja2 with autoescape on, so every value
(an agent's name, a task id, a judge's reason) is text; this module computes the data it shows
(the charts' geometry included), the template holds all the markup.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import jinja2

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.eval.report.metrics import headlines
from agentunit_gym.eval.report.summary import load_episodes, load_summary
from agentunit_gym.eval.run.runner import RunPaths

HEADLINE = ("success_rate", "domain_score", "pass@1", "step_efficiency", "invalid_action_rate",
            "tool_hallucination_rate", "cost_per_success")
"""The catalog metrics every report leads with; :func:`headline_names` adds the domains' headlines."""


def headline_names() -> list[str]:
    """The report's headline rows: :data:`HEADLINE`, then each registered domain's headline."""
    return [*HEADLINE, *(h.name for h in headlines())]


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


def ci_text(m: dict[str, Any]) -> str:
    """A metric's interval as ``[low, high]`` in its unit; empty when it has none."""
    if m.get("ci_low") is None:
        return ""
    return f"[{fmt(m['ci_low'], m['unit'])}, {fmt(m['ci_high'], m['unit'])}]"


def verification_text(v: dict[str, Any]) -> str:
    """A criterion's verification: its stability and separation, or ``not verified``."""
    parts = []
    if v.get("stability") is not None:
        parts.append(f"stability {100 * v['stability']:.0f}%")
    if v.get("separation") is not None:
        parts.append(f"separation {v['separation']:+.2f}")
    return ", ".join(parts) or "not verified"


def finish_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """AgentBench's finish-reason table as one stacked bar per (env, agent): the geometry the
    template draws, and the rows for the table of numbers under it."""
    labels = [r.abbreviation for r in FinishReason]
    bar_w, row_h, left = 560, 26, 260
    bars = []
    for i, row in enumerate(rows):
        x, segments = float(left), []
        for label in labels:
            width = bar_w * float(row.get(label, 0.0))
            if width > 0:
                segments.append({"label": label, "x": x, "width": width, "share": float(row[label])})
                x += width
        bars.append({"env": row["env"], "agent": row["agent"], "y": 5 + i * row_h, "segments": segments})
    return {"labels": labels, "colours": FINISH_COLOURS, "width": left + bar_w + 20,
            "height": row_h * len(rows) + 10, "bars": bars, "rows": rows}


def ci_chart(metrics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every share metric with a value as a horizontal bar with its CI whisker, on [0, 1]: the
    geometry the template draws."""
    shown = [(n, m) for n, m in metrics.items() if m["unit"] == "share" and m["value"] is not None]
    left, width, row_h = 220, 520, 20

    def at(share: Any) -> float:
        return left + width * max(0.0, min(1.0, float(share)))

    rows = [{"name": name, "y": 4 + i * row_h, "value": m["value"], "width": at(m["value"]) - left,
             "low": at(m["ci_low"]) if m.get("ci_low") is not None else None,
             "high": at(m["ci_high"]) if m.get("ci_low") is not None else None}
            for i, (name, m) in enumerate(shown)]
    return {"left": left, "plot_width": width, "width": left + width + 60, "height": row_h * len(shown) + 30,
            "ticks": [{"x": left + width * tick / 10, "percent": tick * 10} for tick in range(0, 11, 2)],
            "rows": rows}


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


def model_settings_text(settings: dict[str, Any]) -> str:
    """The model settings a run set (``config.agent_settings``), as ``model: temperature 0.7, ...``;
    empty when it set none (the defaults of :class:`~agentunit_gym.eval.agents.model_client.OpenAIConfig`)."""
    parts = [f"{label} {settings[key]:g}" if isinstance(settings[key], float) else f"{label} {settings[key]}"
             for key, label in MODEL_SETTING_LABELS if settings.get(key) is not None]
    parts += [f"{key}={json.dumps(value)}" for key, value in (settings.get("extra_body") or {}).items()]
    return f"model: {', '.join(parts)}" if parts else ""


def model_settings_line(settings: dict[str, Any]) -> str:
    """:func:`model_settings_text` followed by `` | `` (the separator of the CLI's run line); empty
    when the run set no setting."""
    text = model_settings_text(settings)
    return f"{text} | " if text else ""


def prompt_source_line(config: dict[str, Any]) -> str:
    """Where a ``--protocol agentbench`` run's prompts came from: the AgentBench checkout, or our own."""
    root = config.get("agentbench_root")
    return (f"AgentBench's, read from the checkout {root}" if root
            else "agentunit-gym's own (no AgentBench checkout was given)")


def meta_parts(summary: dict[str, Any]) -> list[str]:
    """The report's line under its title, in parts (the template joins them with `` | ``)."""
    config = summary.get("config", {})
    statuses = summary.get("status") or {}
    apart = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()) if status != "done" and n)
    parts = [f"{summary['episodes']} episodes"
             + (f" ({apart}; endpoint_error and infra_error left out of the metrics)" if apart else ""),
             f"agent {config.get('agent')}",
             f"protocol {config.get('protocol', 'agentunit')} "
             f"(invalid action: {config.get('invalid_action', 'continue')})"]
    if config.get("protocol") == "agentbench":
        parts.append(f"prompts: {prompt_source_line(config)}")
    parts.append(f"network {'on' if config.get('network') else 'off'}")
    if model := model_settings_text(config.get("agent_settings") or {}):
        parts.append(model)
    parts += [f"backends {', '.join(summary.get('backends', []))}", f"agentunit-gym {summary['package_version']}",
              f"git {summary.get('git_revision')}",
              time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(summary["created_at"]))]
    return parts


@functools.cache
def _templates() -> jinja2.Environment:
    templates = jinja2.Environment(loader=jinja2.PackageLoader("agentunit_gym.eval.report", "templates"),
                                   autoescape=True, undefined=jinja2.StrictUndefined,
                                   trim_blocks=True, lstrip_blocks=True)
    templates.filters.update(fmt=fmt, ci=ci_text, verification=verification_text)
    return templates


def write_report(run_dir: Path) -> Path:
    """Write ``report.html`` for the run in ``run_dir``: ``templates/report.html`` rendered by
    Jinja2 with autoescape on (every value is text), self-contained (inline CSS, JS and SVG).

    Returns:
        The report's path.

    Raises:
        ConfigError: ``run_dir`` is not a run directory.
    """
    summary = load_summary(run_dir)
    overall = summary["overall"]["metrics"]
    config = summary.get("config", {})
    page = _templates().get_template("report.html").render(
        title=f"{config.get('agent', '?')} on {', '.join(config.get('envs', []))}", meta=meta_parts(summary),
        names=headline_names(), overall=overall, left_out=summary.get("left_out", []),
        finish=finish_chart(summary["finish_reasons"]), chart=ci_chart(overall), judge=summary.get("judge"),
        per_domain=summary.get("per_domain", {}), per_env_metrics=summary["per_env"], traces=_trace_data(run_dir))
    path = RunPaths(run_dir).report
    path.write_text(page, encoding="utf-8")
    return path
