"""The alert history `trainmaster cluster monitoring` prints: Prometheus' ALERTS series (a
range query) cut into firing episodes, and what `trainmaster demo` prints last. Against the
live Prometheus: tests/cluster/test_real_monitoring.py."""

from __future__ import annotations

import typer

from trainmaster.cli import app
from trainmaster.cli._cluster import history_table
from trainmaster.cli._demo import next_commands
from trainmaster.cluster import AlertEpisode, alert_episodes


def _series(name: str, job: str, times: list[float]) -> dict[str, object]:
    return {"metric": {"__name__": "ALERTS", "alertname": name, "alertstate": "firing",
                       "trainingjob": job, "severity": "warning"},
            "values": [[t, "1"] for t in times]}


def test_a_series_is_cut_where_the_alert_stopped_firing() -> None:
    step = 15.0
    matrix = [
        # Fired 100-145, resolved, fired again from 400 to the end of the range (460).
        _series("TrainingGangRestarted", "dp", [100, 115, 130, 145, 400, 415, 430, 445, 460]),
        _series("TrainingNoProgress", "dp", [200, 215]),
    ]
    got = alert_episodes(matrix, step, until=460)
    labels = {"trainingjob": "dp", "severity": "warning"}
    assert got == [
        AlertEpisode("TrainingGangRestarted", labels, 100, 145),
        AlertEpisode("TrainingNoProgress", labels, 200, 215),
        AlertEpisode("TrainingGangRestarted", labels, 400, None),  # still firing
    ]
    assert alert_episodes([], step, until=460) == []


def test_the_history_table_shows_each_episode() -> None:
    from rich.console import Console

    table = history_table([AlertEpisode("TrainingGangRestarted", {"trainingjob": "dp"},
                                        1767268800.0, 1767268830.0)], 60)
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "TrainingGangRestarted" in text and "trainingjob=dp" in text
    assert "2026-01-01 12:00:00Z" in text and "30s" in text
    console = Console(width=200, record=True)
    console.print(history_table([], 60))
    assert "no alert fired" in console.export_text()


def test_the_demo_runs_the_monitoring_stack_by_default_and_says_where_to_look() -> None:
    demo = getattr(typer.main.get_command(app), "commands", {})["demo"]
    (monitoring,) = [p for p in demo.params if p.name == "monitoring"]
    assert monitoring.default is True
    assert "--no-monitoring" in monitoring.secondary_opts
    shown = "\n".join(next_commands(True))
    assert "trainmaster cluster monitoring" in shown and "alert history" in shown
    assert "trainmaster cluster monitoring" not in "\n".join(next_commands(False))
